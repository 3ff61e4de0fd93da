#!/usr/bin/env bash
# For a GPU machine with no internet: run this on a machine with network, in
# the checkout that scripts/device_check.sh will run from (or copy the two
# folders it makes there). Where the checkout is sent by a remote-device tool,
# as this project's H200 is, those ignored folders travel only when the call
# names them (its `carry`). An online GPU machine needs none of this.
#   .whl/                    kvikio-cu13 and the wheels it needs beyond the GPU image's own
#   .dev/liburing/           Debian's liburing-dev, unpacked, for the io_uring engine's build
#   .dev/cuda/include/       CUDA runtime and cuFile headers (from the nvidia-* wheels), used
#                            only where the image's toolkit lacks them
#   .dev/python-include/     Python 3.12 headers, used only where the image's Python has no Python.h
#   .gdsbench-commit         the commit (and "dirty") for device_check.sh's records; not ignored, so it travels
set -euo pipefail
cd "$(dirname "$0")/.."
# the commit the copy is of, for device_check.sh's records (the copy travels without .git);
# "dirty" where gdsbench's sources differ from it
{ git rev-parse HEAD; git status --porcelain -- gdsbench native benchmarks scripts pyproject.toml CMakeLists.txt \
    | grep -q . && echo dirty; } > .gdsbench-commit || true
exclude=$(git rev-parse --git-path info/exclude)  # also right in a worktree, where .git is a file
mkdir -p "$(dirname "$exclude")"
for folder in /.whl/ /.dev/; do grep -qx "$folder" "$exclude" 2>/dev/null || echo "$folder" >> "$exclude"; done
rm -rf .whl .dev && mkdir -p .whl .dev/liburing .dev/cuda .dev/python-include
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
download() { python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" "$@"; }
# Only what a GPU image with cupy, numpy, the nvidia libraries and
# cuda-pathfinder lacks (this project's H200 image has those), so nothing
# carried shadows the image's own packages.
download --no-deps -d .whl "kvikio-cu13==26.10.*" "libkvikio-cu13==26.10.*" "rapids-logger==0.3.*"
(cd /tmp && apt-get download -q liburing-dev >/dev/null && dpkg -x liburing-dev_*.deb "$OLDPWD/.dev/liburing" && rm -f liburing-dev_*.deb)
headers=$(mktemp -d)
download --no-deps -d "$headers" "nvidia-cuda-runtime==13.*" "nvidia-cuda-crt==13.*" "nvidia-cufile==1.*"
for w in "$headers"/*.whl; do unzip -qo "$w" 'nvidia/*/include/*' -d "$headers/x"; done
cp -r "$headers"/x/nvidia/*/include .dev/cuda/ && rm -rf "$headers"
py312=$(ls -d /root/.pyenv/versions/3.12*/include/python3.12 2>/dev/null | tail -1 || true)
[ -n "$py312" ] && cp -r "$py312" .dev/python-include/ || echo "no local Python 3.12 headers: none carried"
du -sh .whl .dev

#!/usr/bin/env bash
# Run HERE (a machine with network) before scripts/device_check.sh runs on an
# offline GPU machine: fetches what that machine lacks into two ignored folders
# that travel with the call (the device tool's `carry`):
#   .whl/           kvikio-cu13 and the wheels it needs beyond the GPU image's own
#   .dev/liburing/  Debian's liburing-dev, unpacked, for the io_uring engine's build
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
rm -rf .whl .dev && mkdir -p .whl .dev/liburing
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
download() { python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "$@"; }
# Only what the GPU image lacks (../.library/device/KINDS.md lists what it has:
# cupy, numpy, the nvidia libraries, cuda-pathfinder, toolz, pyyaml, fsspec,
# cloudpickle, click), so nothing carried shadows the image's own packages:
# kvikio, and dask with the two dependencies the image lacks (kvikio's own
# benchmark, the reference for the gds and kvikio targets, imports dask).
download --no-deps "kvikio-cu13==26.10.*" "libkvikio-cu13==26.10.*" "rapids-logger==0.3.*" dask partd locket
(cd /tmp && apt-get download -q liburing-dev >/dev/null && dpkg -x liburing-dev_*.deb "$OLDPWD/.dev/liburing" && rm -f liburing-dev_*.deb)
du -sh .whl .dev

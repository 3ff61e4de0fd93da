#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU and no internet (the project's
# H200: CUDA 13, cupy-cuda13x and nvidia-cufile installed). It builds gdsbench,
# verifies data for every GPU mode, and measures every mode at 4 KiB, 128 KiB,
# 1 MiB and 16 MiB beside two ceilings (pinned host->device copies, storage
# into host memory), within about 6 minutes. Output goes to $OUT (the device
# tool's folder), else results/device/.
#
#   scripts/device_carry.sh                      # here, first: kvikio wheels and liburing travel along
#   device run: scripts/device_check.sh          # carry: .whl .dev
#
# UNTESTED on a GPU so far: no GPU machine has been lent to this project yet.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/device}
mkdir -p "$out"
log="$out/device_check.log"
exec > >(tee "$log") 2>&1
python=${PYTHON:-python3}
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }
# cuFile's own log says whether it ran in compatibility mode; keep it with the results
export CUFILE_LOGFILE_PATH=$(cd "$out" && pwd)/cufile.log
# Worst case of the timeouts below: 150 + 45 + 45 + 50 + 280 s = 570 s, inside the device tool's 600 s.

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,pci.bus_id --format=csv || echo "nvidia-smi failed"
$python --version; nproc; free -g | head -2; df -h . | tail -1
mkdir -p results/scratch; findmnt -T results/scratch || true; lsblk -o NAME,MODEL,SIZE,ROTA,TRAN 2>/dev/null || true
lsmod 2>/dev/null | grep -E '^nvidia' || echo "no nvidia modules listed"
ls -d /run/udev >/dev/null 2>&1 && echo "/run/udev readable" || echo "/run/udev missing: kvikio's AUTO mode may fall back to POSIX"

step "carried wheels (kvikio) and liburing"
if ls .whl/*.whl >/dev/null 2>&1; then
  $python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
[ -d .dev/liburing/usr ] && export LIBURING_ROOT=$PWD/.dev/liburing

step "build (offline: the image's scikit-build-core, pybind11, cmake, ninja; CUDA headers from the toolkit)"
timeout 150 $python -m pip install -q --no-build-isolation --no-deps -e . || { echo "BUILD FAILED"; exit 1; }
$python -c "from gdsbench import gpu; s = gpu.status()['cuda']; print('built with CUDA headers:', s['built_with_cuda'])
raise SystemExit(0 if s['built_with_cuda'] else 'BUILD HAS NO GPU MODES: CUDA headers not found')" || exit 1
# cuFile can hang rather than fail where its driver is unusable: bounded
timeout 45 $python -m gdsbench info --path README.md --json > "$out/info.json"
timeout 45 $python -m gdsbench info --path README.md || echo "gdsbench info failed or timed out (exit $?)"

step "tests on the GPU (GPU-marked and the GPU module)"
timeout 50 $python -m pytest -q -x tests/test_gpu.py tests/test_histogram.py -p no:cacheprovider 2>&1 | tail -15

step "every mode, verified, then measured, with the ceilings"
timeout 280 $python benchmarks/gpu_modes.py --file results/scratch/gpu_modes.dat --file-size 8G --out "$out"
echo "exit $?"
ls -la "$out"

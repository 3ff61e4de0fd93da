#!/usr/bin/env bash
# One command for any machine with an NVIDIA GPU, online or not (CUDA 13
# with cupy-cuda13x and nvidia-cufile installed; tried on an H200 with
# Python 3.12). It builds gdsbench into a private prefix, then runs the steps
# named in $DEVICE_STEPS (default all six): "modes" verifies and measures
# every GPU mode beside the ceilings (benchmarks/gpu_modes.py), "validate" runs
# `gdsbench validate` twice, "train" emulates a scaled unet3d in each GPU mode
# (verified) and predicts it, "remote" reads an object over HTTP into the GPU
# (bounce over the curl engine, kvikio's RemoteFile), "writes" writes from GPU
# memory (bounce, gds, kvikio) verified, and a scaled checkpoint in each,
# "tests" runs the GPU-marked tests.
#
#   scripts/device_check.sh                      # on the GPU machine, in a checkout
#   DEVICE_STEPS="validate tests" scripts/device_check.sh
#
# kvikio (for --mode kvikio) is used if the machine's Python has it; else
# installed from .whl/ if there is one; else from PyPI if the machine is
# online. A machine with no internet needs .whl/ and .dev/ beside the checkout:
# run scripts/device_carry.sh on a machine with network first and copy them
# over (this project's remote H200 sends them with the checkout: its device
# call names them in `carry`; a call's time limit there is 600 s, so name fewer
# steps in one call where the limits below add up to more).
#
# Every step has a time limit: 7 s + 20 (90 where kvikio comes from the
# package index) + 120 + 45 (provenance, gdscheck) + 45, then modes 210, validate 150 + 60, train 20 +
# 4 x 45 + 40 + 30 + 3 x 30, remote 15 + 3 x 40, writes 15 + 6 x 40 + 3 x 30 + 3 x 30 (kvcache), tests 50,
# and 10 to pack the logs: 1647 s at worst for all six with carried wheels, about
# 5 minutes in a normal run; "validate tests" alone about 2, "train tests" 2.
#
# Output goes to $OUT (a remote-device tool's folder, if it sets one), else results/device/. It
# writes at most these files, so all of them come back:
#   device_check.log    everything this script printed
#   info.json           gdsbench info --json
#   gpu_modes.md        the table, rewritten after every point
#   gpu_modes.json      every measured value, the platform facts, each child's end
#   validate-default.json, validate-default.xml   the default profile's record and JUnit file
#   validate-h200.txt, validate-h200.xml          the H200 example profile's table and JUnit file
#   train-MODE.json     train rows of 1 and 2 accelerators in each mode (cpu, bounce, gds, kvikio)
#   predict-gds.json    the prediction for the same workload in gds mode
#   train-parquet-MODE.json  a scaled flux's parquet row groups in bounce, gds and kvikio
#   remote-MODE.json    a 256 MiB object read over HTTP, verified, in cpu, bounce and kvikio mode
#   write-MODE.json     writes from GPU memory, read back and verified, in bounce, gds (cuFile's synchronous,
#                       batch and stream APIs: gds, gds-batch, gds-async; gds-vmm: buffers from
#                       cuMemCreate + cuMemMap) and kvikio mode
#   checkpoint-MODE.json  a scaled llama3-8b checkpoint written and read back, in the same modes
#   kvcache-MODE.json   the KV-cache workload (4 users x 3 requests, llama3.1-8b) in cpu, bounce and gds mode
#   pytest.log          the GPU-marked tests
#   logs.tar.gz         each measurement's own cuFile log and stderr
#   provenance.json     the commit, the tools' versions and the GPU platform this ran on
# Every file names the commit it ran: the JSON records carry gdsbench's provenance block (or
# made_by), the text files start with a "# made by" line, the JUnit files a made_by property.
# The commit is the checkout's, or GDSBENCH_COMMIT, or .gdsbench-commit (written beside the
# checkout by scripts/device_carry.sh) where the copy has no git.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=${OUT:-results/device}
mkdir -p "$out" && out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
prefix=/tmp/gdsbench-prefix   # the build goes here, never into the image's Python environment
logs=/tmp/gdsbench-logs
started=$(date +%s)

# which code this is, for every record: a copy sent without .git names it in .gdsbench-commit
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || true)
[ -z "$commit" ] && commit=${GDSBENCH_COMMIT:-}
[ -z "$commit" ] && [ -f "$repo/.gdsbench-commit" ] && commit=$(head -n 1 "$repo/.gdsbench-commit")
export GDSBENCH_COMMIT=${commit:-unknown}
made_by="gdsbench at $GDSBENCH_COMMIT"
[ -f "$repo/.gdsbench-commit" ] && grep -q dirty "$repo/.gdsbench-commit" && made_by+=" with its sources changed"

steps=${DEVICE_STEPS:-modes validate train remote writes tests}   # a shorter call may run only some: DEVICE_STEPS="validate tests"

step() { echo; echo "== $* (+$(( $(date +%s) - started )) s, $(date -u +%H:%M:%S) UTC)"; }
wants() { [[ " $steps " == *" $1 "* ]]; }

# cuFile registers a file only once it has read two udev properties of its
# block device (ID_FS_USAGE, ID_FS_TYPE). A microVM runs no udevd, so there is
# no /run/udev/data, cuFileHandleRegister fails, and kvikio falls back to
# POSIX (kvikio#33; seen on the first H200 run). As root on such a machine,
# write those two properties for the scratch file's device only, in a new
# file, and say so in the log and in gpu_modes.json (platform facts).
udev_data() {
  if [ -d /run/udev/data ]; then echo "/run/udev/data: present (udevd's own)"; return; fi
  local dev fstype
  dev=$(findmnt -n -o MAJ:MIN -T results/scratch | tr -d ' ')
  fstype=$(findmnt -n -o FSTYPE -T results/scratch)
  if [ "$(id -u)" != 0 ] || [ -z "$dev" ]; then
    echo "/run/udev/data: MISSING (cuFile's handle registration will fail; kvikio falls back to POSIX)"; return
  fi
  mkdir -p /run/udev/data
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$fstype" > "/run/udev/data/b$dev"
  export GDSBENCH_UDEV_WRITTEN="no udevd in this VM: scripts/device_check.sh wrote /run/udev/data/b$dev (ID_FS_USAGE=filesystem, ID_FS_TYPE=$fstype) so cuFile can register files on it"
  echo "/run/udev/data: MISSING; $GDSBENCH_UDEV_WRITTEN"
}

main() {
  step "machine: $made_by"
  timeout 5 nvidia-smi --query-gpu=name,memory.total,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.width.current --format=csv \
    || echo "nvidia-smi failed or timed out"
  $python --version; nproc; free -g | head -2; uname -r
  mkdir -p results/scratch
  df -h results/scratch | tail -1
  findmnt -T results/scratch || true
  lsblk -o NAME,MODEL,SIZE,ROTA,TRAN 2>/dev/null || true
  lsmod 2>/dev/null | grep -E '^nvidia' || echo "no nvidia kernel modules listed (lsmod)"
  [ -d /sys/module/nvidia_fs ] && echo "nvidia-fs: loaded" || echo "nvidia-fs: NOT loaded (cuFile can only run in compatibility mode)"
  udev_data
  for lib in libudev.so.1 libmount.so.1 libcufile.so.0 libcudart.so.13; do
    ldconfig -p 2>/dev/null | grep -q "$lib" && echo "$lib: in the loader's cache" || echo "$lib: not in the loader's cache"
  done

  step "carried wheels (kvikio) and build inputs"
  if $python -c "import kvikio" 2>/dev/null; then
    echo "kvikio: the machine's own ($($python -c 'import kvikio; print(kvikio.__version__)' 2>/dev/null))"
  elif ls .whl/*.whl >/dev/null 2>&1; then
    timeout 20 $python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site || echo "WARNING: carried wheels did not install: kvikio mode will say why it cannot run"
  elif timeout 90 $python -m pip install -q --retries 0 --timeout 5 --no-compile --target /tmp/site "kvikio-cu13==26.10.*" 2>/dev/null; then
    export PYTHONPATH=/tmp/site && echo "kvikio: installed from the package index into /tmp/site"
  else
    echo "WARNING: no kvikio here, no .whl/ (scripts/device_carry.sh makes one) and no package index: kvikio mode cannot run"
  fi
  [ -d .dev/liburing/usr ] && export LIBURING_ROOT=$repo/.dev/liburing \
    || echo "WARNING: no .dev/liburing carried: unless the image has liburing, io_uring is missing and gpu_modes uses psync"

  step "build into $prefix"
  include=$($python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  pyver=$($python -c "import sys; print(f'python{sys.version_info[0]}.{sys.version_info[1]}')")
  build_env=()
  if [ -f "$include/Python.h" ]; then
    echo "Python.h: $include"
  elif [ -f ".dev/python-include/$pyver/Python.h" ]; then
    echo "WARNING: no Python.h in $include; building against carried $pyver headers (.dev/python-include)"
    build_env+=(CMAKE_ARGS="-DPython_INCLUDE_DIR=$repo/.dev/python-include/$pyver")
  else
    echo "BUILD IMPOSSIBLE: no Python.h in $include and no carried headers for $pyver"; return 1
  fi
  if [ ! -f /usr/local/cuda/include/cufile.h ] || [ ! -f /usr/local/cuda/include/crt/host_defines.h ]; then
    [ -d .dev/cuda/include ] && build_env+=(CUDA_HOME="$repo/.dev/cuda") \
      && echo "CUDA headers: the toolkit lacks some; the carried ones (.dev/cuda) are searched too"
  fi
  rm -rf "$prefix"
  env "${build_env[@]}" timeout 120 $python -m pip install -q --no-build-isolation --no-deps --no-compile --target "$prefix" . \
    || { echo "BUILD FAILED"; return 1; }
  export PYTHONPATH=$prefix${PYTHONPATH:+:$PYTHONPATH}
  # from here on, run from outside the checkout: its gdsbench/ has no built module and must not shadow the prefix
  cd /tmp
  $python - <<'EOF' || return 1
import gdsbench
from gdsbench import _native
from gdsbench.system import gpu
print("gdsbench from", gdsbench.__file__)
s = gpu.status()["cuda"]
print("built with CUDA headers:", s["built_with_cuda"])
engines = {e["name"]: e["unavailable"] or "available" for e in _native.engines()}
print("engines:", engines)
if engines["io_uring"] != "available":
    print("WARNING: io_uring unavailable (", engines["io_uring"], "): gpu_modes uses psync threads in place of depth")
raise SystemExit(0 if s["built_with_cuda"] else "BUILD HAS NO GPU MODES: CUDA headers not found")
EOF

  # the commit, every tool's version, the GPU's place beside the storage (nvidia-smi topo: PIX,
  # PXB, PHB, SYS) and the paths cuFile can take (gdscheck -p), once, for the whole run; a copy goes
  # with the logs
  timeout -k 5 45 $python - "$out/provenance.json" "$GDSBENCH_COMMIT" "$made_by" <<'EOF' || echo "provenance.json: not written"
import json, subprocess, sys
from gdsbench.system import gpu, provenance
try:
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=10).stdout.splitlines()
except (OSError, subprocess.SubprocessError) as e:
    topo = [f"nvidia-smi topo -m: {e}"]
# GDS's own check names the paths this libcufile can take (p2pdma, nvfs, compat), where it is installed
import glob, shutil
found = shutil.which("gdscheck") or next(iter(sorted(glob.glob("/usr/local/cuda*/gds/tools/gdscheck"))), None)
try:
    gdscheck = subprocess.run([found, "-p"], capture_output=True, text=True, timeout=20).stdout.splitlines() \
        if found else ["gdscheck: not installed"]
except (OSError, subprocess.SubprocessError) as e:
    gdscheck = [f"gdscheck -p: {e}"]
s = gpu.status()
record = {**provenance.record(provenance.RUN_TOOLS + provenance.GPU_TOOLS), "made_by": sys.argv[3],
          "commit_given": sys.argv[2], "nvidia_fs": s["nvidia_fs"], "cufile_json": s["cufile_json"],
          "driver_version": s["driver_version"], "gpu_topology": topo, "gdscheck": gdscheck,
          "cufile_p2pdma_supported": s["cuda"].get("p2pdma_supported")}
json.dump(record, open(sys.argv[1], "w"), indent=1, default=str)
print("provenance:", record["gdsbench"], record["tools"])
EOF
  cp "$out/provenance.json" "$logs/" 2>/dev/null || true

  step "gdsbench info"
  # cuFile can hang rather than fail where its driver is unusable: bounded
  timeout 20 $python -m gdsbench info --path "$repo/README.md" --json > "$out/info.json" || echo "info --json: exit $?"
  timeout 20 $python -m gdsbench info --path "$repo/README.md" || echo "info: exit $?"

  if wants modes; then
    step "every mode, verified, then measured, with the ceilings (budget 200 s)"
    timeout -k 5 210 $python "$repo/benchmarks/gpu_modes.py" --file "$repo/results/scratch/gpu_modes.dat" \
      --file-size 4G --budget 200 --out "$out" --log-dir "$logs"
    echo "gpu_modes: exit $?"
  fi

  if wants validate; then
    # validate makes its own test file in the directory and removes it afterwards
    step "gdsbench validate, default profile (--json, --junit)"
    timeout -k 5 150 $python -m gdsbench validate "$repo/results/scratch" --json --junit "$out/validate-default.xml" \
      > "$out/validate-default.json"
    echo "validate (default profile): exit $? (0 pass, 1 a FAIL, 2 not ready, 3 usage)"
    step "gdsbench validate --quick, the H200/Gen5 NVMe example profile"
    # no --baseline: a --quick run is not comparable with the full one above (refused as a usage error)
    { echo "# made by $made_by"; timeout -k 5 60 $python -m gdsbench validate "$repo/results/scratch" --quick \
      --profile h200-gen5-nvme --junit "$out/validate-h200.xml"; } > "$out/validate-h200.txt"
    echo "validate (h200-gen5-nvme, --quick): exit $?"
    cat "$out/validate-h200.txt"
  fi

  if wants train; then
    step "gdsbench train: scaled unet3d (256 files of 4 MiB) in each mode, verified; then predict"
    local ds="$repo/results/scratch/train-unet3d" shape=(--workload unet3d --record-bytes 4M --record-stdev 1M)
    timeout -k 5 20 $python -m gdsbench prepare "$ds" --files 256 "${shape[@]}" || echo "prepare: exit $?"
    for mode in cpu bounce gds kvikio; do
      timeout -k 5 45 $python -m gdsbench train "$ds" "${shape[@]}" --compute-time 50ms --mode "$mode" --verify \
        --accelerators 1,2 --steps 30 --json > "$out/train-$mode.json"
      echo "train --mode $mode: exit $?"
    done
    timeout -k 5 40 $python -m gdsbench predict "$ds" "${shape[@]}" --compute-time 50ms --mode gds --json \
      > "$out/predict-gds.json"
    echo "predict --mode gds: exit $?"
    rm -rf "$ds"
    step "gdsbench train: parquet row groups (a scaled flux, 8 files of 48 rows) in each GPU mode"
    # pyarrow's files, not gdsbench's pattern: no --verify; every sample read is the check
    local pq="$repo/results/scratch/train-flux" flux=(--workload flux --files 8 --samples-per-file 48)
    timeout -k 5 30 $python -m gdsbench prepare "$pq" "${flux[@]}" || echo "prepare flux: exit $?"
    for mode in bounce gds kvikio; do
      timeout -k 5 30 $python -m gdsbench train "$pq" "${flux[@]}" --batch 8 --compute-time 50ms --mode "$mode" \
        --accelerators 1 --json > "$out/train-parquet-$mode.json"
      echo "train parquet --mode $mode: exit $?"
    done
    rm -rf "$pq"
  fi

  if wants remote; then
    # tests/fault_server.py: a range server written for the tests (nginx and rclone may not be
    # there), with no fault under /plain/; a correctness check of the GPU paths, not a speed reference
    step "an object over HTTP into the GPU: cpu, bounce (curl engine) and kvikio (RemoteFile), verified"
    local served="$repo/results/scratch/served" port=$((20000 + RANDOM % 20000))
    mkdir -p "$served" && timeout -k 5 15 $python -m gdsbench prepare "$served/remote.dat" --size 256M
    $python "$repo/tests/fault_server.py" "$port" "$served" & local server=$!
    sleep 1
    for mode in cpu bounce kvikio; do
      timeout -k 5 40 $python -m gdsbench run "http://127.0.0.1:$port/plain/remote.dat" --mode "$mode" --bs 4M --qd 8 \
        --io-size 512M --verify --json > "$out/remote-$mode.json"
      echo "run --mode $mode over HTTP: exit $?"
    done
    kill "$server"
    rm -rf "$served"
  fi

  if wants writes; then
    step "writes from GPU memory: bounce, gds and kvikio, read back and verified; a checkpoint in each"
    local wfile="$repo/results/scratch/gpu-writes.dat"
    timeout -k 5 15 $python -m gdsbench prepare "$wfile" --size 1G
    for mode in bounce gds gds-batch gds-async gds-vmm kvikio; do
      # cuFileWrite has no queue depth; the batch and stream APIs (--engine cufile_batch, cufile_async) do
      local how="--mode $mode --qd 8"
      case $mode in
        gds) how="--mode gds --threads 8" ;;
        gds-batch) how="--mode gds --engine cufile_batch --qd 8" ;;
        gds-async) how="--mode gds --engine cufile_async --qd 8" ;;
        gds-vmm) how="--mode gds --threads 8 --gpu-memory vmm" ;;  # buffers from cuMemCreate + cuMemMap
      esac
      timeout -k 5 40 $python -m gdsbench run "$wfile" --rw write $how --bs 4M --io-size 2G \
        --fsync-end --verify --json > "$out/write-$mode.json"
      echo "run --rw write $how: exit $?"
    done
    rm -f "$wfile"
    for mode in bounce gds kvikio; do
      timeout -k 5 30 $python -m gdsbench checkpoint "$repo/results/scratch/ckpt" --model llama3-8b --layers 2 \
        --vocab 8192 --scale 0.25 --checkpoints 1 --mode "$mode" --json > "$out/checkpoint-$mode.json"
      echo "checkpoint --mode $mode: exit $?"
      rm -rf "$repo/results/scratch/ckpt"
    done
    mkdir -p "$repo/results/scratch/kv"
    for mode in cpu bounce gds; do   # kvcache's storage tier into and out of GPU memory (kvikio writes no regions)
      local depth="--qd 8"; [ "$mode" = gds ] && depth=""   # cuFile's synchronous API: the users' movers in parallel
      timeout -k 5 30 $python -m gdsbench kvcache "$repo/results/scratch/kv" --model llama3.1-8b --users 4 \
        --requests 3 --duration 25s --generation-mode none --mode "$mode" $depth --results "$repo/results/scratch" \
        --json > "$out/kvcache-$mode.json"
      echo "kvcache --mode $mode: exit $?"
    done
    rm -rf "$repo/results/scratch/kv"
  fi

  if wants tests; then
    step "GPU-marked tests, GDSBENCH_GPU_REQUIRED=$GDSBENCH_GPU_REQUIRED (exported below): an error fails, a skip names what is absent"
    { echo "# made by $made_by"; timeout -k 5 50 $python -m pytest "$repo/tests" -m gpu -q -p no:cacheprovider \
      --rootdir "$repo"; } > "$out/pytest.log" 2>&1
    echo "pytest: exit $? (output in pytest.log)"
    tail -n 15 "$out/pytest.log"
  fi
}

# cuFile reads this in place of /etc/cufile.json: compatibility mode allowed (where nvidia-fs
# is missing cuFile then reads by POSIX and says so in its log), logging at INFO
export CUFILE_ENV_PATH_JSON=$repo/scripts/cufile.json
export CUFILE_LOGGING_LEVEL=INFO
export CUFILE_LOGFILE_PATH=$logs/cufile-main.log        # gpu_modes gives each child its own
# This machine is declared to have a GPU: a GPU-marked test that meets any error fails (never a
# skip), and only a library it needs that is absent, named, skips it (tests/conftest.py)
export GDSBENCH_GPU_REQUIRED=1
mkdir -p "$logs"
main 2>&1 | tee "$out/device_check.log"
status=${PIPESTATUS[0]}
cd "$repo"
timeout 10 tar -czf "$out/logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")" 2>/dev/null || true
echo "device_check: exit $status after $(( $(date +%s) - started )) s; files in $out:" | tee -a "$out/device_check.log"
ls -la "$out" | tee -a "$out/device_check.log"
exit "$status"

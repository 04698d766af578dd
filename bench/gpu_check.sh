#!/usr/bin/env bash
# Device check for GPU capture (issue 8), for a machine with one or more NVIDIA GPUs.
# Every step has its own time limit (90 + 60 + 60 + 140 + 120 s at most: under 8 minutes; about
# 2-3 minutes when nothing needs installing) and every step and check is reported on its own.
#
#   bench/gpu_check.sh            (from anywhere; PYTHON=... picks the interpreter)
#   bench/gpu_check.sh --env-only (step 1's packages alone: runs without a GPU too)
#
# Without a package index (the nvidia-h200 machines have none), first make the wheels it lacks where
# PyPI is reachable, `python bench/gpu_check/env.py download .whl --cuda 13.0 --python-version 3.12`
# (about 54 MB), and carry .whl (or set DI_WHEELS): step 1 installs them with no index.
#
# Steps (each timed; a failed step is reported and the next ones still run where they can):
#   1. environment: imports of di's dependencies, torch, cupti-python (pyproject's gpu extra, no newer
#      than the driver's CUDA), nvidia-ml-py and the nvidia-nccl wheel; what is missing is installed
#      from carried wheels, else from the package index (bounded timeouts); then nvidia-smi;
#   2. NCCL layout: 2 processes (torchrun) with NCCL allreduce when NCCL accepts them (2+
#      GPUs; one GPU shared by 2 ranks is refused by NCCL), else 1 process with a 1-rank group;
#   3. baseline: bench/gpu_check/train.py (MLP steps with a 4 MiB host->device copy and
#      gradient allreduces) without capture;
#   4. the same under `di record --gpu --io --host` (--io only with a C compiler; CUPTI + NVML + the NCCL profiler
#      plugin, or the LD_PRELOAD shim for NCCL < 2.26);
#   5. bench/gpu_check/check.py: every kernel once with its launch flow (correlation id),
#      memcpy bytes, NVML power/utilization series, NCCL allreduce as a matched collective
#      (and its completion from kernel channels on the plugin path), CUPTI buffer-callback
#      CPU cost per record, slowdown under capture, di analyze's breakdown/overlap/critical path.
# Summary JSON: $OUT/gpu_check.json when $OUT is set, and bench/out/gpu_check.json.
# Exit code: 0 when every check passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
WORK=bench/out/gpu_check
rm -rf "$WORK" && mkdir -p "$WORK"
WHEELS=${DI_WHEELS:-$REPO/.whl}  # wheels carried to a machine without a package index (bench/gpu_check/env.py download)
SITE=$REPO/$WORK/site           # where they are installed (pip --target), after the repo on PYTHONPATH
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
STEPS="$WORK/steps.jsonl"
: >"$STEPS"
export DI_CHECK_STEPS=${DI_CHECK_STEPS:-40}
T_START=$(date +%s)

say() { printf '\n== [%4ss] %s\n' "$(( $(date +%s) - T_START ))" "$*"; }
# step NAME OK SECONDS DETAIL: one JSON line per step
step() { "$PY" -c 'import json,sys; print(json.dumps({"step": sys.argv[1], "ok": sys.argv[2] == "1", "seconds": float(sys.argv[3]), "detail": sys.argv[4]}))' "$@" >>"$STEPS" 2>/dev/null \
         || printf '{"step": "%s", "ok": %s, "seconds": %s, "detail": "?"}\n' "$1" "$([ "$2" = 1 ] && echo true || echo false)" "$3" >>"$STEPS"; }
timed() { local t0=$SECONDS; "$@"; local rc=$?; LAST_S=$(( SECONDS - t0 )); return $rc; }
finish() {
  say "summary"
  "$PY" bench/gpu_check/summary.py "$STEPS" "$WORK/checks.json" "$WORK/summary.json" "$(( $(date +%s) - T_START ))"
  local rc=$?
  [ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$WORK/summary.json" "$OUT/gpu_check.json" 2>/dev/null
  cp "$WORK/summary.json" bench/out/gpu_check.json 2>/dev/null
  exit $rc
}

say "1. environment: packages, then the driver"
missing() { "$PY" bench/gpu_check/env.py missing 2>/dev/null || echo "?"; }  # pip requirements of what does not import
MISSING=$(missing)
if [ -n "$MISSING" ]; then
  echo "  missing: $MISSING"
  if ls "$WHEELS"/*.whl >/dev/null 2>&1; then  # carried wheels: no index needed
    echo "  installing the wheels in $WHEELS into $SITE (no index)"
    timed timeout 90 "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
      --target "$SITE" "$WHEELS"/*.whl
    echo "  pip install: exit $? in ${LAST_S}s"
  else
    echo "  no wheels in $WHEELS: pip install from the package index (bounded to 90 s)"
    timed timeout 90 "$PY" -m pip install --quiet --disable-pip-version-check --timeout 15 --retries 1 $MISSING
    echo "  pip install: exit $? in ${LAST_S}s"
  fi
  MISSING=$(missing)
fi
"$PY" - <<'PYEOF'
import importlib
from importlib import metadata
for m, dist in (("torch", "torch"), ("cupti.cupti", "cupti-python"), ("pynvml", "nvidia-ml-py"), ("nvidia.nccl", None),
                ("polars", "polars"), ("numba", "numba")):
    try:
        mod = importlib.import_module(m)
        version = metadata.version(dist) if dist else "ok"
        print(f"  {m}: {version} ({getattr(mod, '__file__', None) or list(getattr(mod, '__path__', []))})")
    except Exception as exc:
        print(f"  {m}: MISSING ({type(exc).__name__}: {exc})")
try:
    print(f"  nvidia-cuda-cupti: {metadata.version('nvidia-cuda-cupti')}")
except metadata.PackageNotFoundError:
    pass
PYEOF
if [ -n "$MISSING" ]; then
  echo "  STILL MISSING: $MISSING"
  echo "  without a package index, make the wheels on a machine with one and carry them here:"
  echo "    python bench/gpu_check/env.py download .whl --cuda $("$PY" -c 'import sys; sys.path.insert(0, "."); from di.capture.cupti import driver_cuda_version as v; print(v().replace("?", "X.Y"))' 2>/dev/null || echo X.Y) --python-version $("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  echo "  (or point DI_WHEELS at a folder of them)"
  step environment 0 "$(( $(date +%s) - T_START ))" "still missing: $MISSING; no wheels for them in $WHEELS and no package index"
  case " $MISSING " in *" torch "*|*" polars "*|*" numpy "*|*" numba "*) finish ;; esac
else
  step environment 1 "$(( $(date +%s) - T_START ))" "all imports present"
fi
[ "${1:-}" = "--env-only" ] && finish
if timed nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; then
  step driver 1 "$LAST_S" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), CUDA $(
    "$PY" -c 'from di.capture.cupti import driver_cuda_version as v; print(v())' 2>/dev/null)"
else
  step driver 0 "$LAST_S" "nvidia-smi failed: no NVIDIA driver"; finish
fi
NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null) || NGPU=0
echo "  GPUs visible to torch: $NGPU"
if [ "${NGPU:-0}" -lt 1 ]; then step torch_cuda 0 0 "torch sees no GPU"; finish; fi
step torch_cuda 1 0 "$NGPU GPUs visible to torch"

say "2. NCCL layout"
export MASTER_ADDR=127.0.0.1
TWO=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2 bench/gpu_check/train.py)
if DI_CHECK_STEPS=2 timed timeout 60 "${TWO[@]}" "$WORK/probe" >"$WORK/probe.log" 2>&1; then
  LAUNCH=("${TWO[@]}"); LAYOUT="2 processes, NCCL allreduce across them"
else
  tail -5 "$WORK/probe.log" | sed 's/^/  probe: /'
  export DI_CHECK_NCCL=1 MASTER_PORT=${MASTER_PORT:-29533} RANK=0 WORLD_SIZE=1 LOCAL_RANK=0
  LAUNCH=("$PY" bench/gpu_check/train.py); LAYOUT="1 process, 1-rank NCCL group (2 ranks refused: see probe.log)"
fi
echo "  $LAYOUT"
step layout 1 "$LAST_S" "$LAYOUT"

say "3. baseline (no capture): ${LAUNCH[*]}"
if timed timeout 60 "${LAUNCH[@]}" "$WORK/base"; then step baseline 1 "$LAST_S" "ok"; else step baseline 0 "$LAST_S" "exit $?"; fi

say "4. under di record --gpu"
REC_OPTS=(--gpu --host)
if command -v "${CC:-cc}" >/dev/null || command -v gcc >/dev/null; then
  REC_OPTS+=(--io)
else
  echo "  no C compiler: no I/O shim and no NCCL plugin/shim (NCCL checks will fail)"
fi
timed timeout 140 "$PY" -m di record "${REC_OPTS[@]}" -o "$WORK/run.di" -- "${LAUNCH[@]}" "$WORK/rec"
RC=$?
ls "$WORK/run.di/raw" 2>/dev/null | sed 's/^/  raw: /' | head -30
if [ "$RC" = 0 ] && [ -f "$WORK/run.di/meta.json" ]; then step record 1 "$LAST_S" "ok"; else step record 0 "$LAST_S" "exit $RC"; finish; fi

say "5. checks"
timed timeout 120 "$PY" bench/gpu_check/check.py "$WORK/run.di" "$WORK/base" "$WORK/rec" "$WORK/checks.json"
RC=$?  # 0: all passed, 1: a check failed (reported on its own); anything else: check.py itself broke or timed out
step checks "$([ "$RC" -le 1 ] && [ -f "$WORK/checks.json" ] && echo 1 || echo 0)" "$LAST_S" "check.py exit $RC"
finish

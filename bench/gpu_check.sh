#!/usr/bin/env bash
# Device check for GPU capture (issue 8), for a machine with one or more NVIDIA GPUs.
# Every step has its own time limit (90 + 60 + 60 + 140 + 120 s at most: under 8 minutes; about
# 2-3 minutes when nothing needs installing) and every step and check is reported on its own.
#
#   bench/gpu_check.sh            (from anywhere; PYTHON=... picks the interpreter)
#
# Steps (each timed; a failed step is reported and the next ones still run where they can):
#   1. environment: nvidia-smi; imports of di's dependencies, torch, cupti-python, nvidia-ml-py
#      and the nvidia-nccl wheel; whatever is missing is pip-installed (bounded timeouts;
#      cupti-python matched to torch's CUDA major version);
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
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
WORK=bench/out/gpu_check
rm -rf "$WORK" && mkdir -p "$WORK"
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

say "1. environment"
if timed nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; then
  step driver 1 "$LAST_S" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
else
  step driver 0 "$LAST_S" "nvidia-smi failed: no NVIDIA driver"; finish
fi
missing() {  # pip names of what does not import
  "$PY" - <<'PYEOF'
import importlib
need = {"numpy": "numpy", "numba": "numba", "polars": "polars", "pyarrow": "pyarrow", "orjson": "orjson",
        "jsonschema": "jsonschema", "rich": "rich", "pynvml": "nvidia-ml-py", "torch": "torch",
        "nvidia.nccl": "nvidia-nccl-cu12"}
out = []
for mod, pip in need.items():
    try:
        importlib.import_module(mod)
    except Exception:
        out.append(pip)
try:
    from cupti import cupti  # noqa: F401
except Exception:
    try:
        import torch
        major, minor = (int(x) for x in (torch.version.cuda or "12.6").split(".")[:2])
    except Exception:
        major, minor = 12, 6
    # the CUPTI of torch's CUDA: cupti-python 12.6.0 / 12.8.0 for CUDA 12, 13.x for CUDA 13
    out.append(("cupti-python==12.8.0" if minor >= 8 else "cupti-python==12.6.0") if major == 12 else f"cupti-python>={major},<{major + 1}")
print(" ".join(out))
PYEOF
}
MISSING=$(missing)
if [ -n "$MISSING" ]; then
  echo "  missing: $MISSING; pip install (bounded to 90 s)"
  timed timeout 90 "$PY" -m pip install --quiet --disable-pip-version-check --timeout 15 --retries 1 $MISSING
  echo "  pip install: exit $? in ${LAST_S}s"
  MISSING=$(missing)
fi
"$PY" - <<'PYEOF'
import importlib
for m in ("torch", "cupti", "pynvml", "nvidia.nccl", "polars", "numba"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m}: {getattr(mod, '__version__', 'ok')}")
    except Exception as exc:
        print(f"  {m}: MISSING ({type(exc).__name__}: {exc})")
PYEOF
if [ -n "$MISSING" ]; then
  step environment 0 "$(( $(date +%s) - T_START ))" "still missing after pip: $MISSING"
  case " $MISSING " in *" torch "*|*" polars "*|*" numpy "*|*" numba "*) finish ;; esac
else
  step environment 1 "$(( $(date +%s) - T_START ))" "all imports present"
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

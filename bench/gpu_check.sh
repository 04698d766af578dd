#!/usr/bin/env bash
# Device check for GPU capture (issue 8), for a machine with an NVIDIA GPU; a few minutes.
#
#   bench/gpu_check.sh            (from the repository root; PYTHON=... to pick the interpreter)
#
# Needs: an NVIDIA driver, torch with CUDA, cupti-python (pip install cupti-python),
# nvidia-ml-py, a C compiler and an nccl.h (the nvidia-nccl-cu12/-cu13 wheel torch installs).
# Runs bench/gpu_check/train.py (an MLP loop with a 4 MiB host->device copy per step):
#   1. plain, for the baseline time;
#   2. under `di record --gpu` (CUPTI + NVML + NCCL shim); with 2+ GPUs as a 2-process
#      torchrun job with NCCL allreduce, else on one GPU with a 1-rank NCCL group;
# then bench/gpu_check/check.py prints counts and PASS/FAIL checks (kernels vs launch
# flows, memcpy bytes, NVML series, matched NCCL collectives, di analyze) and the
# slowdown under capture. Output JSON: bench/out/gpu_check.json. Exit code 1 when a check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=bench/out/gpu_check
mkdir -p "$OUT"
rm -rf "$OUT"/*
export DI_CHECK_STEPS=${DI_CHECK_STEPS:-50}

say() { printf '== %s\n' "$*"; }
say "machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || { echo "FAIL no nvidia-smi / driver"; exit 1; }
NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)') || NGPU=0
"$PY" - <<'PYEOF'
import importlib
for m in ("torch", "cupti", "pynvml", "nvidia.nccl"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m}: {getattr(mod, '__version__', 'ok')}")
    except Exception as exc:
        print(f"  {m}: MISSING ({exc})")
PYEOF
echo "  GPUs visible to torch: $NGPU"
[ "$NGPU" -ge 1 ] || { echo "FAIL torch sees no GPU"; exit 1; }

if [ "$NGPU" -ge 2 ]; then
  LAUNCH=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2 bench/gpu_check/train.py)
else
  export DI_CHECK_NCCL=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29533} RANK=0 WORLD_SIZE=1 LOCAL_RANK=0
  LAUNCH=("$PY" bench/gpu_check/train.py)
fi

say "baseline (no capture): ${LAUNCH[*]}"
timeout 300 "${LAUNCH[@]}" "$OUT/base" || { echo "FAIL baseline run"; exit 1; }

say "under di record --gpu"
timeout 420 "$PY" -m di record --gpu --io --host -o "$OUT/run.di" -- "${LAUNCH[@]}" "$OUT/rec"
echo "  exit code $?"
ls "$OUT/run.di/raw" | sed 's/^/  raw: /' | head -40

say "checks"
timeout 300 "$PY" bench/gpu_check/check.py "$OUT/run.di" "$OUT/base" "$OUT/rec" bench/out/gpu_check.json
RC=$?
say "di analyze"
timeout 300 "$PY" -m di analyze "$OUT/run.di" | head -60
exit $RC

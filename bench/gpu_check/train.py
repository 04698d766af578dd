"""A small CUDA training loop for bench/gpu_check.sh: STEPS steps of an MLP, each copying a
4 MiB batch host->device. Under torchrun (WORLD_SIZE > 1, or DI_CHECK_NCCL=1) it also
allreduces the gradients over NCCL. Writes its own timing and launch counts as JSON."""

import json
import os
import sys
import time

import torch

STEPS = int(os.environ.get("DI_CHECK_STEPS", "50"))
BATCH_BYTES = 4 << 20
out = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
use_nccl = world > 1 or os.environ.get("DI_CHECK_NCCL") == "1"
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
torch.cuda.set_device(device)
if use_nccl:
    import torch.distributed as dist

    dist.init_process_group("nccl", device_id=device)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
host = torch.randn(BATCH_BYTES // 4 // 1024, 1024).pin_memory()
torch.cuda.synchronize()
t0 = time.perf_counter()
for step in range(STEPS):
    torch.cuda.nvtx.range_push(f"step {step}")
    x = host.to(device, non_blocking=True)
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if use_nccl:
        for p in model.parameters():
            dist.all_reduce(p.grad)
    opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
elapsed = time.perf_counter() - t0
if use_nccl:
    dist.destroy_process_group()
with open(f"{out}.rank{rank}.json", "w") as f:
    json.dump(
        {
            "rank": rank,
            "world": world,
            "steps": STEPS,
            "seconds": elapsed,
            "batch_bytes": BATCH_BYTES,
            "nccl": use_nccl,
            "allreduces": STEPS * len(list(model.parameters())) if use_nccl else 0,
        },
        f,
    )

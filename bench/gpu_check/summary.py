"""bench/gpu_check.sh's summary: its steps (JSON lines) and check.py's checks -> one JSON and a table.

usage: summary.py STEPS.jsonl CHECKS.json OUT.json TOTAL_SECONDS   (exit 0 when everything passed)
"""

import json
import sys
from pathlib import Path

steps_path, checks_path, out, total = sys.argv[1:5]
steps = [json.loads(line) for line in Path(steps_path).read_text().splitlines() if line.strip()]
try:
    checks = json.loads(Path(checks_path).read_text())
except (OSError, ValueError) as exc:
    checks = {"checks": {}, "error": f"no checks: {exc}"}
summary = {"total_seconds": float(total), "steps": steps, **checks}
summary["passed"] = (
    bool(steps)
    and all(s["ok"] for s in steps)
    and bool(checks.get("checks"))
    and all(c["ok"] is not False for c in checks["checks"].values())
)  # ok None: skipped, with the reason in detail
summary["skipped"] = [name for name, c in checks.get("checks", {}).items() if c["ok"] is None]
Path(out).write_text(json.dumps(summary, indent=1))
for s in steps:
    print(f"{'ok  ' if s['ok'] else 'FAIL'}  step {s['step']:<12} {s['seconds']:6.0f} s  {s['detail']}")
for name, c in checks.get("checks", {}).items():
    print(f"{'SKIP' if c['ok'] is None else 'PASS' if c['ok'] else 'FAIL'}  {name}: {c['detail']}")
for key in ("slowdown_pct", "cupti_callback_cpu_us_per_record", "nccl_path"):
    if key in checks:
        print(f"INFO  {key}: {checks[key]}")
print(f"{'PASSED' if summary['passed'] else 'FAILED'} in {float(total):.0f} s; summary: {out}")
sys.exit(0 if summary["passed"] else 1)

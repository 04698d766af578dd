"""The commands on a job of many ranks, whole process: what a user of a 512-rank run waits for and reads.

Run on demand (not a test)::

    python bench/many_ranks.py [--ranks 512] [--steps 10] [--ops 20] [--repeat 3] [--keep DIR] [--repo DIR]

The job is bench/engine.py's generated one (per rank a CPU thread and two GPU
streams, an NCCL allreduce across all ranks each step, an MPI ring with late
senders), saved as a ``.di`` store, with a second one of slightly longer
operators to diff against, and a rank-partitioned copy. Each command runs
``--repeat`` times as ``python -m di`` in a fresh process, warm (numba's cache
filled by a first untimed run): CPU seconds (user + system) of the best and the
median run, the peak RSS, and what it wrote (lines of the terminal summary,
bytes of a file). Commands: ``di analyze`` (terminal), ``--json``, ``--csv``,
``di report``, ``di diff`` (terminal and ``--json``), ``di info``,
``di analyze`` of the partitioned store, ``di convert`` to OTF2 (one
location per timeline: 1,536 at 512 ranks) and to Perfetto, and ``di info`` of
the OTF2 archive written (every location read).

``--repo DIR`` runs another checkout's ``di`` (put first on ``PYTHONPATH``, the
commands run in a scratch folder), to compare two versions on the same inputs.
Numbers go to ``bench/out/many_ranks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"


def _inputs(folder: Path, ranks: int, steps: int, ops: int) -> dict[str, Path]:
    """The job, its slower twin and the partitioned copy, written once per shape into ``folder``."""
    sys.path.insert(0, str(HERE))
    from engine import generate  # bench/engine.py's generated job

    from di.store import write_store

    paths = {k: folder / f"{k}-{ranks}x{steps}x{ops}.di" for k in ("job", "slower", "parted")}
    if not all(p.exists() for p in paths.values()):
        job = generate(ranks, steps, ops)
        write_store(job, paths["job"])
        write_store(job, paths["parted"], partitioned=True)
        write_store(generate(ranks, steps, ops + 4), paths["slower"])
    return paths


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``python -m di ARGS`` under /usr/bin/time's rusage: CPU-s, peak RSS (MiB) and the stdout's lines."""
    stats = cwd / "time.txt"
    cmd = ["/usr/bin/time", "-o", str(stats), "-f", "%U %S %M", sys.executable, "-m", "di", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"di {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    user, system, peak_kb = stats.read_text().split()[-3:]
    return {"cpu_s": float(user) + float(system), "peak_mib": int(peak_kb) / 1024, "lines": done.stdout.count("\n")}


def _folder(tmp: Path, command: str, k: int) -> Path:
    """The folder run ``k`` of ``command`` (a name of the commands' table) runs in."""
    return tmp / f"run-{command.replace(' ', '-').replace('--', '')}-{k}"


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=512)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--ops", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", type=Path, help="a folder for the inputs, reused when they are there")
    p.add_argument("--repo", type=Path, default=REPO, help="the checkout whose di runs (default: this one)")
    p.add_argument("--out", type=Path, default=OUT / "many_ranks.json")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        folder = args.keep or tmp
        folder.mkdir(parents=True, exist_ok=True)
        paths = _inputs(folder, args.ranks, args.steps, args.ops)
        env = {**os.environ, "PYTHONPATH": str(args.repo.resolve())}
        job, slower, parted = (str(paths[k]) for k in ("job", "slower", "parted"))
        commands = {
            "analyze": (["analyze", job], None),
            "analyze --json": (["analyze", job, "--json", "a.json"], "a.json"),
            "analyze --csv": (["analyze", job, "--csv", "csv"], "csv"),
            "analyze partitioned": (["analyze", parted], None),
            "report": (["report", job, "-o", "r.html"], "r.html"),
            "diff": (["diff", job, slower], None),
            "diff --json": (["diff", job, slower, "--json", "d.json"], "d.json"),
            "info": (["info", job], None),
            "convert otf2": (["convert", job, "-o", "x.otf2"], "x"),
            "convert pftrace": (["convert", job, "-o", "x.pftrace"], "x.pftrace"),
            "info otf2": (["info", str(_folder(tmp, "convert otf2", 0) / "x.otf2")], None),  # what it wrote
        }
        events = json.loads((paths["job"] / "meta.json").read_text())["tables"]["events"]
        result: dict[str, Any] = {
            "ranks": args.ranks,
            "events": events,
            "repo": str(args.repo),
            "python": sys.version.split()[0],
            "commands": {},
        }
        print(f"{args.ranks} ranks, {events:,} events; {args.repeat} warm runs each, whole process")
        print(f"{'command':22} {'best cpu s':>10} {'median':>8} {'peak MiB':>9} {'lines':>6} {'wrote':>10}")
        for name, (cmd, wrote) in commands.items():
            # each run in a folder of its own: a run that replaced the last one's output would pay for deleting it
            # (on this project's VM, creating files just after 3,072 were deleted cost up to 1.5 ms a file)
            folders = [_folder(tmp, name, k) for k in range(args.repeat + 1)]
            for f in folders:
                f.mkdir(exist_ok=True)
            _run(cmd, folders[0], env)  # numba's cache filled, the store's pages cached
            runs = [_run(cmd, f, env) for f in folders[1:]]
            best = min(runs, key=lambda r: r["cpu_s"])
            row = {
                "best_cpu_s": round(best["cpu_s"], 2),
                "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
                "peak_mib": round(best["peak_mib"]),
                "lines": best["lines"],
                "bytes": _size(folders[0] / wrote) if wrote else None,
            }
            result["commands"][name] = row
            print(
                f"{name:22} {row['best_cpu_s']:>10.2f} {row['median_cpu_s']:>8.2f} {row['peak_mib']:>9} "
                f"{row['lines']:>6} {row['bytes'] or '':>10}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

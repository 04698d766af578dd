"""Text-log parsing speed: MB/s of log text per family parser, and of the whole read.

Run on demand (not a test)::

    python bench/logs.py [--mb 64] [--repeats 3]

Each family's samples from ``../shared/data/logs`` are repeated to about ``--mb`` MB
of text (in memory and in a temporary file). Then, best of ``--repeats`` after a
warm-up:

- ``lines``: :func:`di.convert.logs.text.read_lines` (read, decode, split, ANSI and
  rank prefixes stripped, garbled lines counted), MB/s of file bytes;
- ``times``: each line's own and nearest timestamp (:func:`~di.convert.logs.text.line_times`), found once per file
  for every family;
- each parser (``nccl``, ``nccl_tests``, ``training``, ``progress`` bars, ``nvidia_smi``, ``slurm``, ``darshan``
  text) over the
  cleaned lines with their times, as ``read_log`` gives them;
- ``read_log``: the whole connector (all families, trace built), MB/s;
- with ``--steps``, read_log's steps one by one (``read_lines``: with the search for the lines the anchored regexes
  may match, ``reader.ANCHORED``; ``times``: each line's timestamp; ``gates``: which families run;
  ``parse:<family>``: each parser the gates let run; ``build``: the trace), CPU ms of the fastest run.

With ``--vary`` each copy of the samples has its numbers changed (the last two
digits of a number of four digits or more, the last of one of three, shifted by
the copy's index), so the text's lines are as distinct as a real long log's: a
parser that reads each distinct line once gains nothing from the repetition.
Plain copies leave about 2 % of the lines distinct, a real sample log about 50 %.

Rates are per wall second and per CPU second of the process (all threads): on a
shared machine the wall figure says how busy it was, the CPU one what the parser
costs. Target from the issue: >= 200 MB/s per parser. ``rss MB`` is the process's peak
RSS after the family (a running maximum: run one family per process, ``--families X``, for
that family's own peak). Set ``POLARS_MAX_THREADS=1`` for single-thread figures. A table
goes to stdout and the numbers to ``bench/out/logs.json``.

numba is imported first, as in ``di convert`` and ``di analyze`` of a job with traces: a long training log is then
read by its numba scans (``training.SCAN_MIN_BYTES``). ``--no-numba`` measures a process without it, as ``di info``
of a log is, where those scans start only from ``training.SCAN_ALONE_BYTES`` and the regexes read the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "logs"

SAMPLES = {
    "nccl": [
        "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log",
        "nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log",
    ],
    "nccl_tests": [
        "nccl/nccltests2.17.8_nccl2.29.2_h100_10node_80rank.log",
        "nccl/nccltests_h100_2node_alltoall_sendrecv_pair.log",
    ],
    "training": [
        "training/megatron_deepspeed_ds0.7.3_gpt3moe_nccl2.10.3_2022.log",
        "training/deepspeed_chat_sft_opt1.3b_2023.log",
        "training/megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out",
    ],
    "progress": ["training/hf_trainer_deepspeed0.3.17_gpt2_4node_2021.out"],
    "nvidia_smi": [
        "nvidia-smi/query_gpu_timeseries_noheader_nounits_4gpu.csv",
        "nvidia-smi/capture_linux_h100_80gb_hbm3_drv590.48.01.txt",
    ],
    "slurm": [
        "slurm/sacct_parsable_P_psc_bridges_2018.txt",
        "slurm/sacct_default_fixedwidth_psc_bridges_2018_first1500lines.txt",
    ],
    "darshan": [
        "darshan/pydarshan_ior_hdf5_example.dxt-parser.txt",
        "darshan/pydarshan_ior_hdf5_example.darshan-parser.txt",
    ],
}


def varied(text: bytes, k: int) -> bytes:
    """Copy ``k`` of ``text`` with its numbers changed: the last two digits of a number of four digits or more
    and the last digit of one of three, shifted by ``k`` (copy 0 is ``text``)."""
    import re

    def shift(m: re.Match[bytes]) -> bytes:
        digits = m.group()
        tail = 2 if len(digits) >= 4 else 1
        mod = 10**tail
        return digits[:-tail] + b"%0*d" % (tail, (int(digits[-tail:]) + k) % mod)

    return re.sub(rb"\d{3,}", shift, text) if k else text


def best(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(wall s, CPU s) of the fastest of ``repeats`` runs after one warm-up."""
    fn()
    runs = []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - w0, time.process_time() - c0))
    return min(runs)


def read_log_steps(path: Path, repeats: int) -> dict[str, float]:
    """CPU ms of each step of :func:`di.convert.logs.reader.read_log` on ``path`` (fastest of ``repeats``)."""
    import numpy as np
    import polars as pl

    from di.convert.logs import reader
    from di.convert.logs.build import build_trace
    from di.convert.logs.text import line_times, own_line_times, read_lines

    text = read_lines(path, anchored=reader.ANCHORED)
    rows = text.anchored_rows
    own = own_line_times(text.lines, rows)
    lines = text.lines.with_columns(line_times(text.lines, own), own)
    present = reader.present_families(lines, rows)
    parsers = {name: parse for name, (_, parse) in reader.FAMILIES.items() if present.get(name, True)}
    parts = [p for p in (parse(lines) for parse in parsers.values()) if p.events.height or p.samples.height or p.info]

    def unknown() -> int:
        claimed = np.zeros(lines.height, dtype=np.bool_)
        for p in parts:
            claimed[p.claimed.to_numpy()] = True
        return reader._non_blank(lines.get_column("text").filter(pl.Series(~claimed)))

    steps: dict[str, Callable[[], Any]] = {
        "read_lines": lambda: read_lines(path, anchored=reader.ANCHORED),
        "times": lambda: text.lines.with_columns(line_times(text.lines, own_line_times(text.lines, rows))),
        "gates": lambda: reader.present_families(lines, rows),
        **{f"parse:{name}": (lambda parse=parse: parse(lines)) for name, parse in parsers.items()},
        "unknown lines": unknown,
        "build": lambda: build_trace(
            path, parts, rank=0, rank_source="single", source=0, fmt="log", unknown={}, garbled=text.garbled
        ),
    }
    return {step: round(best(fn, repeats)[1] * 1000, 1) for step, fn in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=64.0, help="MB of log text per family (default 64)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--families", default=",".join(SAMPLES), help="comma-separated families to run (default all)")
    ap.add_argument("--steps", action="store_true", help="also time read_log's steps one by one")
    ap.add_argument("--vary", action="store_true", help="change the numbers of each copy (see the module docstring)")
    ap.add_argument("--no-numba", action="store_true", help="do not import numba first (see the module docstring)")
    args = ap.parse_args()
    if not args.no_numba:
        import numba  # noqa: F401  (as in di convert / di analyze: see the module docstring)
    if not DATA.is_dir():
        sys.exit(f"shared log samples absent: {DATA.name}/ not found under ../shared/data")
    from di.convert.logs import reader
    from di.convert.logs.text import line_times, own_line_times, read_lines

    results: dict[str, Any] = {
        "mb_per_family": args.mb,
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg()[0],
        "families": {},
        "vary": args.vary,
    }
    print(f"{'family':12} {'step':10} {'MB':>7} {'MB/s wall':>10} {'MB/s CPU':>10} {'rss MB':>7}")
    with tempfile.TemporaryDirectory(prefix="di-bench-logs-") as tmp:
        for family, files in SAMPLES.items():
            if family not in args.families.split(","):
                continue
            text = b"".join((DATA / f).read_bytes().rstrip(b"\n") + b"\n" for f in files)
            copies = max(1, int(args.mb * 1e6 / len(text)))
            data = b"".join(varied(text, k) for k in range(copies)) if args.vary else text * copies
            path = Path(tmp) / f"{family}.log"
            path.write_bytes(data)
            mb = len(data) / 1e6
            plain = read_lines(path).lines
            own = own_line_times(plain)
            lines = plain.with_columns(line_times(plain, own), own)  # as read_log gives them to every parser
            parse = reader.FAMILIES[family][1]
            steps = {
                "lines": lambda path=path: read_lines(path),
                "times": lambda plain=plain: plain.with_columns(line_times(plain, own_line_times(plain))),
                family: lambda parse=parse, lines=lines: parse(lines),
                "read_log": lambda path=path: reader.read_log(path),
            }
            out = {}
            for step, fn in steps.items():
                wall, cpu = best(fn, args.repeats)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
                out[step] = {
                    "mb_per_s_wall": round(mb / wall, 1),
                    "mb_per_s_cpu": round(mb / cpu, 1) if cpu else None,
                    "peak_rss_mb": round(rss, 1),
                }
                cpu_rate = mb / cpu if cpu else float("nan")
                print(f"{family:12} {step:10} {mb:7.1f} {mb / wall:10.1f} {cpu_rate:10.1f} {rss:7.0f}")
            if args.steps:
                out["read_log_steps_cpu_ms"] = read_log_steps(path, args.repeats)
                for step, ms in out["read_log_steps_cpu_ms"].items():
                    print(f"{'':12}   {step:22} {ms:8.1f} ms CPU")
            results["families"][family] = {"mb": round(mb, 1), **out}
            path.unlink()
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "logs.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Speed on a trace shaped like a real PyTorch profile (issue 16), not one that is kind to the code.

    python bench/realshape.py [--events 1200000] [--shapes 12] [--layout kineto] [--keep DIR] [--threads 1]
                              [--repeat 3] [--steps load_json,save_di] [--provision MB]

The input is a Kineto JSON file written here the way the PyTorch profiler
writes one (not by di's writer, whose files di reads through its own fast
path): CPU ops (``cpu_op``) nested under ``ProfilerStep#N``, Python function
events (``python_function``), CUDA runtime calls with a correlation id, and
their kernels and copies on two streams, each event with args as Kineto
writes them (External id, correlation, Sequence number, Ev Idx, Python id,
``Input Dims``/``Input type``/``Input Strides``, a kernel's launch
configuration), so every args text in the file is distinct (its ids); read,
those ids are columns of their own and the rest of the texts repeat, as in a
real profile (:func:`launch_args`); kernel names are many (Triton- and CUTLASS-style, one per op and tile
shape: 2,107 distinct names with the default 12 shapes, about 115,000 with
``--shapes 1500``, as a trace of autotuned kernels may hold). The JSON is laid
out as libkineto writes it (an event over indented lines, 470 MB for 1.2 M
events, a fifth of it whitespace), or compact with ``--layout compact`` (382 MB).
Each step is timed in a fresh process (warm: numba's cache filled first by a
small run), with ``POLARS_MAX_THREADS`` and ``NUMBA_NUM_THREADS`` set to
``--threads``, ``--repeat`` times: CPU seconds (user and system), events per
CPU second and the peak RSS of the step over the RSS before it, of the run
with the least CPU time and the median, for
``di.load`` of the JSON, ``di.save`` to ``.di``, OTF2 and Perfetto (each after a save of the small warm-up
file to the same format in the same process, so the writer's libraries are imported and its kernels loaded, as
for ``load_json_warm``; ``save_di_first``, ``save_otf2_first``, ``save_pftrace_first``: the first save of the
process, right after the JSON load, as ``di convert`` runs it), and
``di.load`` of what each save wrote (``load_di``, ``load_otf2``: an archive of
a region per distinct name and a string attribute per event, ``load_pftrace``), each read
once untimed in the same process before the timed read (``load_di_first``, ``load_otf2_first``,
``load_pftrace_first``: the same file as the first large read of a process, as a ``di`` command reads it: the
small warm-up file read first, so only the memory is new). ``load_json`` is the first call of the
process, so it includes importing polars and numba and loading the kernels
from numba's cache (about 0.6 CPU-s here); ``load_json_warm`` loads the small
warm-up file first in the same process, so it times the reading alone. The input's event count, distinct names
and distinct args texts are printed with the figures. With ``--keep DIR`` an
input already there (of the same ``--events``) is used again.

On a shared machine the system time (first touches of fresh memory, which a
loaded host makes slow) varies several-fold from run to run; the best run is
the figure to compare, the median says how far the others were.

``--no-args`` saves the same trace with its args texts null (and the load steps read
what those saves wrote): the cost of every other column, so the share of each step
that the args texts take is a measured figure.

To compare two versions, give the other's folder in ``PYTHONPATH``: each step runs in
the input's folder, so the ``di`` beside this script is not found first.

Two figures separate the program from the machine it runs on. This machine is a
VM whose host takes back the memory the guest frees (free-page reporting), so
the first touch of a page costs about 8 ms per MB of system time (a 256 MB
``np.ones`` costs 2.2 s of it, the same again on a page held already 0.01 s).
``--provision MB`` touches and frees that much memory just before each timed
step, so the step's pages are ones the guest holds, as on a machine without
such a host; the default (0) measures the machine as it is. On such a host di
keeps numpy's arrays in small pages (``di.process.small_pages``); elsewhere
numpy's huge pages stay and the ``di`` command puts polars' tables in huge
pages too (``POLARS_THP=1``): ``NUMPY_MADVISE_HUGEPAGE=1 POLARS_THP=1`` with
``--provision`` measures that here. ``write floor s``
is the CPU time of writing as many bytes as the step wrote, from memory
touched already, with one ``write`` per 8 MB and an ``fsync``: what any writer
of that output pays on this machine. ``lib s`` (the ``.di`` steps) is the
CPU time of the Parquet library alone on the events table, right after the step
in the same process: pyarrow's writer called as the store calls it (its zstd
levels, encodings and pages; the table handed over as Arrow already), or polars reading it back:
the part of the step no code of di's can take away.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

STEP = r"""
import json, resource, sys, time
import di

def peak_kb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))

what, src, dst, provision_mb, no_args = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[5]), sys.argv[6] == "1"
first = what == "load_json_warm" or what.endswith("_first")
if first:  # the libraries imported and the kernels loaded by a small file first
    di.load(sys.argv[4])
trace = di.load(src) if not (what.startswith("load_json") or (first and what.startswith("load"))) else None
if what.startswith("save") and not first:  # warm: the writer's libraries imported and kernels loaded by a small save
    import pathlib
    di.save(di.load(sys.argv[4]), pathlib.Path(dst).with_name("w" + pathlib.Path(dst).suffix), force=True)
if no_args and what.startswith("save"):  # --no-args: the same trace, its args texts null
    import dataclasses, polars as pl
    trace = dataclasses.replace(trace, events=trace.events.with_columns(pl.lit(None, pl.String).alias("args")))
if provision_mb:  # touched and freed: the step's first touches find memory the guest holds already
    import numpy as np
    np.ones(provision_mb << 20, dtype=np.uint8)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS restarts from the current RSS: each step's own peak, not the load's before it
base, base_kb = resource.getrusage(resource.RUSAGE_SELF), peak_kb()
t = time.perf_counter()
if what.startswith("load"):
    trace = di.load(src)
else:
    di.save(trace, dst, force=True)
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime - base.ru_utime + after.ru_stime - base.ru_stime
floor = None
if what.startswith("save"):  # the machine's cost of writing as many bytes, from touched memory, with one write
    import os, pathlib
    out = pathlib.Path(dst)
    parts = [out, out.with_suffix(".def"), out.with_suffix("")] if out.suffix == ".otf2" else [out]  # OTF2: anchor, defs, ranks
    size = sum(f.stat().st_size for p in parts if p.exists() for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    block = bytearray(min(size, 8 << 20))
    probe = out.with_name(out.name + ".floor")
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    with open(probe, "wb") as fh:
        for at in range(0, size, len(block)):
            fh.write(memoryview(block)[: min(len(block), size - at)])
        fh.flush()
        os.fsync(fh.fileno())
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    probe.unlink()
    floor = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
lib = None
if what in ("save_di", "save_di_first", "load_di", "load_di_first"):  # the library alone on the events table, as the store writes and reads it
    import pathlib
    import polars as pl
    events = pathlib.Path(dst if what.startswith("save") else src) / "events.parquet"
    probe = events.with_name("events.floor.parquet")
    table = trace.events if what.startswith("save") else None
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    if table is not None:
        import pyarrow.parquet as pq
        from di.store import COMPRESSION_LEVEL, _arrow_table, parquet_options, required_columns

        arrow = _arrow_table(table, required_columns("events", table, whole=True))
        options = parquet_options(table, COMPRESSION_LEVEL)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        pq.write_table(arrow, probe, **options)
    else:
        pl.read_parquet(events)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    probe.unlink(missing_ok=True)
    lib = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
print(json.dumps({"floor_s": floor, "lib_s": lib, "wall_s": wall, "cpu_s": cpu, "user_s": after.ru_utime - base.ru_utime,
                  "sys_s": after.ru_stime - base.ru_stime, "peak_kb": peak_kb(), "base_kb": base_kb,
                  "events": trace.events.height}))
"""

OPS = (
    "aten::linear",
    "aten::addmm",
    "aten::matmul",
    "aten::mm",
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::gelu",
    "aten::softmax",
    "aten::_softmax",
    "aten::dropout",
    "aten::add",
    "aten::mul",
    "aten::copy_",
    "aten::to",
    "aten::view",
    "aten::transpose",
    "aten::contiguous",
    "aten::empty",
    "aten::bmm",
    "aten::baddbmm",
)


def kernel_name(op: int, shape: int) -> str:
    """Triton- and CUTLASS-style names: one per op and tile shape, as autotuned kernels are."""
    if op % 3 == 0:
        return f"triton_poi_fused_{OPS[op % len(OPS)].split('::')[1]}_{shape}_{op}"
    if op % 3 == 1:
        return f"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize{64 * (1 + shape % 4)}x{128 * (1 + shape % 2)}x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
    return f"void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16_{64 * (1 + shape % 4)}x64_64x3_tn_align8>(Params_{op}_{shape})"


LAYOUTS = ("kineto", "compact")
"""How the input's JSON is laid out: as libkineto writes it (an event over three or four indented lines, a space after
each colon and comma, as the Kineto traces of ../shared/data hold them: a quarter of the bytes is whitespace), or
compact (no whitespace, as a re-serialised trace may be)."""


def _event(layout: str, head: list[tuple[str, str]], times: list[tuple[str, str]], args: list[tuple[str, str]]) -> str:
    """One event object: ``head`` and ``times`` members (key, JSON value text) and its ``args`` (none: no args), laid
    out as libkineto writes them (the head on one line, ts and dur on the next, then the args indented) or compact."""
    if layout == "compact":
        members = [f'"{k}":{v}' for k, v in head + times]
        if args:
            members.append('"args":{' + ",".join(f'"{k}":{v}' for k, v in args) + "}")
        return "{" + ",".join(members) + "}"
    text = "  {\n    " + ", ".join(f'"{k}": {v}' for k, v in head)
    if times:
        text += ",\n    " + ", ".join(f'"{k}": {v}' for k, v in times)
    if args:  # libkineto writes "External id" first and no space after its comma
        first, *rest = args
        text += ',\n    "args": {\n      ' + f'"{first[0]}": {first[1]}' + ("," if rest else "")
        text += ", ".join(f'"{k}": {v}' for k, v in rest)
        text += "\n    }"
    return text + "\n  }"


def _list(values: list, layout: str) -> str:
    """A JSON list as the layout writes it (nested lists too)."""
    sep = "," if layout == "compact" else ", "
    return "[" + sep.join(_list(v, layout) if isinstance(v, list) else str(v) for v in values) + "]"


SMS = 132
"""SMs of the H100 the trace's deviceProperties name."""


def launch_args(op: int, shape: int, dims: list[int], layout: str) -> list[tuple[str, str]]:
    """A kernel's launch configuration as Kineto writes it, from what launched it: the kernel (op and tile shape)
    fixes registers and shared memory, the input's dims the grid; ``blocks per SM`` is the grid's blocks over the
    device's SMs and ``warps per SM`` those blocks' warps over the SMs, as libkineto derives both (so a kernel
    launched again on the same input writes the same texts: the real Kineto traces of ``../shared/data`` hold 173
    distinct kernel args texts among 4,350 kernels, 159 among 2,679)."""
    key = op * 131 + shape
    tile = (64, 128, 256)[key % 3]
    grid = [-(-dims[0] * dims[1] // tile), -(-dims[2] // tile), 1]
    blocks = grid[0] * grid[1] / SMS
    warps = blocks * 128 / 32
    return [
        ("registers per thread", str((32, 64, 128, 168)[key % 4])),
        ("shared memory", str((0, 16384, 49152)[key % 3])),
        ("blocks per SM", f"{blocks:.6f}"),
        ("warps per SM", f"{warps:.6f}"),
        ("grid", _list(grid, layout)),
        ("block", _list([128, 1, 1], layout)),
        ("est. achieved occupancy %", str(min(100, int(warps / 64 * 100)))),
    ]


def write_trace(path: Path, events: int, shapes: int = 12, layout: str = "kineto") -> dict[str, int]:
    """A Kineto-shaped JSON file with about ``events`` events, kernels of ``shapes`` tile shapes per op, laid out as
    ``layout`` says (:data:`LAYOUTS`); returns its counts."""
    import random

    rng = random.Random(0)
    top = (
        '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, '
        '"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],\n"traceEvents": [\n'
    )
    t, ext, corr, n, step = 1_000_000.0, 0, 0, 0, 0
    names, args = set(), 0
    lines: list[str] = []

    def event(head: list[tuple[str, str]], ts: float, dur: float | None, a: list[tuple[str, str]]) -> str:
        times = [("ts", f"{ts:.3f}")] + ([("dur", f"{dur:.3f}")] if dur is not None else [])
        return _event(layout, head, times, a)

    while n < events:
        step_start = t
        step_lines: list[str] = []
        for k in range(400):
            op = rng.randrange(len(OPS) * 8)
            shape = rng.randrange(shapes)
            dims = [rng.choice((1, 8, 16, 32)), rng.choice((128, 512, 1024, 2048)), rng.choice((768, 1024, 4096))]
            ext += 1
            corr += 1
            dur = 5 + rng.random() * 40
            host = [("pid", "1"), ("tid", "1")]
            py = event(
                [("ph", '"X"'), ("cat", '"python_function"'), ("name", f'"nn.Module: Layer_{k % 48}"'), *host],
                t,
                dur + 4,
                [("Python id", str(ext)), ("Python parent id", str(ext - 1)), ("Python thread", "0")],
            )
            cpu = event(
                [("ph", '"X"'), ("cat", '"cpu_op"'), ("name", f'"{OPS[op % len(OPS)]}"'), *host],
                t + 1,
                dur,
                [
                    ("External id", str(ext)),
                    ("Sequence number", str(ext * 3)),
                    ("Fwd thread id", "0"),
                    ("Record function id", "0"),
                    ("Input Dims", _list([dims, dims[1:]], layout)),
                    ("Input type", _list(['"c10::Half"', '"c10::Half"'], layout)),
                    ("Input Strides", _list([[dims[1] * dims[2], dims[2], 1], [dims[2], 1]], layout)),
                    ("Ev Idx", str(ext * 2)),
                ],
            )
            api = event(
                [("ph", '"X"'), ("cat", '"cuda_runtime"'), ("name", '"cudaLaunchKernel"'), *host],
                t + 2,
                3.5,
                [("External id", str(ext)), ("cbid", "211"), ("correlation", str(corr))],
            )
            kname = kernel_name(op, shape)
            names.add(kname)
            kern = event(
                [("ph", '"X"'), ("cat", '"kernel"'), ("name", f'"{kname}"'), ("pid", "0"), ("tid", "7")],
                t + 8,
                dur * 0.8,
                [
                    ("External id", str(ext)),
                    ("queued", "0"),
                    ("device", "0"),
                    ("context", "1"),
                    ("stream", "7"),
                    ("correlation", str(corr)),
                    *launch_args(op, shape, dims, layout),
                ],
            )
            start = _event(
                layout,
                [("ph", '"s"'), ("id", str(corr)), *host, ("ts", f"{t + 2:.3f}")],
                [("cat", '"ac2g"'), ("name", '"ac2g"')],
                [],
            )
            finish = _event(
                layout,
                [("ph", '"f"'), ("id", str(corr)), ("pid", "0"), ("tid", "7"), ("ts", f"{t + 8:.3f}")],
                [("cat", '"ac2g"'), ("name", '"ac2g"'), ("bp", '"e"')],
                [],
            )
            step_lines += [py, cpu, api, kern, start, finish]
            n += 4
            args += 4
            t += dur + 6
        step_lines.insert(
            0,
            event(
                [
                    ("ph", '"X"'),
                    ("cat", '"user_annotation"'),
                    ("name", f'"ProfilerStep#{step}"'),
                    ("pid", "1"),
                    ("tid", "1"),
                ],
                step_start - 0.5,
                t - step_start + 1,
                [("External id", str(ext + 1))],
            ),
        )
        ext += 1
        n += 1
        step += 1
        lines.append(",\n".join(step_lines))
    names.update(OPS)
    path.write_text(
        top + ",\n".join(lines) + '\n],\n"displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000}\n'
    )
    return {"events": n, "distinct_names": len(names) + 2, "distinct_args_about": args}


def run_step(
    what: str, src: Path, dst: Path, threads: int, provision_mb: int = 0, no_args: bool = False
) -> dict[str, Any]:
    env = {**os.environ, "POLARS_MAX_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads)}
    small = src.parent / "warm.json"
    done = subprocess.run(
        [sys.executable, "-c", STEP, what, str(src), str(dst), str(small), str(provision_mb), str(int(no_args))],
        capture_output=True,
        text=True,
        env=env,
        cwd=src.parent,  # not the checkout: ``-c`` puts the working folder first on sys.path, before PYTHONPATH
        check=False,
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


STEPS = (
    "load_json",
    "load_json_warm",
    "save_di",
    "save_di_first",
    "load_di",
    "load_di_first",
    "save_otf2",
    "save_otf2_first",
    "load_otf2",
    "load_otf2_first",
    "save_pftrace",
    "save_pftrace_first",
    "load_pftrace",
    "load_pftrace_first",
)
READS = {
    **{step: ("save_di", "x.di") for step in ("load_di", "load_di_first")},
    **{step: ("save_otf2", "x.otf2") for step in ("load_otf2", "load_otf2_first")},
    **{step: ("save_pftrace", "x.pftrace") for step in ("load_pftrace", "load_pftrace_first")},
}
"""Steps that read what a save step wrote: the real-shaped trace as a .di store, an OTF2 archive with a region per
distinct name and a string attribute per event, and a Perfetto trace with an args text per event."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_200_000)
    p.add_argument(
        "--shapes", type=int, default=12, help="kernel tile shapes per op: the distinct names grow with it (see above)"
    )
    p.add_argument("--layout", choices=LAYOUTS, default="kineto", help="the input's JSON layout (see LAYOUTS)")
    p.add_argument("--keep", help="folder for the input and outputs (default: a temporary one)")
    p.add_argument(
        "--threads", type=int, default=1, help="POLARS_MAX_THREADS and NUMBA_NUM_THREADS of the measured processes"
    )
    p.add_argument("--repeat", type=int, default=3, help="runs of each step (the best and the median are shown)")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    p.add_argument(
        "--provision",
        type=int,
        default=0,
        metavar="MB",
        help="touch and free this many MB just before each timed step (see the module docstring)",
    )
    p.add_argument(
        "--no-args",
        action="store_true",
        help="save the same trace with its args texts null (to x-noargs.*, which the load steps then read): what the "
        "other columns cost, the args aside",
    )
    args = p.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="di-realshape-") as tmp:
        where = Path(args.keep) if args.keep else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        src = where / "real-shaped.json"
        made = where / "real-shaped.counts.json"
        asked = [args.events, args.shapes, args.layout]
        if src.exists() and made.exists() and json.loads(made.read_text()).get("asked") == asked:
            counts = json.loads(made.read_text())["counts"]
        else:
            counts = write_trace(src, args.events, args.shapes, args.layout)
            made.write_text(json.dumps({"asked": asked, "counts": counts}))
        small = where / "warm.json"
        write_trace(small, 2_000, layout=args.layout)
        for what, dst in (
            ("load_json", None),
            ("save_di", "w.di"),
            ("save_otf2", "w.otf2"),
            ("save_pftrace", "w.pftrace"),
        ):
            run_step(
                what, small, where / (dst or "none"), args.threads
            )  # fills numba's cache: the figures below are warm
            if dst:
                run_step("load_" + dst.split(".")[-1], where / dst, where / "none", args.threads)
        import di

        trace = di.load(src)
        counts.update(
            events=trace.events.height,
            distinct_names=trace.events.get_column("name").n_unique(),
            distinct_args=trace.events.get_column("args").n_unique(),
        )
        del trace
        size = src.stat().st_size
        print(json.dumps({"input": counts, "json_bytes": size}))
        print(
            f"{'step':<19}{'cpu s':>8}{'user':>7}{'sys':>7}{'M ev/cpu-s':>12}{'median':>8}{'peak MB':>9}{'peak/input':>11}"
            f"{'write floor s':>14}{'lib s':>10}"
        )

        def output(name: str) -> Path:
            return where / (name.replace("x.", "x-noargs.") if args.no_args else name)

        for read, (save, out) in READS.items():
            if read in steps and save not in steps and not output(out).exists():
                steps.insert(steps.index(read), save)
        for what in steps:
            dst = {"save_di": "x.di", "save_otf2": "x.otf2", "save_pftrace": "x.pftrace"}.get(
                what.removesuffix("_first")
            )
            source = output(READS[what][1]) if what in READS else src
            runs = [
                run_step(
                    what, source, output(dst) if dst else where / "none", args.threads, args.provision, args.no_args
                )
                for _ in range(args.repeat)
            ]
            failed = [r for r in runs if "error" in r]
            if failed:
                print(f"{what:<19} failed: {failed[0]['error']}")
                continue
            runs.sort(key=lambda r: r["cpu_s"])
            best, median = runs[0], runs[len(runs) // 2]
            rate = best["events"] / best["cpu_s"] / 1e6 if best["cpu_s"] else float("inf")
            median_rate = median["events"] / median["cpu_s"] / 1e6 if median["cpu_s"] else float("inf")
            peak_mb = (best["peak_kb"] - best["base_kb"]) / 1024
            print(
                f"{what:<19}{best['cpu_s']:>8.2f}{best['user_s']:>7.2f}{best['sys_s']:>7.2f}{rate:>12.2f}"
                f"{median_rate:>8.2f}{peak_mb:>9.0f}{peak_mb * 2**20 / size:>11.2f}"
                + (f"{best['floor_s']:>14.2f}" if best.get("floor_s") is not None else f"{'':>14}")
                + (f"{best['lib_s']:>10.2f}" if best.get("lib_s") is not None else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

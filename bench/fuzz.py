"""Fuzz every reader: mutated copies of real small traces through ``di.load``.

Run on demand (not a test; ``tests/test_fuzz.py`` runs a few hundred inputs)::

    python bench/fuzz.py [--count 100000] [--seed 0] [--reader kineto,chrome,perfetto,otf2,di,nsys,log]
                         [--workers 1] [--timeout 10] [--max-rss-mb 2048] [--cli-every 500]
    python bench/fuzz.py --reader otf2 --replay SEED [--keep DIR]    # one input again, in this process

Seed traces: ``../shared/data`` when present (small Kineto files and OTF2
archives), and always traces di's writers build (see ``tests/fuzz_cases.py``,
which also holds the mutations and the contract). ``--count`` inputs are
shared evenly among the readers; input ``i`` of a run has case seed
``seed * 10_000_000 + i``.

Each input runs in a worker process (``--workers`` of them, started with
spawn); the parent kills a worker that takes longer than ``--timeout``
seconds (a hang) or grows past ``--max-rss-mb`` (unbounded memory), and
notes a worker that dies (a crash in native code), then starts a new one.
Every ``--cli-every``-th input also goes through ``python -m di info FILE`` in
a subprocess: exit code 0 or 2, one line on stderr, no "Traceback".

Reported per reader: clean loads, loads with warnings or drops, clean
errors (DIError, FileNotFoundError naming the file), failures (any other
exception, an invalid trace, a hang, a crash, memory) deduplicated by
exception type and innermost di frame with the seeds to replay, CLI checks,
inputs skipped because a mutation itself raised (a bug of the fuzzer), and
inputs/s per second of one worker. A table goes to stdout, everything to ``bench/out/fuzz.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
SHARED = REPO.parent / "shared" / "data"
SEEDS_PER_RUN = 10_000_000
POLL_S = 0.1


def _setup_path() -> None:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def worker(conn: Connection, corpus_dir: str, readers: list[str], stacks: str, timeout_s: float) -> None:
    """Run inputs sent as (reader, case seed, cli) until None; answer each with a result dict. An input still running
    just before ``timeout_s`` has every thread's stack written to the file ``stacks`` (the parent reports it)."""
    _setup_path()
    import faulthandler

    stack_file = open(stacks, "w")  # noqa: SIM115  open for the worker's life
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the OTF2 library prints its errors to stderr
    import di
    from tests import fuzz_cases as C

    corpus = C.load_corpus(Path(corpus_dir))
    scratch = Path(tempfile.mkdtemp(prefix="di-fuzz-"))
    for reader in readers:  # warm up: numba's cache, imports
        for i, seed in enumerate(corpus[reader]):
            folder = scratch / f"warm-{reader}-{i}"
            C._put(folder, seed.files)
            try:
                di.load(folder / seed.entry)
            except Exception:  # noqa: BLE001  a seed di cannot read is reported by the runs
                pass
    shutil.rmtree(scratch, ignore_errors=True)
    conn.send("ready")
    while (job := conn.recv()) is not None:
        reader, case_seed, cli = job
        folder = scratch / f"case-{case_seed}"
        folder.mkdir(parents=True)
        started = time.perf_counter()
        stack_file.seek(0)
        stack_file.truncate()
        faulthandler.dump_traceback_later(max(1.0, timeout_s - 1.0), file=stack_file)
        try:
            path = C.write_case(corpus, reader, case_seed, folder)
        except Exception as exc:  # noqa: BLE001  a bug of the mutations, not of di: counted apart
            outcome, cli = C.Outcome("skipped", f"mutation raised {type(exc).__name__}: {exc}"[:200]), False
        else:
            outcome = C.check(path, folder)
        faulthandler.cancel_dump_traceback_later()
        cli_problem = C.cli_problem(path, REPO) if cli else None
        shutil.rmtree(folder, ignore_errors=True)
        conn.send(
            {
                "kind": outcome.kind,
                "key": outcome.key,
                "message": outcome.message,
                "cli": cli,
                "cli_problem": cli_problem,
                "seconds": time.perf_counter() - started,
            }
        )


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Slot:
    """One worker process and the input it is running."""

    def __init__(self, ctx: Any, corpus_dir: str, readers: list[str], timeout_s: float) -> None:
        self.conn, child = ctx.Pipe()
        fd, self.stacks = tempfile.mkstemp(prefix="di-fuzz-stacks-", suffix=".txt")
        os.close(fd)
        self.proc = ctx.Process(target=worker, args=(child, corpus_dir, readers, self.stacks, timeout_s), daemon=True)
        self.proc.start()
        child.close()
        if self.conn.recv() != "ready":
            raise RuntimeError("fuzz worker did not start")
        self.job: tuple[str, int, bool] | None = None
        self.since = 0.0

    def start(self, job: tuple[str, int, bool]) -> None:
        self.job, self.since = job, time.monotonic()
        self.conn.send(job)

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except OSError:
                pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        Path(self.stacks).unlink(missing_ok=True)

    def stack_dump(self) -> str:
        """The stacks the worker wrote before a hang (its last lines), or nothing."""
        try:
            return Path(self.stacks).read_text(errors="replace")[-1500:]
        except OSError:
            return ""


def run(
    jobs: list[tuple[str, int, bool]],
    corpus_dir: str,
    readers: list[str],
    workers: int,
    timeout_s: float,
    max_rss_mb: float,
    report: Any,
) -> None:
    """Feed ``jobs`` to the workers; ``report(job, result)`` gets every result (dicts as :func:`worker` sends)."""
    from tests.fuzz_cases import CLI_TIMEOUT_S

    ctx = mp.get_context("spawn")
    slots = [Slot(ctx, corpus_dir, readers, timeout_s) for _ in range(min(workers, len(jobs)))]
    todo = list(reversed(jobs))
    for s in slots:
        if todo:
            s.start(todo.pop())
    while any(s.job for s in slots):
        ready = wait([s.conn for s in slots if s.job], timeout=POLL_S)
        for s in slots:
            if not s.job:
                continue
            failure = None
            if s.conn in ready:
                try:
                    report(s.job, s.conn.recv())
                    s.job = None
                except (EOFError, OSError):
                    s.proc.join(5)
                    failure = {
                        "kind": "failure",
                        "key": f"worker died (exit code {s.proc.exitcode}: a crash in native code)",
                    }
            elif time.monotonic() - s.since > timeout_s + (CLI_TIMEOUT_S if s.job[2] else 0):
                failure = {"kind": "failure", "key": f"hang: no answer within {timeout_s:g} s"}
            elif _rss_mb(s.proc.pid) > max_rss_mb:
                failure = {"kind": "failure", "key": f"memory: worker RSS over {max_rss_mb:g} MB"}
            if failure:
                job = s.job
                s.proc.kill()
                s.proc.join()
                stacks = s.stack_dump() if failure["key"].startswith("hang") else ""
                Path(s.stacks).unlink(missing_ok=True)
                report(
                    job,
                    {
                        **failure,
                        "message": stacks,
                        "cli": False,
                        "cli_problem": None,
                        "seconds": time.monotonic() - s.since,
                    },
                )
                s.__init__(ctx, corpus_dir, readers, timeout_s)  # a fresh worker
            if not s.job and todo:
                s.start(todo.pop())
    for s in slots:
        s.stop()


class Tally:
    """Outcomes per reader."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.failures: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.cli: dict[str, Counter[str]] = defaultdict(Counter)
        self.seconds: Counter[str] = Counter()

    def add(self, job: tuple[str, int, bool], result: dict[str, Any]) -> None:
        reader, seed, _ = job
        self.counts[reader][result["kind"]] += 1
        self.seconds[reader] += result["seconds"]
        if result["kind"] in ("failure", "skipped"):
            entry = self.failures[reader].setdefault(
                result["key"], {"count": 0, "seeds": [], "message": result["message"]}
            )
            entry["count"] += 1
            if len(entry["seeds"]) < 5:
                entry["seeds"].append(seed)
        if result["cli"]:
            self.cli[reader]["failure" if result["cli_problem"] else "ok"] += 1
            if result["cli_problem"]:
                key = f"CLI: {result['cli_problem'][:120]}"
                entry = self.failures[reader].setdefault(key, {"count": 0, "seeds": [], "message": ""})
                entry["count"] += 1
                if len(entry["seeds"]) < 5:
                    entry["seeds"].append(seed)


def replay(corpus_dir: str, reader: str, case_seed: int, keep: Path | None) -> int:
    """Build one input, load it in this process (a traceback shows) and print its outcome."""
    _setup_path()
    from tests import fuzz_cases as C

    corpus = C.load_corpus(Path(corpus_dir))
    root = keep or Path(tempfile.mkdtemp(prefix="di-fuzz-"))
    folder = root / f"case-{case_seed}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        path = C.write_case(corpus, reader, case_seed, folder)
        print(f"input: {path}" + ("" if keep else " (removed at the end; --keep DIR keeps it)"))
        outcome = C.check(path, folder)
        print(f"outcome: {outcome.kind} {outcome.key} {outcome.message}")
        print(f"CLI: {C.cli_problem(path, REPO) or 'ok'}")
        if outcome.kind == C.FAILURE:
            import di

            di.load(path).validate()  # the traceback
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if outcome.kind == C.FAILURE else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=100_000, help="inputs in all, shared evenly among the readers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reader",
        default="kineto,chrome,perfetto,otf2,di,nsys,log,slurm_json",
        help="comma-separated: kineto, chrome, perfetto, otf2, di, nsys, log (text logs: needs ../shared/data), "
        "slurm_json (Slurm's --json documents)",
    )
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds an input may take before it counts as a hang")
    p.add_argument("--max-rss-mb", type=float, default=2048.0)
    p.add_argument(
        "--cli-every", type=int, default=500, help="every Nth input also through `python -m di info` (0: never)"
    )
    p.add_argument("--replay", type=int, metavar="SEED", help="run the input of one case seed in this process")
    p.add_argument("--keep", type=Path, help="with --replay: write the input under this directory")
    p.add_argument("--json", type=Path, default=OUT / "fuzz.json")
    args = p.parse_args(argv)
    readers = args.reader.split(",")
    _setup_path()
    from tests import fuzz_cases as C

    unknown = set(readers) - set(C.READERS)
    if unknown:
        p.error(f"unknown reader(s) {sorted(unknown)}; choose from {', '.join(C.READERS)}")
    with tempfile.TemporaryDirectory(prefix="di-fuzz-corpus-") as tmp:
        corpus_dir = str(C.build_corpus(Path(tmp) / "corpus", SHARED if SHARED.is_dir() else None))
        seeded = C.load_corpus(Path(corpus_dir))
        empty = [r for r in readers if not seeded[r]]
        if empty:
            print(f"no seeds for {', '.join(empty)} (../shared/data absent): skipped")
            readers = [r for r in readers if seeded[r]]
            if not readers:
                return 0
        if args.replay is not None:
            return replay(corpus_dir, readers[0], args.replay, args.keep)
        per = max(1, args.count // len(readers))
        jobs = [
            (r, args.seed * SEEDS_PER_RUN + i, bool(args.cli_every) and i % args.cli_every == args.cli_every - 1)
            for i in range(per)
            for r in readers
        ]
        tally = Tally()
        done = [0]
        started = time.monotonic()

        def report(job: tuple[str, int, bool], result: dict[str, Any]) -> None:
            tally.add(job, result)
            done[0] += 1
            if done[0] % 1000 == 0:
                print(
                    f"  {done[0]:,}/{len(jobs):,} inputs, {done[0] / (time.monotonic() - started):.1f}/s",
                    file=sys.stderr,
                    flush=True,
                )

        run(jobs, corpus_dir, readers, args.workers, args.timeout, args.max_rss_mb, report)
        wall = time.monotonic() - started
        seeds = {r: [s.name for s in C.load_corpus(Path(corpus_dir))[r]] for r in readers}
    return _print(args, readers, tally, wall, len(jobs), seeds)


def _print(
    args: argparse.Namespace, readers: list[str], tally: Tally, wall: float, n: int, seeds: dict[str, list[str]]
) -> int:
    kinds = ("clean", "warnings", "error", "failure", "skipped")
    print(f"fuzz: {n:,} inputs, seed {args.seed}, {args.workers} worker(s), {wall:.0f} s wall, {n / wall:.1f} inputs/s")
    print(
        f"{'reader':10}{'inputs':>9}"
        + "".join(f"{k:>10}" for k in kinds)
        + f"{'CLI ok':>8}{'CLI bad':>8}{'inputs/s':>10}"
    )
    rows = {}
    for r in readers:
        c, total = tally.counts[r], sum(tally.counts[r].values())
        rate = total / tally.seconds[r] if tally.seconds[r] else 0.0  # per second of one worker
        rows[r] = {
            "inputs": total,
            **{k: c[k] for k in kinds},
            "cli": dict(tally.cli[r]),
            "inputs_per_s": round(rate, 1),
            "failures": tally.failures[r],
            "seeds": seeds[r],
        }
        print(
            f"{r:10}{total:>9,}"
            + "".join(f"{c[k]:>10,}" for k in kinds)
            + f"{tally.cli[r]['ok']:>8}{tally.cli[r]['failure']:>8}{rate:>10.1f}"
        )
    for r in readers:
        for key, f in sorted(tally.failures[r].items(), key=lambda kv: -kv[1]["count"]):
            # a hang's message is the worker's stacks just before the time ran out: shown whole
            message = f["message"] if key.startswith("hang") else repr(f["message"][:200])
            print(
                f"{'SKIP' if key.startswith('mutation raised') else 'FAIL'} {r}: {f['count']} x {key}\n     {message}\n     replay: python bench/fuzz.py --reader {r} --replay {f['seeds'][0]}"
                f"   (seeds {', '.join(map(str, f['seeds']))})"
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "count": n,
                "seed": args.seed,
                "workers": args.workers,
                "wall_s": round(wall, 1),
                "timeout_s": args.timeout,
                "max_rss_mb": args.max_rss_mb,
                "readers": rows,
            },
            indent=1,
        )
    )
    return 1 if any(tally.failures[r] for r in readers) else 0


if __name__ == "__main__":
    sys.exit(main())

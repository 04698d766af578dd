"""Fuzz targets, one per reader: mutated copies of small real traces through ``di.load``.

Each target runs a fixed set of case seeds (the same inputs on every run) and
checks the contract of :mod:`tests.fuzz_cases`: a trace that validates, or a
DIError / FileNotFoundError whose one-line message names the file; never
another exception, never a hang. ``bench/fuzz.py`` runs the same targets on
100 k inputs; a failing seed is replayed with
``python bench/fuzz.py --reader READER --replay SEED``.
"""

from __future__ import annotations

import faulthandler
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests import fuzz_cases as C
from tests.conftest import DATA

INPUTS = {
    "kineto": 100,
    "chrome": 100,
    "perfetto": 100,
    "otf2": 40,
    "di": 120,
    "nsys": 40,
    "log": 150,
    "slurm_json": 100,
}
"""Inputs per reader in CI: 1-4 s each warm on a shared 2-core machine."""
HANG_S = 60
"""An input still loading after this long is a hang: faulthandler dumps every thread and ends the run."""
SLOW_S = 10.0
"""An input taking more CPU seconds than this is reported (the warm loads take well under a second); CPU time,
not wall time, so that a loaded machine does not fail the run."""
REPO = Path(__file__).resolve().parents[1]
CLI_SEEDS = {
    "kineto": (3,),
    "chrome": (1,),
    "perfetto": (1,),
    "otf2": (1,),
    "di": (3,),
    "nsys": (1,),
    "log": (2,),
    "slurm_json": (1,),
}
"""Inputs checked through ``python -m di info`` (with ../shared/data: kineto's and otf2's an error, chrome's
and perfetto's a load with warnings, di's a clean load)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[C.Seed]]:
    root = C.build_corpus(tmp_path_factory.mktemp("fuzz") / "corpus", DATA if DATA.is_dir() else None)
    return C.load_corpus(root)


def run_inputs(corpus: dict[str, list[C.Seed]], reader: str, seeds: range, tmp: Path) -> list[str]:
    """The failures among ``seeds`` (one line each, with the seed to replay)."""
    failures = []
    for seed in seeds:
        folder = tmp / f"case-{seed}"
        folder.mkdir()
        path = C.write_case(corpus, reader, seed, folder)
        started = time.process_time()
        faulthandler.dump_traceback_later(HANG_S, exit=True)
        try:
            outcome = C.check(path, folder)
        finally:
            faulthandler.cancel_dump_traceback_later()
        took = time.process_time() - started
        if outcome.kind == C.FAILURE:
            failures.append(f"seed {seed}: {outcome.key}: {outcome.message[:200]}")
        elif took > SLOW_S and seed != seeds.start:  # the first input pays numba's compile of the reader
            again = _cpu_s_again(path, folder)  # slow twice: the input, not a compile or a stall of the machine
            if again > SLOW_S:
                failures.append(f"seed {seed}: took {took:.1f} CPU-s, then {again:.1f}")
        shutil.rmtree(folder)
    return failures


def _cpu_s_again(path: Path, folder: Path) -> float:
    started = time.process_time()
    C.check(path, folder)
    return time.process_time() - started


@pytest.mark.parametrize("reader", C.READERS)
def test_reader_keeps_its_contract_on_mutated_inputs(
    reader: str, corpus: dict[str, list[C.Seed]], tmp_path: Path
) -> None:
    if not corpus[reader]:
        pytest.skip(f"no {reader} seeds: ../shared/data absent")
    failures = run_inputs(corpus, reader, range(INPUTS[reader]), tmp_path)
    assert not failures, f"replay with: python bench/fuzz.py --reader {reader} --replay SEED\n" + "\n".join(failures)


FOUND = {
    "otf2": (
        270000240,  # a location ref of 2^64 - 1 as the thread id
        771230001549,  # a region description of di's with a category the model lacks
    ),
    "kineto": (771230001692,),  # a distributedInfo rank nested thousands deep (no repr)
    "log": (
        27,
        10000622,
        10000827,
        10002443,
        10002658,
        10003714,
        10004237,
        20004785,
        30001720,
        10003309,
        10005462,
        20000165,
        20002953,
        30004684,
        40001718,  # a Darshan start_time beyond int64 ns
        60003577,  # one of 70,000 digits
    ),
}
"""Inputs that ``bench/fuzz.py`` found failing (with ../shared/data), each fixed: kept as regression inputs."""


@pytest.mark.parametrize("reader", sorted(FOUND))
def test_inputs_found_by_the_fuzzer_keep_the_contract(
    reader: str, corpus: dict[str, list[C.Seed]], tmp_path: Path
) -> None:
    if not DATA.is_dir():
        pytest.skip("the inputs were found on the corpus with ../shared/data, absent here")
    failures = []
    for seed in FOUND[reader]:
        failures += run_inputs(corpus, reader, range(seed, seed + 1), tmp_path)
    assert not failures, "\n".join(failures)


def test_inputs_are_reproducible_from_their_seed(corpus: dict[str, list[C.Seed]], tmp_path: Path) -> None:
    def files(reader: str, seed: int, name: str) -> dict[Path, bytes]:
        folder = tmp_path / reader / name
        C.write_case(corpus, reader, seed, folder)
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    for reader in (r for r in C.READERS if corpus[r]):
        assert files(reader, 7, "a") == files(reader, 7, "b"), reader
        assert len({repr(sorted(files(reader, seed, str(seed)).items())) for seed in range(8, 12)}) > 1, reader


def test_cli_answers_mutated_inputs_without_a_traceback(corpus: dict[str, list[C.Seed]], tmp_path: Path) -> None:
    """``di info`` on inputs of every reader (two processes at a time): exit 0, or 2 with one line."""
    paths = []
    for reader in (r for r in C.READERS if corpus[r]):
        for seed in CLI_SEEDS[reader]:
            folder = tmp_path / f"{reader}-{seed}"
            folder.mkdir()
            paths.append(C.write_case(corpus, reader, seed, folder))
    problems = []
    for pair in (paths[i : i + 2] for i in range(0, len(paths), 2)):
        procs = []
        for path in pair:
            argv, env = C.cli_command(path, REPO)
            procs.append(
                (
                    path,
                    subprocess.Popen(
                        argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                    ),
                )
            )
        for path, proc in procs:
            out, err = proc.communicate(timeout=C.CLI_TIMEOUT_S)
            verdict = C.cli_verdict(proc.returncode, out, err)
            if verdict:
                problems.append(f"{path.relative_to(tmp_path)}: {verdict}")
    assert not problems, "\n".join(problems)

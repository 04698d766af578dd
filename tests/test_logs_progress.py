"""Progress bars (di.convert.logs.progress): tqdm's renderings, carriage-return separated as a file holds them,
read into the loop's pace and the postfix metrics, on the elapsed time or the log's clock."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di
from di.convert.logs.reader import families_in

S = 1_000_000_000
BAR = "Epoch {e}: {p:3d}%|{bar:<10}| {n}/1000 [{el}<{rem}, {rate}, v_num=0, train_loss={loss}{extra}]"


def lightning(tmp_path: Path, tail: str = "") -> Path:
    """Two epochs: epoch 0's three updates on one line (carriage returns between), epoch 1's one; 5 it/s, then 4."""
    e0 = [
        BAR.format(e=0, p=10, bar="█", n=100, el="00:20", rem="03:00", rate="5.00it/s", loss="2.310", extra=""),
        BAR.format(e=0, p=20, bar="██", n=200, el="00:40", rem="02:40", rate="5.00it/s", loss="2.100", extra=""),
        BAR.format(
            e=0,
            p=100,
            bar="█" * 10,
            n=1000,
            el="03:20",
            rem="00:00",
            rate="5.00it/s",
            loss="1.500",
            extra=", val_loss=1.700",
        ),
    ]
    e1 = BAR.format(e=1, p=50, bar="█" * 5, n=500, el="01:40", rem="01:40", rate="4.00it/s", loss="1.400", extra="")
    path = tmp_path / "lightning.log"
    path.write_text("GPU available: True (cuda), used: True\n" + "\r".join(e0) + "\n" + e1 + tail + "\n")
    return path


def series(trace: di.Trace, name: str) -> list[tuple[int, float]]:
    s = trace.samples.join(trace.series, on="series").filter(pl.col("name") == name).sort("ts_ns")
    return list(zip(s.get_column("ts_ns").to_list(), s.get_column("value").to_list()))


def test_each_update_gives_the_pace_and_the_postfix_on_the_elapsed_time(tmp_path: Path) -> None:
    path = lightning(tmp_path)
    assert "progress" in families_in(path.read_bytes())
    trace = di.load(path)
    # epoch 1 starts where epoch 0 ended (200 s), its update 100 s in
    times = [20 * S, 40 * S, 200 * S, 300 * S]
    assert series(trace, "loss") == list(zip(times, [2.31, 2.1, 1.5, 1.4]))  # train_loss is a training log's loss
    assert series(trace, "steps_per_s") == list(zip(times, [5.0, 5.0, 5.0, 4.0]))
    assert series(trace, "step_time") == list(zip(times, [0.2, 0.2, 0.2, 0.25]))
    assert series(trace, "step") == list(zip(times, [100.0, 200.0, 1000.0, 500.0]))
    assert series(trace, "val_loss") == [(200 * S, 1.7), (300 * S, 1.7)] or series(trace, "val_loss") == [
        (200 * S, 1.7)
    ]
    assert series(trace, "v_num") == []
    src = trace.meta["sources"][0]
    assert src["info"]["progress"] == {
        "bars": 2,
        "updates": 4,
        "descriptions": ["Epoch 0", "Epoch 1"],
        "time": "elapsed",
    }
    units = dict(trace.series.select("name", "unit").iter_rows())
    assert (units["steps_per_s"], units["step_time"]) == ("steps/s", "s")


def test_a_slow_loop_in_seconds_per_step(tmp_path: Path) -> None:
    path = tmp_path / "slow.log"
    path.write_text("\r".join(f"{k * 6:3d}%|▋         | {k}/16 [0{k}:00<14:41, 60.00s/it]" for k in (1, 2)) + "\n")
    trace = di.load(path)
    assert series(trace, "step_time") == [(60 * S, 60.0), (120 * S, 60.0)]
    assert series(trace, "steps_per_s") == [(60 * S, pytest.approx(1 / 60)), (120 * S, pytest.approx(1 / 60))]


def test_a_bar_starts_at_the_time_the_log_printed_before_it(tmp_path: Path) -> None:
    path = tmp_path / "hf.log"
    path.write_text(
        "[INFO|trainer.py:1143] 2021-05-25 06:38:26,360 >> ***** Running training *****\n"
        + "\r".join(f"{k * 6:3d}%|▋         | {k}/16 [00:{k * 10}<02:00, 0.10it/s]" for k in (1, 2))
        + "\n"
    )
    trace = di.load(path)
    t0 = 1_621_924_706_360_000_000  # 2021-05-25 06:38:26.360 UTC
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    assert [t for t, _ in series(trace, "step")] == [t0 + 10 * S, t0 + 20 * S]


def test_a_cut_bar_is_counted_and_other_text_naming_a_rate_is_not(tmp_path: Path) -> None:
    reason = "progress: segments naming a rate that are no whole bar"
    for tail in (
        "\rEpoch 1:  60%|██████    | 600/1000 [02:0",
        "\rEpoch 1:  60%|██████    | 600/1000 [02:00<01:20, 4.0",
    ):
        assert di.load(lightning(tmp_path, tail=tail)).meta["sources"][0]["dropped"][reason] == 1
    trace = di.load(lightning(tmp_path, tail="\nvalidation throughput 5.2 it/s"))
    assert reason not in trace.meta["sources"][0]["dropped"]  # no bar: an unknown line like any other


def test_a_real_hf_trainer_log_keeps_its_clock() -> None:
    path = DATA / "logs" / "training" / "hf_trainer_deepspeed0.3.17_gpt2_4node_2021.out"
    if not path.is_file():
        pytest.skip("shared test data absent")
    trace = di.load(path)
    assert trace.meta["clock"]["domain"] == "unix_epoch"  # its bars are placed on the trainer's timestamps
    times = [t for t, _ in series(trace, "step")]
    t0 = 1_621_924_706_360_000_000  # "Running training" at 06:38:26,360
    assert min(times) == t0 and max(times) == t0 + (15 * 60 + 19) * S  # [15:19<00:00] at the end

"""Slurm tables: sacct -P, squeue with \\x1f separators, sacct's fixed-width default."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


def test_sacct_parsable_with_times_gives_job_steps_and_failures(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobID|JobName|State|Start|End|NodeList\n"
        "42|train|FAILED|2025-01-02T03:00:00|2025-01-02T04:00:00|n[01-02]\n"
        "42.0|python|CANCELLED by 7|2025-01-02T03:00:05|2025-01-02T04:00:00|n[01-02]\n"
        "43|next|PENDING|Unknown|Unknown|None assigned\n"
    )
    trace = di.load(path)
    trace.validate()
    jobs = trace.jobs.to_dicts()
    assert [j["jobid"] for j in jobs] == ["42", "42.0", "43"] and jobs[0]["nodelist"] == "n[01-02]"
    assert trace.meta["sources"][0]["info"]["slurm"] == {"rows": 3, "truncated": 0}
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    assert steps.get_column("name").to_list() == ["slurm 42", "slurm 42.0"]
    assert steps.row(0, named=True)["end_ns"] - steps.row(0, named=True)["start_ns"] == 3600 * 10**9
    assert sorted(trace.events.filter(pl.col("instant")).get_column("name").to_list()) == [
        "slurm CANCELLED",
        "slurm FAILED",
    ]


def test_real_slurm_tables() -> None:
    parsable = di.load(need("slurm/sacct_parsable_P_psc_bridges_2018.txt"))
    p = parsable.meta["sources"][0]
    assert parsable.jobs.height == p["info"]["slurm"]["rows"] == 269 and p["dropped"] == {}
    assert parsable.jobs.columns == ["jobid", "jobname", "partition", "account", "alloccpus", "state", "exitcode"]
    fixed = di.load(need("slurm/sacct_default_fixedwidth_psc_bridges_2018_first1500lines.txt"))
    assert (
        fixed.jobs.get_column("jobid")[1] == "1933171.ext+"
        and fixed.meta["sources"][0]["info"]["slurm"]["truncated"] > 0
    )
    sq = di.load(need("slurm/squeue_unit_separator_non_utf8_job_name.txt"))
    src = sq.meta["sources"][0]
    assert src["info"]["garbled_lines"] == {"lines with bytes that are not UTF-8": 1}
    assert sq.jobs.get_column("jobid").to_list() == ["123"] and sq.events.height == 1
    # squeue prints JOBID twice (the second a job array's id) and ends its header with a separator
    assert sq.jobs.row(0, named=True)["jobid_2"] == "29471683_9" and "unnamed" in sq.jobs.columns


SCONTROL = """\
JobId=71701 JobName=train-gpt
   UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A
   Priority=4294901757 Nice=0 Account=proj QOS=normal
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=1:0
   RunTime=00:10:00 TimeLimit=01:00:00 TimeMin=N/A
   SubmitTime=2024-05-23T02:00:00 EligibleTime=2024-05-23T02:00:00
   StartTime=2024-05-23T02:05:00 EndTime=2024-05-23T02:15:00 Deadline=N/A
   Partition=gpu AllocNode:Sid=login1:1234
   NodeList=gpu[01-02] BatchHost=gpu01
   NumNodes=2 NumCPUs=16 NumTasks=16 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=16,mem=64G,node=2,billing=16,gres/gpu=16
   Command=/home/alice/train.sh
   WorkDir=/home/alice

JobId=71702 JobName=eval
   JobState=RUNNING Reason=None Dependency=(null)
   StartTime=2024-05-23T02:16:00 EndTime=Unknown Deadline=N/A
   NodeList=gpu03
   NumNodes=1 NumCPUs=8 NumTasks=8
"""


def test_scontrol_show_job_records_read_like_sacct_rows(tmp_path: Path) -> None:
    path = tmp_path / "job.txt"
    path.write_text(SCONTROL)
    trace = di.load(path)
    trace.validate()
    src = trace.meta["sources"][0]
    assert src["format"] == "log:slurm" and src["dropped"] == {}  # every line of both records understood
    jobs = {j["jobid"]: j for j in trace.jobs.to_dicts()}
    assert set(jobs) == {"71701", "71702"}
    done = jobs["71701"]
    assert (done["state"], done["nodelist"], done["nnodes"], done["exitcode"]) == ("FAILED", "gpu[01-02]", "2", "1:0")
    assert done["tres"] == "cpu=16,mem=64G,node=2,billing=16,gres/gpu=16"  # a value holding '=' is kept whole
    assert jobs["71702"]["end"] is None  # EndTime=Unknown: still running
    ev = trace.events.sort("start_ns", "instant")
    assert ev.select(pl.col("name").cast(pl.String), "instant").rows() == [
        ("slurm 71701", False),
        ("slurm FAILED", True),
    ]
    step = ev.row(0, named=True)
    assert step["end_ns"] - step["start_ns"] == 600 * 10**9  # 02:05 to 02:15


def test_jobs_table_is_the_parsed_rows_and_goes_through_every_writer(tmp_path: Path) -> None:
    """The ``jobs`` table holds the parsed rows as they are (the fixed-width table's 1,498 rows, 7 states), and a
    store, OTF2, Perfetto and Chrome JSON give it back whole; two logs merged keep both tables' columns."""
    from di.convert.logs.slurm import parse_slurm
    from di.convert.logs.text import read_lines

    fixed = need("slurm/sacct_default_fixedwidth_psc_bridges_2018_first1500lines.txt")
    parsed = parse_slurm(read_lines(fixed).lines).tables["jobs"]
    trace = di.load(fixed)
    trace.validate()
    assert trace.jobs.equals(parsed) and trace.jobs.height == 1498
    assert trace.jobs.get_column("state").n_unique() == 7
    from di.viewers.info import summary

    states = summary(trace)["job_states"]  # di info's line of them
    assert sum(states.values()) == 1498 and states["FAILED"] == 7 and list(states)[0] == "COMPLETED"
    for name in ("jobs.di", "jobs.otf2", "jobs.pftrace", "jobs.json"):
        di.save(trace, tmp_path / name)
        back = di.load(tmp_path / name).jobs
        assert back.equals(trace.jobs), name
    squeue = need("slurm/squeue_unit_separator_null_submit_time.txt")
    both = di.load([fixed, squeue]).jobs
    assert both.height == 1498 + 3 and set(both.columns) == set(trace.jobs.columns) | set(di.load(squeue).jobs.columns)


def test_header_fields_named_like_polars_selectors_or_the_line_column(tmp_path: Path) -> None:
    """Found by fuzzing: a header field ``*`` selected every column (a polars wildcard) and stopped the load with a
    ComputeError; a field named ``line`` clashed with the table's own line column."""
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|*|Line|State\n7|a| b |COMPLETED\n8|c|d|FAILED\n")
    trace = di.load(path)
    trace.validate()
    jobs = trace.jobs.to_dicts()
    assert [(j["jobid"], j["*"], j["line_2"], j["state"]) for j in jobs] == [
        ("7", "a", "b", "COMPLETED"),
        ("8", "c", "d", "FAILED"),
    ]


def test_tables_after_rules_of_every_width_and_truncated_fields_counted(tmp_path: Path) -> None:
    """Fixed-width tables are found under rules of a one-dash column and rules followed by blanks (a rule is found by
    its '- -'), next to a '|' table; every field ending with '+' is counted once, whichever table holds it."""
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobID|JobName|State\n"
        "7|a+|COMPLETED\n"
        "7.0|b|FAILED+\n"
        "JobID S\n"
        "----- -  \n"
        "8     +\n"
        "       JobID    JobName      State\n"
        "------------ ---------- ----------\n"
        "9            verylongn+  COMPLETED\n"
        "9.ext+           extern  COMPLETED\n"
    )
    trace = di.load(path)
    src = trace.meta["sources"][0]
    jobs = trace.jobs.to_dicts()
    assert [j["jobid"] for j in jobs] == ["7", "7.0", "8", "9", "9.ext+"]
    assert jobs[2]["s"] == "+" and jobs[3]["jobname"] == "verylongn+"
    plus = sum(v.endswith("+") for j in jobs for v in j.values() if v is not None)
    assert src["info"]["slurm"]["truncated"] == plus == 5


def test_delimited_rows_are_those_with_the_headers_field_count(tmp_path: Path) -> None:
    """Rows split once per distinct rest (after the job id) are those a split of each whole row gives: as many
    fields as the header, each stripped; rows with fewer or more are not rows of the table (random rows, many
    rests repeated)."""
    import random

    rng = random.Random(21)
    names = ["JobID", "JobName", "State", "ExitCode"]
    words = ["a", " b ", "", "COMPLETED", "FAILED ", " 0:0", "x y"]
    lines = ["|".join(names)]
    for i in range(400):
        fields = [f"{i}{rng.choice(['', '.0', '.batch'])}"] + [
            rng.choice(words) for _ in range(rng.choice([2, 3, 3, 3, 4]))
        ]
        lines.append("|".join(fields))
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(lines) + "\n")
    want = [
        dict(zip([n.lower() for n in names], [f.strip() for f in ln.split("|")]))
        for ln in lines[1:]
        if ln.count("|") == len(names) - 1
    ]
    got = di.load(path).jobs.to_dicts()
    assert got == want and 0 < len(want) < 400


def test_fixed_width_rows_by_first_character_are_the_regex() -> None:
    """A fixed-width table's rows (``^\\s*\\d``) picked by their first character, the regex only where it is a blank
    or not ASCII, are those the regex picks."""
    from di.convert.logs.slurm import _numbered

    texts = ["1 a", "  12 b", "\t3", "x1", "", " ", "-- --", "\u00a04 nbsp", "\u0665 digit", "\u00e9 1", "9", ":", "/"]
    rows = pl.DataFrame({"line": list(range(len(texts))), "text": texts})
    want = rows.filter(pl.col("text").str.contains(r"^\s*\d"))
    assert _numbered(rows).equals(want) and want.height == 6

"""The tables normalised by a person (``reports.human_baseline``), on hand-made records."""

from __future__ import annotations

import math

import pytest
from scoring.records import record, step

from pytest_fmlbench.reports.human_baseline import (
    SHELL_SHOWN_CHARS, active_seconds, against_human, human_items, shell_session,
)
from pytest_fmlbench.reports.text import print_whole
from pytest_fmlbench.reports.tables import _console, summary_items
from pytest_fmlbench.scoring.aggregate import Scores


def scores(*records) -> Scores:
    return Scores.from_runs([(r, []) for r in records], encoder=None)


def ran(agent: str, task: str, test: float, seed: int = 0):
    # baseline test 0.6, D = 1: NI = test - 0.6
    return record(agent=agent, task=task, seed=seed, run_id=f"{agent}-{task}-{seed}", test_metric=test)


def test_each_agent_is_set_against_the_person_on_the_same_task_only():
    frame = against_human(scores(ran("human", "t1", 0.8), ran("human", "t1", 0.7, seed=1), ran("aide", "t1", 0.65),
                                 ran("aide", "t2", 0.9), ran("random-search", "t1", 0.9),
                                 ran("human", "t3", 0.5), ran("aide", "t3", 0.7)))
    rows = {(r.task, r.agent_group.split()[0]): r for r in frame.itertuples()}
    # t2 has no human run: not in the table; the person's NI is the mean over their seeds
    assert set(rows) == {("t1", "aide"), ("t1", "random-search"), ("t3", "aide")}
    assert rows["t1", "aide"].human_ni == pytest.approx((0.2 + 0.1) / 2) and rows["t1", "aide"].human_seeds == 2
    assert rows["t1", "aide"].share_of_human == pytest.approx(0.05 / 0.15)
    assert rows["t1", "random-search"].share_of_human == pytest.approx(0.3 / 0.15)
    # the person did not beat the baseline on t3 (NI clamped at 0): no share, the difference still shown
    assert math.isnan(rows["t3", "aide"].share_of_human) and rows["t3", "aide"].ni_minus_human == pytest.approx(0.1)


def test_the_summary_items_show_the_table_only_where_a_person_ran():
    assert human_items(scores(ran("aide", "t1", 0.7))) == []
    items = human_items(scores(ran("human", "t1", 0.8), ran("aide", "t1", 0.9), ran("aide", "t3", 0.9)))
    console, buffer = _console(200)
    for item in items:
        print_whole(console, item)
    text = buffer.getvalue()
    assert "Against the human baseline" in text and "1.50" in text
    assert "reached the person's NI on 1 of 1 task(s)" in text
    # the session's summary (terminal and HTML) shows it after the agents' tables
    shown = summary_items(scores(ran("human", "t1", 0.8), ran("aide", "t1", 0.9), ran("aide", "t3", 0.9)))
    console, buffer = _console(200)
    for item in shown:
        print_whole(console, item)
    assert "Against the human baseline" in buffer.getvalue()


def test_a_human_step_reads_as_the_persons_terminal_and_another_agents_as_nothing():
    extra = {"transcript": [{"type": "start", "tool": "human", "prompt": "p"},
                            {"type": "output", "text": "[fmlbench workspace]$ ls\nconfig.json\n"},
                            {"type": "command", "command": "ls", "exit_code": 0},
                            {"type": "activity", "active_s": 12.4, "session_s": 30.0, "rule": "r"}],
             "transcript_end": [{"type": "output", "text": "[fmlbench workspace]$ fmlbench-submit\n"},
                                {"type": "activity", "active_s": 20.0, "session_s": 40.0, "rule": "r"}]}
    assert shell_session(extra) == ("[fmlbench workspace]$ ls\nconfig.json\n[fmlbench workspace]$ fmlbench-submit\n"
                                    "\n[active time so far: 20 s]")
    assert shell_session({"transcript": [{"type": "output", "text": "a coding tool's"}]}) == ""
    long = {"transcript": [{"type": "start", "tool": "human"}, {"type": "output", "text": "x" * 50_000}]}
    assert shell_session(long) == "[...]\n" + "x" * SHELL_SHOWN_CHARS


def test_active_time_adds_up_the_sessions_of_a_resumed_run():
    def with_events(n, *events, end=()):
        s = step(n, 0.7)
        s.extra = {"transcript": list(events), **({"transcript_end": list(end)} if end else {})}
        return s

    start, activity = {"type": "start", "tool": "human"}, (lambda s: {"type": "activity", "active_s": s})
    # the first session: 30 s by its second step; the resumed one: 12 s, then 20 s after its last step
    steps = [with_events(1, start, activity(10)), with_events(2, activity(30)),
             with_events(3, start, activity(12), end=[activity(20)])]
    assert active_seconds(steps) == 50
    assert active_seconds([with_events(1, {"type": "output", "text": "a coding tool's"})]) is None

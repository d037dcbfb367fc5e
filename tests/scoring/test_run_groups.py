"""Runs are grouped by what they are (only seeds are averaged), and smoke is never a result.

Run folders are written as the runner leaves them (records on disk), then read by ``fmlbench score``, the
CSVs, ``session.json``, AUP and the JUnit properties."""

import json
import re
from types import SimpleNamespace

import pandas as pd
import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.collect import TaskItem
from pytest_fmlbench.reports.runs import find_run_dirs, load_runs
from pytest_fmlbench.scoring.aggregate import Scores
from pytest_fmlbench.scoring.aup import aup_table
from pytest_fmlbench.scoring.groups import SMOKE_NOTE, options_text
from pytest_fmlbench.scoring.runs import group_title

from .records import record, write_run

ONE_STEP = [(0.6, {"config.json": '{"lr": 0.2}'})]


def score(folder, tmp_path, capsys):
    csv = tmp_path / "csv"
    assert main(["score", str(folder), "--encoder", "none", "--csv-dir", str(csv), "--width", "200"]) == 0
    return capsys.readouterr().out, csv, json.loads((csv / "session.json").read_text())


def test_two_option_variants_at_one_seed_are_two_groups_never_a_mean(tmp_path, capsys):
    # a user's agent (its defaults unknown here): the same seed, two --agent-opt variants, in one folder
    root = tmp_path / "runs"
    write_run(root / "a", ONE_STEP, agent="fair-tweak", agent_options={"lr": 0.05}, test_metric=0.7)
    write_run(root / "b", ONE_STEP, agent="fair-tweak", agent_options={"lr": 0.1}, test_metric=0.9)
    out, csv, session = score(root, tmp_path, capsys)

    assert [t["title"] for t in session["tables"]] == ["fair-tweak / - / steps 4 / opts lr=0.05",
                                                       "fair-tweak / - / steps 4 / opts lr=0.1"]
    assert [t["raw_performance"][0]["seeds"] for t in session["tables"]] == [1, 1]
    assert [t["normalized_improvement"][0]["ni"] for t in session["tables"]] == pytest.approx([0.1, 0.3])
    assert "fair-tweak / opts lr=0.05" in out and "fair-tweak / opts lr=0.1" in out
    assert "0.2 ± " not in out  # the mean of 0.1 and 0.3 over "seeds" is nowhere
    ni = pd.read_csv(csv / "comparison_normalized_improvement.csv", index_col=0)
    assert ni.loc["t"].tolist() == pytest.approx([0.1, 0.3])
    assert set(aup_table(Scores.from_runs(load_runs(find_run_dirs(root)), encoder=None)).index) == {
        "fair-tweak / opts lr=0.05", "fair-tweak / opts lr=0.1", "declared baseline"}


def test_two_step_budgets_are_two_groups_and_a_builtins_defaults_say_so(tmp_path, capsys):
    root = tmp_path / "runs"
    for steps, test in ((2, 0.65), (3, 0.75)):
        for seed in (0, 1):
            write_run(root / f"steps{steps}", ONE_STEP, agent="random-search", steps_budget=steps, seed=seed,
                      agent_options={"include_baseline": True}, test_metric=test)
    out, csv, session = score(root, tmp_path, capsys)

    tables = {t["title"]: t for t in session["tables"]}
    assert set(tables) == {"random-search / - / steps 2 / default options",
                           "random-search / - / steps 3 / default options"}
    assert [t["normalized_improvement"][0]["seeds"] for t in tables.values()] == [2, 2]
    assert {t["solver"] for t in tables.values()} == {"random-search / steps 2", "random-search / steps 3"}
    assert "Run groups" in out and "random-search / - / steps 3 / default options" in out
    assert (csv / "random-search__-__steps_2" / "runs.csv").is_file()


def test_one_group_keeps_its_name_and_numbers_and_its_title_shows_steps_and_options(tmp_path, capsys):
    root = tmp_path / "runs"
    for seed in (0, 1):
        write_run(root, ONE_STEP, agent="random-search", seed=seed, agent_options={"include_baseline": False},
                  test_metric=0.7 + 0.1 * seed)
    out, csv, session = score(root, tmp_path, capsys)
    assert "Raw Performance — random-search / - / steps 4 / opts include_baseline=false" in " ".join(out.split())
    assert "0.15 ± 0.05" in out
    (table,) = session["tables"]
    assert table["solver"] == "random-search" and table["agent_options"] == {"include_baseline": False}
    assert (csv / "random-search__-" / "runs.csv").is_file()


def test_runs_of_two_versions_of_a_task_are_rows_of_their_own(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(root / "old", ONE_STEP, task_version=1, task_fingerprint="aaaaaaaa11", test_metric=0.7)
    write_run(root / "new", ONE_STEP, task_version=2, task_fingerprint="bbbbbbbb22", test_metric=0.9)
    _, _, session = score(root, tmp_path, capsys)
    rows = session["tables"][0]["normalized_improvement"]
    assert [(r["task"], r["seeds"]) for r in rows] == [("t (v1 aaaaaaaa)", 1), ("t (v2 bbbbbbbb)", 1)]


def test_smoke_runs_get_no_ni_nor_aup_and_say_smoke_everywhere(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(root / "smoke", ONE_STEP, agent="baseline", scale="smoke", test_metric=0.9)
    write_run(root / "full", ONE_STEP, agent="baseline", scale="full", test_metric=0.7)
    out, csv, session = score(root, tmp_path, capsys)

    smoke, full = sorted(session["tables"], key=lambda t: not t["smoke"])
    assert smoke["title"].endswith("/ smoke") and smoke["smoke_note"] == SMOKE_NOTE
    assert smoke["normalized_improvement"][0]["ni"] is None and smoke["normalized_improvement_mean"]["ni"] is None
    assert SMOKE_NOTE in smoke["normalized_improvement"][0]["note"]
    assert full["normalized_improvement"][0]["ni"] == pytest.approx(0.1) and not full["smoke"]
    aup = {row["solver"]: row for row in session["aup"]}
    assert aup[smoke["solver"]]["aup_final"] is None and aup[full["solver"]]["aup_final"] is not None
    assert "smoke" in out and SMOKE_NOTE in out
    ni = pd.read_csv(csv / "comparison_normalized_improvement.csv", index_col=0)
    assert ni.loc["t", smoke["solver"]] != ni.loc["t", smoke["solver"]]  # empty (NaN), not 0.3
    runs = pd.read_csv(csv / "runs.csv")
    assert sorted(runs["scale"].fillna("")) == ["", "smoke"]


def test_a_lone_smoke_run_prints_dashes_not_a_normalized_improvement(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(root, ONE_STEP, agent="baseline", scale="smoke", test_metric=0.9)
    out, _, _ = score(root, tmp_path, capsys)
    assert "Raw Performance — baseline / - / steps 4 / default options / smoke" in out
    norm = out[out.index("Normalized Improvement"):out.index("Process-Level")]
    assert "0.3" not in norm and re.search(r"│ t\s+│\s+-\s+│\s+-\s+│", norm)
    assert f"AUP: none ({SMOKE_NOTE})" in out


def test_junit_properties_of_a_smoke_run_name_its_scale_and_leave_ni_empty(tmp_path):
    item = SimpleNamespace(user_properties=[])
    TaskItem._record_properties(item, record(scale="smoke", test_metric=0.9), tmp_path, False)
    properties = dict(item.user_properties)
    assert properties["scale"] == "smoke" and properties["normalized_improvement"] == ""
    assert properties["note"] == SMOKE_NOTE
    TaskItem._record_properties(item, record(test_metric=0.9), tmp_path, False)
    assert dict(item.user_properties)["normalized_improvement"] == pytest.approx(0.3)


def test_a_groups_title_is_short_stable_and_readable_from_a_record():
    assert group_title(record(agent="random-search", agent_options={"include_baseline": True})) == \
        "random-search / - / steps 4 / default options"
    assert group_title(record(model="m", provider="p", sandbox="unsandboxed", agent_process="in process",
                              agent_options={"x": "y" * 200})).startswith("a / m / via p / steps 4 / opts x=yyy")
    long = options_text("a", json.dumps({"x": "y" * 200}))
    assert len(long) <= 60 and long != options_text("a", json.dumps({"x": "y" * 199}))


def test_the_report_commands_line_names_its_groups_and_smoke_runs(tmp_path):
    from pytest_fmlbench.cli.report import groups_line

    root = tmp_path / "runs"
    write_run(root / "smoke", ONE_STEP, agent="baseline", scale="smoke")
    write_run(root / "full", ONE_STEP, agent="baseline", steps_budget=3)
    scores = Scores.from_runs(load_runs(find_run_dirs(root)), encoder=None)
    assert groups_line(scores) == f" in 2 group(s), each its own column; 1 smoke run(s): {SMOKE_NOTE}"

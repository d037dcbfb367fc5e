"""A task whose baseline is unmeasured: its raw values stand, its NI is unavailable (never computed against
another value), AUP leaves it out, and the tables say why; a full task's row shows the paper's value beside."""

import math

from pytest_fmlbench.cli import main
from pytest_fmlbench.scoring import Scores, ni_test, ni_val, run_note
from pytest_fmlbench.scoring.aup import BASELINE, aup_table
from pytest_fmlbench.scoring.groups import UNMEASURED_NOTE

from .records import record, write_run

UNMEASURED = dict(baseline_val=None, baseline_test=None)


def test_an_unmeasured_baseline_gives_no_ni_and_says_so():
    run = record(test_metric=0.7, **UNMEASURED)
    assert math.isnan(ni_test(run)) and math.isnan(ni_val(run))
    assert UNMEASURED_NOTE in run_note(run)
    # a measured one is scored as ever, and says nothing of it
    assert ni_test(record(test_metric=0.7)) > 0 and UNMEASURED_NOTE not in run_note(record(test_metric=0.7))


def test_aup_leaves_a_task_with_an_unmeasured_baseline_out():
    measured = [(record(agent="A", task="t1", test_metric=0.8), []), (record(agent="B", task="t1", test_metric=0.7), [])]
    unmeasured = [(record(agent="A", task="t2", test_metric=0.1, **UNMEASURED), []),
                  (record(agent="B", task="t2", test_metric=0.9, **UNMEASURED), [])]
    alone = aup_table(Scores.from_runs(measured, encoder=None))
    both = aup_table(Scores.from_runs(measured + unmeasured, encoder=None))
    assert (both["tasks"] == 1).all()
    for solver in ("A", "B", BASELINE):
        assert both.loc[solver, "aup_final"] == alone.loc[solver, "aup_final"]


def test_the_tables_show_no_baseline_no_ni_and_the_papers_value_beside(tmp_path, capsys):
    root = tmp_path / "runs"
    # an unmeasured full task, and a full task whose values are the paper's (Privacy_opacus: test 0.9287...)
    write_run(root, [(0.6, {"config.json": "{}"})], task="generalization_domainbed_officehome_full",
              test_metric=0.55, **UNMEASURED)
    write_run(root, [(0.6, {"config.json": "{}"})], task="privacy_opacus_full", test_metric=0.95)
    assert main(["score", str(root), "--encoder", "none"]) == 0
    out = capsys.readouterr().out
    assert "Paper baseline" in out
    (row,) = [line for line in out.splitlines() if line.startswith("│ generalization_domainbed_officehome_full")
              and "0.55" in line]
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    # baseline n/a, the paper's 0.8629 beside it, the agent's raw value, and why there is no NI
    assert cells[3:6] == ["n/a", "0.8629", "0.55"], cells
    assert "baseline unmeasured" in out


def test_the_html_report_draws_an_unmeasured_baseline_as_such(tmp_path):
    root = tmp_path / "runs"
    write_run(root, [(0.6, {"config.json": "{}"}), (0.65, {"config.json": "{}"})],
              task="generalization_domainbed_officehome_full", test_metric=0.55, **UNMEASURED)
    assert main(["report", str(root), "--html", str(tmp_path / "report.html"), "--encoder", "none"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "baseline unmeasured" in page and "0.8629" in page

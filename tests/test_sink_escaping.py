"""Every sink escapes: an agent's words (its name, model, end and stop reasons, plans, actions, an audit's
finding quoting it) reach the terminal's tables, the live progress lines, the CSV files, their folder
names, the HTML page and the JUnit XML as text, never as rich markup, terminal control, a spreadsheet
formula, a path or an element.

Unit level: records are built in memory (tests/scoring/records.py) as an older version or a hand edit could
have left them, past the protocol's own checks, and run through each sink.
"""

import csv
import io
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from rich.live import Live

from pytest_fmlbench.audit.records import Finding, RunAudit
from pytest_fmlbench.compare import compare
from pytest_fmlbench.compare.sides import COLUMNS, Side
from pytest_fmlbench.compare.table import regression_line, render as render_comparison, write_csv
from pytest_fmlbench.progress import LiveDisplay, LiveFile
from pytest_fmlbench.reports.csv_files import write_csvs
from pytest_fmlbench.reports.html import write_html
from pytest_fmlbench.reports.tables import render
from pytest_fmlbench.safe_text import csv_cell, file_name, one_line, printable
from pytest_fmlbench.scoring.aggregate import Scores
from pytest_fmlbench.terminal_lines import write_whole_line

from scoring.records import record, step

MARKUP = "[/] [bold red]x [link=file:///etc/passwd]click[/link] :warning:"
TERMINAL = "\x1b[2J\x1b]0;title\x07\rback\x00nul\ud800surrogate\u202eevil"
FORMULA = '=HYPERLINK("http://evil.example","x")'
HTML = "</script><script>alert(1)</script><img src=x onerror=alert(1)>]]>"
HOSTILE = MARKUP + TERMINAL + HTML
# what a terminal must never receive from an agent: an escape sequence, a carriage return, BEL, NUL
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff\u202e]")
# each of these as a whole name (a CSV cell must not start a formula)
NAMES = [MARKUP, TERMINAL, FORMULA, "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", HTML, "x" * 10_000]


def hostile_runs(tmp_path, names=NAMES):
    """One finished run per hostile name: the name is the agent's, and its reasons, plan and action are
    hostile too; one step each, no snapshots (the reports read none)."""
    runs = []
    for seed, name in enumerate(names):
        run_step = step(1, 0.55)
        run_step.plan = run_step.idea = run_step.analysis = run_step.action = HOSTILE
        audit = RunAudit(signals=[Finding(source="signal", kind="literal_array", reason=f"quotes {HOSTILE}",
                                          excerpt=HOSTILE)])
        rec = record(agent=name, model=FORMULA if seed % 2 else HOSTILE, seed=seed, end_reason=HOSTILE,
                     stop_reason=HOSTILE, error=HOSTILE, test_metric=0.6 - 0.1 * seed, audit=audit)
        runs.append((rec, [run_step], tmp_path))
    return runs


def scores_of(runs):
    return Scores.from_runs(runs, encoder=None)


# -- the terminal ------------------------------------------------------------------------------------

def test_tables_show_markup_and_control_characters_as_text(tmp_path):
    """Failed before: rich read "[/]" in an agent's name as markup and raised MarkupError (the whole session's
    summary died); escape sequences reached the rendered tables."""
    out = render(scores_of(hostile_runs(tmp_path)), width=160)
    assert "[/] [bold red]x [link=file:///etc/passwd]click[/link] :warning:" in out
    assert not CONTROL.search(out), CONTROL.search(out)
    assert r"\x1b[2J\x1b]0;title\x07\rback\x00nul\ud800surrogate\u202eevil" in out
    assert "Suspect runs" in out and "quotes [/]" in out
    # a 10,000-character name is cut, with a mark saying so
    assert "x" * 400 + " [...]" in out and "x" * 401 not in out


def test_one_agent_tables_show_its_name_literally(tmp_path):
    """Failed before: the one-agent tables' titles carry the agent's name through rich markup."""
    out = render(scores_of(hostile_runs(tmp_path, [MARKUP])), width=160)
    assert f"Raw Performance — {MARKUP} / " in out
    assert not CONTROL.search(out)


def test_comparison_table_and_regression_lines_show_names_literally(tmp_path):
    """Failed before: the comparison's rows and its "only in" line read agents' names as markup."""
    rows = scores_of(hostile_runs(tmp_path, [MARKUP, TERMINAL, FORMULA])).runs
    old = Side.from_rows("old", rows[list(COLUMNS)].to_dict(orient="records"))
    new = Side.from_rows("new", rows[list(COLUMNS)].iloc[:2].assign(ni=-1.0).to_dict(orient="records"))
    comparison = compare(old, new)
    out = render_comparison(comparison, width=2000, threshold=0.1)
    assert MARKUP in out and "only in OLD" in out and not CONTROL.search(out)
    lines = [regression_line(t) for t in comparison.regressions(0.1)]
    assert lines and not any(CONTROL.search(line) for line in lines)
    written = write_csv(comparison, tmp_path / "comparison.csv")
    solvers = [row["solver"] for row in csv.DictReader(written.open(encoding="utf-8"))]
    assert not any(s.startswith(("=", "+", "-", "@")) for s in solvers), solvers
    # numbers, negative ones included, are still numbers
    assert pd.read_csv(written)["ni_new"].dropna().tolist() == [-1.0, -1.0]


def test_live_progress_lines_and_table_spell_out_control_characters(tmp_path):
    """Failed before: an action's escape sequences and carriage return reached the progress lines, the live
    table and the notices above it."""
    live = LiveFile(tmp_path, "run0", "toy[seed0]", 2, 0.5, "higher", 1.0)
    live.update(step=1, done=1, best_val=0.5, action=HOSTILE,
                last={"success": True, "metric": 0.5, "action": HOSTILE})
    written: list[str] = []
    LiveDisplay(tmp_path, written.append, tty=False).pump()
    assert len(written) == 1 and not CONTROL.search(written[0]), written
    assert MARKUP in written[0]

    # a terminal: the live table (rich's Live), and a notice above it
    live.update(notice=f"listening: {HOSTILE}", finished=False)
    display = LiveDisplay(tmp_path, written.append, tty=True)
    terminal = Console(file=io.StringIO(), width=1000, force_terminal=True)
    display.live = Live(display._table([]), console=terminal, auto_refresh=False, transient=True)
    display.live.start()
    display.pump()
    display.live.stop()
    shown = terminal.file.getvalue()
    assert MARKUP in shown and f"listening: {MARKUP}" in shown
    # rich's own styling is there, the agent's sequences are not
    assert "\x1b[2J" not in shown and "\x1b]0;" not in shown and "\rback" not in shown and "\ud800" not in shown
    assert r"\x1b[2J\x1b]0;title\x07\rback" in shown


def test_every_line_written_whole_is_spelt_out():
    """Failed before: write_whole_line wrote what it was given, escape sequences included."""
    class Writer:
        width_of_current_line = 0

    class Reporter:
        def __init__(self):
            self._tw, self.lines = Writer(), []

        def ensure_newline(self):
            pass

        def write_line(self, line, **markup):
            self.lines.append(line)

        def flush(self):
            pass

    reporter = Reporter()
    write_whole_line(reporter, f"[fmlbench] {HOSTILE}")
    assert reporter.lines == [f"[fmlbench] {printable(HOSTILE, None)}"] and not CONTROL.search(reporter.lines[0])


def test_safe_text_rules():
    assert one_line("first\x1b[31m\nsecond") == r"first\x1b[31m"
    assert printable("é 中文 ok") == "é 中文 ok"
    assert printable("a\nb", keep="\n") == "a\nb" and printable("a\nb") == r"a\nb"
    assert [csv_cell(v) for v in ("-0.5", "+3", "1e-3", -0.5, "=1+1", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "ok")] == \
        ["-0.5", "+3", "1e-3", -0.5, "'=1+1", "'+1+1", "'-2+3", "'@SUM(A1)", r"\t=1", "ok"]
    assert file_name("random-search__-") == "random-search__-" and file_name("a__gpt-4o:mini") == "a__gpt-4o:mini"
    assert file_name("..") != ".." and file_name("..").startswith("name-")
    assert file_name("a b") != file_name("a-b") and file_name("a b").startswith("a-b-")


# -- files -------------------------------------------------------------------------------------------

def test_csv_cells_never_start_a_formula_and_numbers_stay_numbers(tmp_path):
    """Failed before: a lone surrogate in a name stopped every CSV (UnicodeEncodeError), a NUL or a
    10,000-character name stopped the per-agent folder, and '=HYPERLINK(...)' reached cells as a formula."""
    runs = hostile_runs(tmp_path)
    written = write_csvs(scores_of(runs), tmp_path / "csv")
    assert {p.name for p in written} >= {"runs.csv", "aup.csv", "comparison_normalized_improvement.csv"}
    for path in written:
        # every file under the output folder, one folder deep at most, each name a plain short one
        relative = path.relative_to(tmp_path / "csv")
        assert len(relative.parts) <= 2 and all(len(part.encode()) <= 255 for part in relative.parts), relative
        assert not any(part.startswith(".") for part in relative.parts)
        text = path.read_text(encoding="utf-8")
        assert not CONTROL.search(text.replace("\r\n", "\n")), (path, CONTROL.search(text))
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")) and not re.match(r"-[^\d.]", cell), \
                    (path.name, cell[:80])
    per_seed = pd.read_csv(tmp_path / "csv" / "runs.csv")
    assert per_seed["agent"].tolist()[2:6] == ["'" + FORMULA, "'+1+1", "'-2+3", "'@SUM(A1)"]
    # numbers, negative ones included, are still numbers
    assert pd.api.types.is_float_dtype(per_seed["raw_test"]) and per_seed["raw_test"].min() == pytest.approx(-0.3)


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: Counter = Counter()

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1


def elements(path: Path) -> Counter:
    parser = Elements()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


def test_html_report_holds_hostile_runs_as_text(tmp_path):
    """Failed before: a lone surrogate in a run's text stopped the page (UnicodeEncodeError on writing)."""
    benign = [(rec.model_copy(update={"agent": f"agent{i}", "model": "m", "end_reason": "done", "stop_reason": "x",
                                      "error": "e", "audit": RunAudit(signals=[Finding(
                                          source="signal", kind="k", reason="r", excerpt="e")])}),
               [s.model_copy(update={"plan": "p", "idea": "i", "analysis": "a", "action": "improve"}) for s in steps],
               run_dir)
              for i, (rec, steps, run_dir) in enumerate(hostile_runs(tmp_path))]
    hostile = hostile_runs(tmp_path)
    page = write_html(hostile, tmp_path / "hostile.html", scores=scores_of(hostile))
    plain = write_html(benign, tmp_path / "benign.html", scores=scores_of(benign))
    # the same elements as the same runs with harmless words: nothing the agent wrote became one
    assert elements(page) == elements(plain)
    text = page.read_text(encoding="utf-8")
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in text
    assert "<script>alert(1)" not in text and "<img src=x" not in text


JUNIT_ITEM = '''
HOSTILE = {hostile!r}


def test_item(record_property):
    for name in ("agent", "model", "end_reason"):
        record_property(name, HOSTILE)
'''

# the plugin's own move of an item's properties to the suite (xunit2), on a plain test's report
MOVE_TO_SUITE = '''
import pytest
from pytest_fmlbench import junit


def pytest_configure(config):
    global CONFIG
    CONFIG = config


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    junit.move_to_suite(CONFIG, report)
'''


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_junit_xml_stays_valid_with_hostile_properties(pytester, family):
    """Passed before too: pytest's junitxml writes characters XML 1.0 forbids (NUL, ESC, lone surrogates) as
    '#xNN' and escapes the rest; this keeps it so for the properties the plugin moves to the suite."""
    import xml.etree.ElementTree as ET

    from _pytest.junitxml import bin_xml_escape

    from conftest import child_args

    pytester.makepyfile(test_hostile=JUNIT_ITEM.format(hostile=HOSTILE))
    pytester.makeconftest(MOVE_TO_SUITE)
    result = pytester.runpytest(*child_args("--junitxml=out.xml", "-o", f"junit_family={family}"))
    result.assert_outcomes(passed=1)
    root = ET.parse(pytester.path / "out.xml").getroot()
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    prefix = "" if family == "xunit1" else "test_item."
    assert properties == {f"{prefix}{name}": bin_xml_escape(HOSTILE) for name in ("agent", "model", "end_reason")}
    assert MARKUP in properties[f"{prefix}agent"] and HTML in properties[f"{prefix}agent"]
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]", properties[f"{prefix}agent"])

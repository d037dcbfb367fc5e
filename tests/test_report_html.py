"""The static HTML report: written by pytest (--fmlbench-html, under -n) and by ``fmlbench report``,
rendered by a real browser (headless Chromium), and safe against hostile text from runs."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import markupsafe
import pytest

from pytest_fmlbench.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# what an agent controls: its plans and ideas, its code, and so the errors its code raises
HOSTILE = """</pre></td><script>document.title="PWNED"</script><img src=x onerror="document.title='PWNED'">"""

HOSTILE_AGENT = f'''
import json
from pytest_fmlbench import Agent, WholeFile

HOSTILE = {HOSTILE!r}


class Hostile(Agent):
    name = "hostile"

    def run(self, session):
        session.run_step("draft", plan="the baseline, as is " + HOSTILE)
        crash = "raise RuntimeError(" + repr(HOSTILE) + ")\\n" + session.files["algorithm.py"]
        session.edit([WholeFile("algorithm.py", crash + "# " + HOSTILE + "\\n")])
        session.run_step("improve", plan=HOSTILE, idea="idea " + HOSTILE, parent=1)
        session.set_files(session.baseline_files)
        config = json.loads(session.files["config.json"])
        config["lr"], config["epochs"] = 0.5, 150
        session.edit([WholeFile("config.json", json.dumps(config))])
        session.run_step("improve", plan="a larger learning rate", parent=1)
'''


def second_task(pytester, toy):
    """A copy of the toy task under another id, so the report has two tasks."""
    other = pytester.path / "toy_task_b"
    shutil.copytree(toy, other)
    spec = other / "task.yaml"
    spec.write_text(spec.read_text().replace("id: toy_task", "id: toy_task_b"))
    return other


def rendered_dom(page: Path) -> str:
    """The page's DOM after its scripts ran, as headless Chromium serialises it."""
    done = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                           "--virtual-time-budget=15000", "--dump-dom", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def figure(dom: str, div_id: str) -> str:
    """The rendered markup of one plotly figure (its div up to the next figure or section)."""
    start = dom.index(f'id="{div_id}"')
    ends = [i for i in (dom.find('class="plotly-graph-div"', start + 1), dom.find("<section", start)) if i > 0]
    return dom[start:min(ends) if ends else len(dom)]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make browser installs it)")
def test_html_report_renders_every_task_and_escapes_hostile_runs(pytester, toy, bench, write_agent):
    second_task(pytester, toy)
    agent = write_agent(HOSTILE_AGENT, cls="Hostile")
    result = bench(f"--agent={agent}", "--steps=3", "-n", "2", "--fmlbench-html=out/session.html",
                   "toy_task", "toy_task_b")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"HTML report written to {pytester.path / 'out' / 'session.html'}"])
    bench("--agent=baseline", "toy_task", "toy_task_b").assert_outcomes(passed=2)

    # the README's command, over both agents' runs
    runs = pytester.path / "reports" / "fmlbench" / "runs"
    done = pytester.run(Path(sys.executable).parent / "fmlbench", "report", str(runs), "--html", "report.html")
    assert done.ret == 0, done.stderr.str()
    done.stdout.fnmatch_lines(["wrote report.html (4 run(s))"])

    for page, agents in ((pytester.path / "out" / "session.html", ["hostile"]),
                         (pytester.path / "report.html", ["baseline", "hostile"])):
        text = page.read_text()
        # self-contained: plotly.js inlined exactly once, nothing fetched
        import plotly.offline

        assert text.count(plotly.offline.get_plotlyjs()[:300]) == 1
        assert not re.search(r"<script[^>]+src=|<link\b|<iframe\b|@import", text)
        # hostile text is shown, escaped, never as markup
        assert HOSTILE not in text and "<img" not in text
        assert str(markupsafe.escape(HOSTILE)) in text
        # the three tables, with the terminal's cells
        for title in ("Raw Performance", "Normalized Improvement", "AUP (MLGym performance profiles)"):
            assert title in text, title
        # per step: action, plan, outcome, error tail, code diff against the parent
        assert "RuntimeError" in text and "code diff against step 1" in text and "failed" in text
        assert str(markupsafe.escape('"lr": 0.5')) in text

        dom = rendered_dom(page)
        assert "<title>FML-bench report</title>" in dom, "a script from a run's text ran"
        assert "<img" not in dom
        for index, task in enumerate(("toy_task", "toy_task_b")):
            curve = figure(dom, f"curve-{index}")
            assert 'class="main-svg"' in curve, f"{task}: the best-so-far plot did not render"
            # per agent: a best-so-far line and its valid steps; the hostile agent's failed step too
            assert curve.count('class="trace scatter') >= 2 * len(agents) + 1
            assert "failed step" in curve and "baseline 0.76" in curve
            for name in agents:
                assert f"{name} / - / seed 0: best so far" in curve
            usage = figure(dom, f"usage-{index}")
            assert 'class="main-svg"' in usage and 'class="trace bars"' in usage


def test_report_command_says_what_is_wrong_in_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere"), "--html", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert main(["report", str(tmp_path), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "no run records" in err and not (tmp_path / "r.html").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make browser installs it)")
def test_the_transcript_of_a_100_step_long_context_run_is_lazy_searchable_and_escaped(tmp_path, capsys):
    from long_run import HOSTILE as CALL_HOSTILE, NEEDLE_STEP, naive_size, needle, write_long_run

    run_dir = write_long_run(tmp_path)
    page = tmp_path / "long.html"
    assert main(["report", str(tmp_path / "runs"), "--html", str(page), "--encoder", "none"]) == 0
    import plotly.offline

    text = page.read_text()
    size, plotly_js = len(text.encode()), len(plotly.offline.get_plotlyjs().encode())
    transcript = len(text[text.index('id="fmlbench-transcripts">'):].split("</script>")[0].encode())
    naive = naive_size(run_dir)
    # measured, not timed: written out call by call, the calls' messages alone weigh tens of megabytes
    print(f"\n100-step long-context run: page {size / 1e6:.2f} MB, of which plotly.js {plotly_js / 1e6:.2f} MB and "
          f"the transcript {transcript / 1e6:.2f} MB; its calls written out one by one: {naive / 1e6:.1f} MB")
    assert naive > 30e6 and transcript < naive / 20 and size - plotly_js < 2e6
    assert CALL_HOSTILE not in text and "<img" not in text

    # nothing of the transcript is built until asked for
    dom = rendered_dom(page)
    assert dom.count('<details class="calls"') == 100 and 'class="msg"' not in dom
    assert "<title>FML-bench report</title>" in dom and "<img" not in dom

    # a search link lists the matching call and opens it, built as text
    dom = rendered_dom_at(page, f"search={needle(NEEDLE_STEP)}")
    # found in its reply, and in every later call, which sends the conversation again
    assert f"{1 + 2 * (100 - NEEDLE_STEP)} call(s) found" in dom
    assert f"step {NEEDLE_STEP}, call {2 * NEEDLE_STEP - 1} (edit)" in dom
    assert dom.count('class="msg"') == NEEDLE_STEP * 2 and needle(NEEDLE_STEP) in dom
    dom = rendered_dom_at(page, "search=PWNED")
    assert "<title>FML-bench report</title>" in dom and "<img" not in dom
    # shown as text: the browser serialises a text node's < and > as entities
    assert '&lt;script&gt;document.title="PWNED"&lt;/script&gt;' in dom


def rendered_dom_at(page: Path, fragment: str) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                           "--virtual-time-budget=15000", "--dump-dom", page.resolve().as_uri() + "#" + fragment],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout

"""The static HTML report: written by pytest (--fmlbench-html, under -n) and by ``fmlbench report``,
rendered by a real browser (headless Chromium), safe against hostile text from runs, and read as a result:
a headline, columns with their definitions, plots scaled to their data."""

import html
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import markupsafe
import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.record import RunRecord, RunStore, StepRecord, Usage
from pytest_fmlbench.reports.runs import find_run_dirs, load_runs

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
    done.stdout.fnmatch_lines(["wrote report.html (4 run(s)*"])

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
            # the legend names each run group by its whole title (steps, options)
            assert "seed 0: best so far" in curve
            for name in agents:
                assert f"{name} / - / steps " in curve and "default options" in curve
        # neither agent calls a model: no usage plot, a line saying so
        assert 'id="usage-' not in dom and dom.count("no run of this task called a model") == 2


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
    # its agent called a model: the usage plot rendered, with its bars
    usage = figure(dom, "usage-0")
    assert 'class="main-svg"' in usage and 'class="trace bars"' in usage
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


# -- the page as a result, on runs written straight to disk (no experiment runs) -------------------

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def write_run(root: Path, agent: str = "random-search", *, seed: int = 0, budget: int = 2,
              options: dict | None = None, steps: tuple = ((True, 0.80),), test: float | None = 0.75,
              baseline_val: float = 0.76, scale: str | None = None, tokens: int = 0) -> Path:
    """A finished run of the toy task: ``steps`` as (success, validation value) pairs."""
    run_dir = root / "runs" / "toy_task" / f"{agent}__b{budget}__{scale or 'small'}__seed{seed}"
    store = RunStore(run_dir)
    valid = [metric for ok, metric in steps if ok]
    record = RunRecord(
        run_id=run_dir.name, task="toy_task", task_version=1, task_fingerprint="0" * 64, domain="toy", agent=agent,
        agent_options=options or {}, seed=seed, steps_budget=budget, status="finished", metric_key="accuracy",
        direction="higher", baseline_val=baseline_val, baseline_test=0.72, norm_best=1.0, norm_worst=0.0,
        steps_used=len(steps), valid_steps=len(valid), best_val=max(valid, default=None),
        test_metric=test if valid else None, scale=scale, sandbox="bwrap", agent_process="bwrap",
        usage=Usage(input_tokens=tokens, calls=1 if tokens else 0))
    rows = []
    for k, (ok, metric) in enumerate(steps, start=1):
        snapshot, sha = store.write_snapshot(k, {"config.json": f'{{"lr": {k}}}'})
        rows.append(StepRecord(step=k, action="improve", success=ok, metric=metric if ok else None,
                               error="" if ok else "Traceback (most recent call last):\nValueError: lr must be > 0",
                               started_at=START, snapshot=snapshot, snapshot_sha256=sha,
                               usage=Usage(input_tokens=tokens // max(len(steps), 1))))
    store.save(record)
    store.rewrite_steps(rows)
    return run_dir


def page_of(root: Path) -> str:
    from pytest_fmlbench.reports.html import render_html

    return render_html(load_runs(find_run_dirs(root)), encoder=None)


def figure_script(page: str, div_id: str) -> str:
    """The script that draws one figure, its JSON's escaped slashes read back."""
    start = page.index(f'id="{div_id}"')
    return page[start:page.index("</script>", start)].replace("\\u002f", "/")


def section(page: str, element_id: str) -> str:
    start = page.index(f'id="{element_id}"')
    return page[start:page.index("</section>", start)]


def test_headline_names_each_tasks_best_group_against_the_baseline_and_never_a_smoke_one(tmp_path):
    write_run(tmp_path, budget=2, test=0.75)                                        # better than 0.72
    write_run(tmp_path, budget=3, options={"include_baseline": False}, test=0.70)   # worse than the baseline
    write_run(tmp_path, budget=2, scale="smoke", test=0.95)                         # best value, but smoke
    headline = section(page_of(tmp_path), "headline")
    best = re.search(r'<b class="best-group">(.*?)</b>', headline).group(1)
    assert html.unescape(best) == "random-search / - / steps 2 / default options"
    assert "best of 2 run groups" in headline and "test <span class=\"better\">0.75</span>" in headline
    assert "against the baseline's 0.72" in headline and "NI</abbr> 0.03" in headline
    smoke = re.search(r'<span class="smoke">smoke</span> (.*?): test 0.95, no NI \((.*?)\)', headline)
    assert smoke and "smoke" in html.unescape(smoke.group(1)) and "not a result" in smoke.group(2)


def test_headline_says_when_no_group_beats_the_baseline_or_only_smoke_ran(tmp_path):
    write_run(tmp_path, budget=3, test=0.70)
    headline = section(page_of(tmp_path), "headline")
    assert '<span class="worse">0.7</span>' in headline and "(no better than the baseline)" in headline
    assert "NI</abbr> 0;" in headline or "NI</abbr> 0\n" in headline
    smoke_only = tmp_path / "smoke"
    write_run(smoke_only, scale="smoke", test=0.95)
    headline = section(page_of(smoke_only), "headline")
    assert "no result: only smoke runs" in headline and 'class="best-group"' not in headline


def test_every_column_header_carries_its_definition(tmp_path):
    from pytest_fmlbench.reports.definitions import DEFINITIONS
    from pytest_fmlbench.reports.tables import HEADERS

    write_run(tmp_path)
    page = page_of(tmp_path)
    headers = dict(re.findall(r'<th title="([^"]*)">([^<]*)</th>', page))
    titled = {html.unescape(word): html.unescape(meaning) for meaning, word in headers.items()}
    for word in [*HEADERS.values(), "NI (test)", "NI (best val)", "Agent test", "Baseline test", "Seeds"]:
        assert titled.get(word) == DEFINITIONS[word], word
    assert "Clamped at 0 as in the original" in titled["NI (test)"]
    # the list under the tables: NI with its clamp, AUP and its tau, every process metric
    listed = dict(re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", page))
    listed = {html.unescape(k): html.unescape(v) for k, v in listed.items()}
    for word in ("NI (test)", "AUP", "τ", *HEADERS.values()):
        assert listed.get(word) == DEFINITIONS[word], word
    assert "performance profile" in listed["AUP"] and "log10" in listed["τ"]


def test_a_failed_step_is_drawn_as_failed_and_the_axis_follows_the_data(tmp_path):
    from pytest_fmlbench.reports.figures import best_so_far_figure
    from pytest_fmlbench.reports.steps import run_view

    # the baseline far below the run's values, and a failed first step (no value: no best so far yet)
    run_dir = write_run(tmp_path, steps=((False, None), (True, 0.90), (True, 0.93)), baseline_val=0.10, budget=3)
    (record, steps, _), = load_runs([run_dir])
    figure = best_so_far_figure("toy_task", [run_view(record, steps, run_dir)])
    failed, = [trace for trace in figure.data if trace.name.endswith("failed step")]
    assert failed.marker.symbol == "x" and list(failed.x) == [1]
    # in the lane of failed steps, not on the value axis (where it would read as a value: the baseline's)
    assert failed.yaxis == "y2" and figure.layout.yaxis2.type == "category"
    assert "ValueError: lr must be &gt; 0" in failed.customdata[0]
    low, high = figure.layout.yaxis.range
    assert 0.85 < low < 0.90 and 0.93 < high < 0.97, (low, high)
    assert any("baseline 0.1 (below the plotted range)" in a.text for a in figure.layout.annotations)
    assert not figure.layout.shapes, "the baseline's line is off the plotted range"

    # a baseline near the values is drawn, on the axis
    near = write_run(tmp_path / "near", steps=((True, 0.78), (True, 0.80)), baseline_val=0.76)
    (record, steps, _), = load_runs([near])
    figure = best_so_far_figure("toy_task", [run_view(record, steps, near)])
    assert figure.layout.shapes[0].y0 == 0.76 and figure.layout.yaxis.range[0] < 0.76
    assert not [trace for trace in figure.data if trace.name.endswith("failed step")]


def test_no_usage_plot_for_runs_that_call_no_model(tmp_path):
    write_run(tmp_path, agent="random-search")
    page = page_of(tmp_path)
    assert 'id="usage-0"' not in page and "no run of this task called a model" in page
    write_run(tmp_path, agent="aide", tokens=4000)
    page = page_of(tmp_path)
    usage = figure_script(page, "usage-0")
    assert "no run of this task called a model" not in page
    # only the run that called a model: no empty bars of the other
    assert "aide / - / steps 2" in usage and "random-search" not in usage


def test_legends_and_run_summaries_name_each_run_groups_title(tmp_path):
    from pytest_fmlbench.scoring.runs import group_title

    dirs = [write_run(tmp_path, budget=2, seed=0), write_run(tmp_path, budget=2, seed=1),
            write_run(tmp_path, budget=3, options={"include_baseline": False})]
    titles = {group_title(record) for record, _, _ in load_runs(dirs)}
    assert len(titles) == 2
    page = page_of(tmp_path)
    curve = figure_script(page, "curve-0")
    for title in titles:
        assert f'"legendgrouptitle":{{"text":"{title}"}}' in curve, title
        assert f"<summary>{html.escape(title)} / seed 0: finished" in page
    assert f"<summary>{html.escape(min(titles, key=len))} / seed 1: finished" in page
    # with run groups as columns, a table's title carries what its cells are
    caption = re.search(r'<caption title="([^"]*)">Normalized Improvement', page)
    assert caption and "Clamped at 0" in caption.group(1)

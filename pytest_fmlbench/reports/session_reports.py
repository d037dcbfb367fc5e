"""The controller's reports of a pytest session: the three tables on the terminal, the CSVs, the JSON
summary and the HTML page, each made from all the session's runs and kept whole when one run breaks it
(``contained``). The plugin calls this at the session's end, where it has runs to report."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .. import junit
from ..mending import valid_unicode
from ..scoring.aggregate import Scores
from ..scoring.runs import describe, printable_line
from ..spec import TASK_FILE, TaskSpecError, load_task
from . import summary
from .contained import each_run_or_without, scored_runs
from .csv_files import write_csvs
from .disclosure import agent_code_sha256, hardware
from .runs import load_runs
from .tables import render


def write_session_reports(collector, terminalreporter) -> None:
    """The session's tables, CSVs, JSON summary and HTML page. Each is made on its own, and a run that
    cannot be read, scored or shown is left out with one line: one hostile record never takes the
    session's report of the other runs with it (reports.contained)."""
    left_out: list[str] = []

    def say(line: str) -> None:
        left_out.append(f"[fmlbench] {line}")

    runs = load_runs(sorted({run_dir for run_dir, _ in collector.runs.values()}),
                     left_out=lambda item, why: say(f"left out {describe(item)}: {why}"))
    terminalreporter.write_sep("=", "FML-bench results")
    reused = sorted(nodeid.split("::")[-1] for nodeid, (_, was_reused) in collector.runs.items() if was_reused)
    if reused:
        terminalreporter.write_line(
            f"reused {len(reused)} finished run(s) recorded earlier (pass --fresh to recompute): "
            + ", ".join(reused)
        )
    for nodeid, step in sorted(collector.resumed.items()):
        terminalreporter.write_line(
            f"resumed {nodeid.split('::')[-1]} after {step} recorded step(s) (recorded steps were replayed, not re-run)"
        )
    # scored once: the terminal, the CSVs, the JSON summary and the HTML page show the same numbers
    scores = Scores.from_runs(runs, left_out=lambda item, why: say(f"left out {describe(item)}: {why}"))
    runs = scored_runs(runs, scores)
    tables = each_run_or_without("tables", runs, scores, lambda _, s, trial: render(
        s, width=max(170, terminalreporter._tw.fullwidth)), say)
    if tables:
        terminalreporter.write(valid_unicode(tables))
    for record, _, _ in runs:
        # a judge that could not give a usable answer is one line each, never a crash
        for line in record.audit.errors if record.audit is not None else ():
            terminalreporter.write_line(
                f"[fmlbench] audit of {printable_line(f'{record.task}[seed{record.seed}]: {line}')}", yellow=True)
    report_dir = collector.bench.settings.out_dir / "reports"
    with tempfile.TemporaryDirectory(prefix="fmlbench-trial-") as trial_dir:
        each_run_or_without("CSV tables", runs, scores, lambda _, s, trial: write_csvs(
            s, Path(trial_dir) if trial else report_dir), say)
    written = each_run_or_without("session summary", runs, scores, lambda r, s, trial: _write_summary(
        collector, r, s, None if trial else report_dir / summary.FILE_NAME), say)
    where = f" (session summary: {summary.FILE_NAME})" if written else ""
    terminalreporter.write_line(f"tables written to {report_dir}/{where} ; "
                                f"run records under {collector.bench.settings.out_dir / 'runs'}/")
    html = collector.config.getoption("fmlbench_html")
    if html:
        _write_html(terminalreporter, runs, scores, Path(collector.config.invocation_params.dir) / html, say)
    for line in left_out:
        terminalreporter.write_line(line, yellow=True)
    if collector.moved_to_suite:
        terminalreporter.write_line(junit.NOTE.format(family=junit.junit_family(collector.config)))


def _write_summary(collector, runs: list, scores: Scores, path: Path | None) -> Path | None:
    """The JSON session summary, written to ``path`` (None: made and encoded only, as a trial)."""
    made = summary.build_summary(scores, source="pytest", options=_session_options(collector, runs),
                                 suite=summary.suite_of(sorted(collector.task_dirs)), hardware=hardware())
    if path is None:
        summary.encoded(made)
        return None
    return summary.write_summary(made, path)


def _write_html(terminalreporter, runs: list, scores: Scores, path: Path, say) -> None:
    from .html import ReportUnavailable, render_html, write_html

    def make(runs: list, scores: Scores, trial: bool):
        return render_html(runs, scores) if trial else write_html(runs, path, scores=scores)

    try:
        written = each_run_or_without("HTML report", runs, scores, make, say, passes=(ReportUnavailable, OSError))
    except ReportUnavailable as exc:
        terminalreporter.write_line(f"HTML report not written: {exc}", red=True)
    except OSError as exc:
        terminalreporter.write_line(f"HTML report not written: {path}: {exc.strerror or exc}", red=True)
    else:
        if written is not None:
            terminalreporter.write_line(f"HTML report written to {path}")
        else:
            terminalreporter.write_line(f"HTML report not written: {path} (see the lines below)", red=True)


def _session_options(collector, runs: list) -> summary.SessionOptions:
    s = collector.bench.settings
    timeouts = {}
    for task_dir in collector.task_dirs:
        try:
            timeouts[task_dir.name] = load_task(task_dir / TASK_FILE).spec.timeout_s
        except (TaskSpecError, OSError):
            continue
    judge = collector.bench.judge
    return summary.SessionOptions(
        agent=s.agent_name, agent_options=s.agent_options.model_dump(mode="json"), model=s.model,
        provider=s.provider, steps=s.steps, seeds=collector.bench.seeds, sandboxed=s.sandboxed,
        agent_mode=s.agent_mode, fresh=s.fresh,
        max_cost_usd=s.budget.get("max_cost_usd"), max_tokens=s.budget.get("max_tokens"),
        network=not s.sandboxed, agent_timeout_s=s.agent_limits.timeout_s, task_timeouts_s=timeouts,
        agent_code_sha256=agent_code_sha256(s),
        scale=s.scale if any(record.scale is not None for record, _, _ in runs) else None,
        judges=sorted({j for record, _, _ in runs if record.audit for j in record.audit.judge_names})
        if judge is not None else [],
    )

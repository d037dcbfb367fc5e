"""pytest hooks: options, configuration, collection, and the controller-side summary."""

from __future__ import annotations

# first, before the heavy imports below: a Ctrl-C from here on is kept, not discarded (interrupts.py)
from .interrupts import SessionEndInterrupt, SessionStartInterrupt, early_presses

early_presses.hold()

import tempfile
from pathlib import Path

import pytest

from . import devices, failure_causes, junit, schedule
from .progress import LiveDisplay
from .terminal_lines import line_writer
from .compare.gate import SessionGate
from .collect import (BENCH_KEY, LIVE_KEY, RESUMED_PROPERTY, REUSED_PROPERTY, RUN_DIR_PROPERTY,
                      collect_task_directory, leave_out_unchosen_full_tasks)
from .options import BenchConfig, add_options
from .root_guard import check_root
from .mending import valid_unicode
from .reports.contained import each_run_or_without, scored_runs
from .reports.csv_files import write_csvs
from .reports.runs import load_runs
from .reports.tables import render
from .reports import summary
from .reports.disclosure import agent_code_sha256, hardware
from .scoring.aggregate import Scores
from .scoring.runs import describe, printable_line
from .spec import TASK_FILE, TaskSpecError, load_task
from .slurm import add_slurm_options, configure as configure_slurm

def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    add_slurm_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # the first moment this plugin's options are known: before any conftest or test of a wrong root is loaded
    check_root(early_config, parser, args)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if config.getoption("fmlbench_agents"):
        from .agentkit.catalog import catalog, render

        print(render(catalog()), end="")
        return 0
    return None


def pytest_configure(config: pytest.Config) -> None:
    for mark, text in (("lite", "tasks of the original's FML-bench-Lite subset"),
                       ("small", "tasks' CPU-sized profile (offline, 2 cores)"), ("full", "tasks in the full profile only"),
                       ("gpu", "tasks that use a GPU when one is present")):
        config.addinivalue_line("markers", f"{mark}: {text}")
    bench = BenchConfig.from_pytest(config)
    config.stash[BENCH_KEY] = bench
    if hasattr(config, "workerinput"):
        early_presses.release()  # the controller takes Ctrl-C; a worker keeps SIGINT as it was given
    else:
        config.pluginmanager.register(SessionStartInterrupt(config, benchmark=bench is not None),
                                      "fmlbench-session-start-interrupt")
    configure_slurm(config, bench)
    # xdist workers report to the controller, which alone aggregates and prints
    if bench is not None and not hasattr(config, "workerinput"):
        collector = ResultsCollector(config, bench)
        config.pluginmanager.register(collector, "fmlbench-results")
        config.pluginmanager.register(SessionEndInterrupt(config, bench.settings.out_dir / "runs"),
                                      "fmlbench-session-end-interrupt")
        if not config.getoption("collectonly"):
            config.pluginmanager.register(SessionGate(config, bench.settings.out_dir, lambda: collector.runs),
                                          "fmlbench-compare")
    elif bench is None and not hasattr(config, "workerinput") and config.getoption("fmlbench_compare"):
        raise pytest.UsageError("--fmlbench-compare compares benchmark sessions: it needs --agent=NAME")


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector):
    return collect_task_directory(path, parent)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    leave_out_unchosen_full_tasks(config, items)
    failure_causes.keep_infra_failed(config, items, config.stash.get(BENCH_KEY, None))
    bench = config.stash.get(BENCH_KEY, None)
    if bench is not None:
        schedule.longest_first(items, bench.settings.steps, bench.settings.out_dir)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # items of very different lengths: work stealing keeps every worker busy (unless the user chose)
    if config.stash.get(BENCH_KEY, None) is None or schedule.user_chose_dist(config):
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if config.stash.get(BENCH_KEY, None) is None:
        return None
    return devices.auto_workers(gpus_per_task=1)


class ResultsCollector:
    """Controller-side: gathers run directories from reports (they cross xdist) and prints the tables."""

    def __init__(self, config: pytest.Config, bench: BenchConfig):
        self.config = config
        self.bench = bench
        self.runs: dict[str, tuple[Path, bool]] = {}
        self.task_dirs: set[Path] = set()
        self.resumed: dict[str, int] = {}
        self.moved_to_suite = False
        self.live: LiveDisplay | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # -q keeps it quiet; --collect-only runs nothing
        if self.config.get_verbosity() < 0 or self.config.getoption("collectonly"):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.live = LiveDisplay(self.bench.settings.out_dir, line_writer(reporter), tty=reporter.isatty())
        self.config.stash[LIVE_KEY] = self.live
        self.live.start()

    # an item that runs in this process (no -n) runs under pytest's output capture: the display's thread
    # must not write then (its lines would land in the item's captured output); the item shows its progress
    # itself, with capture off (collect.TaskItem._show_progress)
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):
        if self.live is None:
            return (yield)
        with self.live.held_back():
            return (yield)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.live is not None:
            self.live.stop()
            del self.config.stash[LIVE_KEY]
            self.live = None

    # before junitxml's own hook, which writes a report's properties into its testcase
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        run_dir = props.get(RUN_DIR_PROPERTY)
        if run_dir:
            self.runs[report.nodeid] = (Path(run_dir), props.get(REUSED_PROPERTY) == "true")
            where = Path(self.config.rootpath) / report.fspath
            self.task_dirs.add(where if where.is_dir() else where.parent)
            if props.get(RESUMED_PROPERTY):
                self.resumed[report.nodeid] = int(props[RESUMED_PROPERTY])
            self.moved_to_suite |= junit.move_to_suite(self.config, report)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The session's tables, CSVs, JSON summary and HTML page. Each is made on its own, and a run that
        cannot be read, scored or shown is left out with one line: one hostile record never takes the
        session's report of the other runs with it (reports.contained)."""
        if not self.runs:
            return
        left_out: list[str] = []

        def say(line: str) -> None:
            left_out.append(f"[fmlbench] {line}")

        runs = load_runs(sorted({run_dir for run_dir, _ in self.runs.values()}),
                         left_out=lambda item, why: say(f"left out {describe(item)}: {why}"))
        terminalreporter.write_sep("=", "FML-bench results")
        reused = sorted(nodeid.split("::")[-1] for nodeid, (_, was_reused) in self.runs.items() if was_reused)
        if reused:
            terminalreporter.write_line(
                f"reused {len(reused)} finished run(s) recorded earlier (pass --fresh to recompute): "
                + ", ".join(reused)
            )
        for nodeid, step in sorted(self.resumed.items()):
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
        report_dir = self.bench.settings.out_dir / "reports"
        with tempfile.TemporaryDirectory(prefix="fmlbench-trial-") as trial_dir:
            each_run_or_without("CSV tables", runs, scores, lambda _, s, trial: write_csvs(
                s, Path(trial_dir) if trial else report_dir), say)
        written = each_run_or_without("session summary", runs, scores, lambda r, s, trial: self.write_summary(
            r, s, None if trial else report_dir / summary.FILE_NAME), say)
        where = f" (session summary: {summary.FILE_NAME})" if written else ""
        terminalreporter.write_line(f"tables written to {report_dir}/{where} ; "
                                    f"run records under {self.bench.settings.out_dir / 'runs'}/")
        html = self.config.getoption("fmlbench_html")
        if html:
            self.write_html(terminalreporter, runs, scores, Path(self.config.invocation_params.dir) / html, say)
        for line in left_out:
            terminalreporter.write_line(line, yellow=True)
        if self.moved_to_suite:
            terminalreporter.write_line(junit.NOTE.format(family=junit.junit_family(self.config)))

    def write_summary(self, runs: list, scores: Scores, path: Path | None) -> Path | None:
        """The JSON session summary, written to ``path`` (None: made and encoded only, as a trial)."""
        made = summary.build_summary(scores, source="pytest", options=self.session_options(runs),
                                     suite=summary.suite_of(sorted(self.task_dirs)), hardware=hardware())
        if path is None:
            summary.encoded(made)
            return None
        return summary.write_summary(made, path)

    def write_html(self, terminalreporter, runs: list, scores: Scores, path: Path, say) -> None:
        from .reports.html import ReportUnavailable, render_html, write_html

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

    def session_options(self, runs: list) -> summary.SessionOptions:
        s = self.bench.settings
        timeouts = {}
        for task_dir in self.task_dirs:
            try:
                timeouts[task_dir.name] = load_task(task_dir / TASK_FILE).spec.timeout_s
            except (TaskSpecError, OSError):
                continue
        judge = self.bench.judge
        return summary.SessionOptions(
            agent=s.agent_name, agent_options=s.agent_options.model_dump(mode="json"), model=s.model,
            provider=s.provider, steps=s.steps, seeds=self.bench.seeds, sandboxed=s.sandboxed,
            agent_mode=s.agent_mode, fresh=s.fresh,
            max_cost_usd=s.budget.get("max_cost_usd"), max_tokens=s.budget.get("max_tokens"),
            network=not s.sandboxed, agent_timeout_s=s.agent_limits.timeout_s, task_timeouts_s=timeouts,
            agent_code_sha256=agent_code_sha256(s),
            scale=s.scale if any(record.scale is not None for record, _, _ in runs) else None,
            judges=sorted({j for record, _, _ in runs if record.audit for j in record.audit.judge_names})
            if judge is not None else [],
        )

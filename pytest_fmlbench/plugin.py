"""pytest hooks: options, configuration, collection, and the controller-side summary."""

from __future__ import annotations

# first, before the heavy imports below: a Ctrl-C from here on is kept, not discarded (interrupts.py)
from .interrupts import SessionEndInterrupt, SessionStartInterrupt, early_presses

early_presses.hold()

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
        """The session's tables, CSVs, JSON summary and HTML page (reports.session_reports)."""
        if not self.runs:
            return
        # here, not at the top: the reports need pandas, which a session or xdist worker that reports nothing
        # (every worker, a collection, a usage error) should not load
        from .reports.session_reports import write_session_reports

        write_session_reports(self, terminalreporter)


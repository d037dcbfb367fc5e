"""Ctrl-C while the session ends, in pytest, on the controller.

pytest turns a Ctrl-C into its interrupted report only while it collects and runs items. After the last
item the session still works for a while (here: scoring, the embedding model of the exploration
metrics, the tables, the saved session, junit's file), and a Ctrl-C there used to end Python with a
traceback of wherever it landed and a death by SIGINT. Here it ends as a Ctrl-C during the run does:
every plugin hears it (pytest_keyboard_interrupt: the Slurm controller cancels what still runs), pytest
prints its short interrupted report, the exit status is 2, and one line says what was cut short and
where the runs are. The runs themselves were recorded as their items ended: nothing of them is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest


class SessionEndInterrupt:
    def __init__(self, config: pytest.Config, runs_dir: Path):
        self.config = config
        self.runs_dir = runs_dir

    # outermost: around every plugin's end of session, the terminal's summary (a wrapper itself) included
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        try:
            return (yield)
        except KeyboardInterrupt:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            self.config.hook.pytest_keyboard_interrupt(excinfo=pytest.ExceptionInfo.from_current())
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.ensure_newline()
                if reporter._tw.width_of_current_line:
                    reporter._tw.line()
                reporter.write_line(
                    f"[fmlbench] Ctrl-C while the session ended: its summary was cut short; every run is recorded "
                    f"under {self.runs_dir}/ (the same command prints the tables from them again, so does "
                    f"`fmlbench score {self.runs_dir}`)", red=True, bold=True)
            return None

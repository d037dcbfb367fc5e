"""Ctrl-C is never lost on the controller: neither before its --slurm controller takes SIGINT, nor while the
session ends.

**Before.** A controller started with SIGINT ignored (a shell's background job, a supervisor) takes SIGINT
back when its Slurm controller is made, at configure: a second or so after start (plugins imported, options
parsed, the cluster asked for its partitions). Until then the kernel discarded a Ctrl-C, and the session
submitted its jobs and ran to the end (seen at random moments in the first 1.2 s). From this module's
import on (first in plugin.py), an ignored SIGINT is caught and kept instead; at configure a --slurm
controller takes a kept press as a Ctrl-C before it submits anything, and any other session gets its
ignored SIGINT back with the press dropped, as before. Only a press in the interpreter's and pytest's own
start, before any plugin is imported (~0.2 s), is still discarded: no code of ours runs yet.

**While the session ends.** pytest turns a Ctrl-C into its interrupted report only while it collects and
runs items. After the last item the session still works for a while (here: scoring, the embedding model of the exploration
metrics, the tables, the saved session, junit's file), and a Ctrl-C there used to end Python with a
traceback of wherever it landed and a death by SIGINT. Here it ends as a Ctrl-C during the run does:
every plugin hears it (pytest_keyboard_interrupt: the Slurm controller cancels what still runs), pytest
prints its short interrupted report, the exit status is 2, and one line says what was cut short and
where the runs are. The runs themselves were recorded as their items ended: nothing of them is lost.
Once the session has ended (its summary printed, or cut short), later presses are dropped: pytest's own
clean-up and the interpreter's exit have nothing to stop (a press there ended in a traceback of pytest's
unconfigure and a death by SIGINT).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest


class _EarlyPresses:
    def __init__(self) -> None:
        self.held = False
        self.pressed = False

    def hold(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set a handler; pytest run from a thread keeps what it has
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, self._press)
            self.held = True

    def _press(self, signum, frame) -> None:
        self.pressed = True

    def release(self, take: bool) -> bool:
        """Ends the hold: ``take`` (a --slurm controller) installs Python's Ctrl-C, otherwise SIGINT is ignored
        again. Returns whether a press was kept that the caller must take as a Ctrl-C."""
        if not self.held:
            return False
        self.held = False
        if signal.getsignal(signal.SIGINT) == self._press:
            signal.signal(signal.SIGINT, signal.default_int_handler if take else signal.SIG_IGN)
        pressed, self.pressed = self.pressed, False
        return pressed and take


early_presses = _EarlyPresses()


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
            _drop_later_presses()
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
        finally:
            # the session's work is done: its items, their jobs, its summary. A Ctrl-C from here to the
            # process's exit has nothing left to stop; it would only break off pytest's clean-up with a
            # traceback and turn the session's exit status into a death by SIGINT
            _drop_later_presses()


def _drop_later_presses() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

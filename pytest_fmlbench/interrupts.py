"""Ctrl-C on a benchmark session's controller: never lost, never a traceback, from the plugin's import to
the process's exit.

**While it starts.** From this module's import (first in plugin.py, ~0.2 s after start) to the session's
start, a press is kept rather than acted on: it used to be discarded by the kernel where SIGINT was
inherited ignored (a shell's background job, a supervisor: the session then submitted its jobs and ran to
the end, seen in the first 1.2 s), or to end Python with a traceback of the plugin being imported. At the
session's start a benchmark controller takes SIGINT whatever it was given (``take_ctrl_c``) and raises a
kept press there, where pytest reports it, before anything is submitted or run; any other session gets
SIGINT back as it was given (a kept press is raised there too, unless SIGINT was ignored).
Only a press while Python and pytest alone start, before any plugin is imported, is still discarded where
SIGINT was ignored: no code of ours runs yet.

**While it runs.** The first press ends the session and later ones are dropped (``first_press_ends_session``):
a terminal's repeat or an impatient user would otherwise break off the cancelling of Slurm jobs, or pytest's
report of the first press.

**While it ends.** pytest turns a Ctrl-C into its interrupted report only while it collects and runs items.
After the last item the session still works for a while (scoring, the embedding model of the exploration
metrics, the tables, the saved session, junit's file), and a Ctrl-C there used to end Python with a
traceback of wherever it landed and a death by SIGINT. Here it ends as a Ctrl-C during the run does: every
plugin hears it (pytest_keyboard_interrupt: the Slurm controller cancels what still runs), pytest prints
its short interrupted report, the exit status is 2, and one line says what was cut short and where the runs
are. The runs themselves were recorded as their items ended: nothing of them is lost. Once the session has
ended, later presses are dropped: pytest's own clean-up and the interpreter's exit have nothing to stop (a
press there ended in a traceback of pytest's unconfigure and a death by SIGINT).

**Its exit status.** A press that pytest or this module handled ends the process with status 2, never by
SIGINT: CPython marks a KeyboardInterrupt that leaves code run through ``PyRun_String`` as unhandled, even
where it is caught further out, and ``python -m`` then ends by killing itself with SIGINT. A press that
landed in pybind11's ``exec`` (optree's module init, imported with transformers for the exploration
metrics) did that (``forget_handled_interrupt``).
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
from pathlib import Path

import pytest

from .terminal_lines import write_whole_line


def _main_thread() -> bool:
    # only the main thread may set a handler; pytest run from another thread keeps what it has
    return threading.current_thread() is threading.main_thread()


class _EarlyPresses:
    def __init__(self) -> None:
        self.given = None  # SIGINT's handler as the process was given it, while held
        self.pressed = False

    def hold(self) -> None:
        if _main_thread() and signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.default_int_handler):
            self.given = signal.signal(signal.SIGINT, self._press)

    def _press(self, signum, frame) -> None:
        self.pressed = True

    def release(self, take: bool = False) -> bool:
        """Ends the hold, SIGINT as it was given. Returns whether a press was kept that is to be taken as a
        Ctrl-C: always where ``take``, else unless SIGINT was given ignored."""
        if self.given is None:
            return False
        given, self.given = self.given, None
        if signal.getsignal(signal.SIGINT) == self._press:
            signal.signal(signal.SIGINT, given)
        pressed, self.pressed = self.pressed, False
        return pressed and (take or given != signal.SIG_IGN)


early_presses = _EarlyPresses()


def take_ctrl_c() -> bool:
    """A benchmark controller takes Ctrl-C whatever its parent did to SIGINT: an ignored or blocked SIGINT is
    inherited through fork and exec, and a controller started that way would run on after Ctrl-C and leave
    its jobs on the cluster. Returns whether a press was kept while it started."""
    pressed = early_presses.release(take=True)
    if not _main_thread():
        return pressed
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None, signal.default_int_handler):
        signal.signal(signal.SIGINT, first_press_ends_session)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    return pressed


def first_press_ends_session(signum, frame) -> None:
    # pytest's short report names where the press landed, not this handler
    __tracebackhide__ = True
    _drop_later_presses()
    raise KeyboardInterrupt


def _drop_later_presses() -> None:
    if _main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def forget_handled_interrupt() -> None:
    """Clears CPython's mark of an unhandled KeyboardInterrupt once the session has handled its press.

    The mark (``_Py_UnhandledKeyboardInterrupt``, later in ``_PyRuntime.signals``) is private. The CPythons
    that set it when a KeyboardInterrupt leaves ``PyRun_String`` (3.11, this project's) also clear it as
    code run through the public ``PyRun_SimpleString`` starts; the later ones set it only where the exception
    leaves ``python -m``'s module, and running an empty string changes nothing there. A KeyboardInterrupt
    that does escape pytest marks it again, so that Python still ends by SIGINT there."""
    pythonapi = getattr(ctypes, "pythonapi", None)
    if pythonapi is not None and sys.implementation.name == "cpython":
        pythonapi.PyRun_SimpleString(b"")


def _pytest_is_the_program() -> bool:
    """``pytest`` or ``python -m pytest``, as opposed to pytest.main() called by a script or a notebook."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec is not None and spec.name in ("pytest", "pytest.__main__")) or Path(sys.argv[0]).name in (
        "pytest", "py.test")


class SessionStartInterrupt:
    """On the controller (xdist's workers release the hold at configure). A benchmark session takes Ctrl-C at
    its start; any other gets SIGINT back as it was given. A press kept until then is raised there, where
    pytest reports it. Where pytest.main() was called by a program that goes on (a script, a notebook),
    SIGINT is as that program had it again once pytest has cleaned up; pytest's own process exits with later
    presses dropped (a held-down key reached the interpreter's exit)."""

    def __init__(self, config: pytest.Config, benchmark: bool):
        self.benchmark = benchmark
        given = early_presses.given if early_presses.given is not None else signal.getsignal(signal.SIGINT)
        if _main_thread() and given is not None and not _pytest_is_the_program():
            # registered before pytest's own clean-ups, so run after them
            config.add_cleanup(lambda: signal.signal(signal.SIGINT, given))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.benchmark:
            if take_ctrl_c():
                first_press_ends_session(signal.SIGINT, None)  # the presses after it (a held key) are dropped
        elif early_presses.release():
            raise KeyboardInterrupt


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
                write_whole_line(
                    reporter,
                    f"[fmlbench] Ctrl-C while the session ended: its summary was cut short; every run is recorded "
                    f"under {self.runs_dir}/ (the same command prints the tables from them again, so does "
                    f"`fmlbench score {self.runs_dir}`)", red=True, bold=True)
            return None
        finally:
            # the session's work is done: its items, their jobs, its summary. A Ctrl-C from here to the
            # process's exit has nothing left to stop; it would only break off pytest's clean-up with a
            # traceback and turn the session's exit status into a death by SIGINT
            _drop_later_presses()
            forget_handled_interrupt()

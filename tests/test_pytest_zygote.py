"""The child pytests forked from tests/pytest_zygote.py see what ``python -m pytest`` would show them, end as
it ends, and run directly wherever a fork could differ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import child_pytest

# what a child pytest's conftest reports at configure: its process, interpreter and environment
SEEN = r'''
import json, os, sys
import numpy

def pytest_configure(config):
    main = sys.modules["__main__"]
    umask = os.umask(0)
    os.umask(umask)
    seen = {"pid": os.getpid(), "path": sys.path, "argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ),
            "umask": umask, "main": main.__spec__.name, "main_file": main.__file__, "executable": sys.executable,
            "stdout": os.readlink("/proc/self/fd/1"), "numpy_draw": numpy.random.random(),
            "plugins": sorted(name for name, _ in config.pluginmanager.list_name_plugin()
                               if name and not name.isdigit())}
    with open(os.environ["SEEN_AT"], "w") as fh:
        json.dump(seen, fh)
'''
TESTS = '''
import os, time
from pathlib import Path

def test_passes():
    pass

def test_sleeps():
    Path(os.environ["SEEN_AT"] + ".sleeping").write_text(str(os.getpid()))
    time.sleep(60)
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> Path:
    pytester.makeconftest(SEEN)
    pytester.makepyfile(test_child=TESTS)
    monkeypatch.setenv("SEEN_AT", str(pytester.path / "seen.json"))
    return pytester.path


def started(pytester: pytest.Pytester, command: tuple[str, ...], *args: str) -> tuple[subprocess.Popen, Path]:
    out = pytester.path / f"out-{time.monotonic_ns()}.txt"
    with open(out, "w") as fh:
        proc = pytester.popen([*command, "-p", "no:cacheprovider", *args], stdout=fh, stderr=subprocess.STDOUT)
    return proc, out


def seen(project: Path) -> dict:
    return json.loads((project / "seen.json").read_text())


def test_a_forked_child_sees_what_python_m_pytest_shows(pytester, project, monkeypatch):
    """sys.path, sys.argv, __main__, working directory, environment, umask and descriptors are a fresh
    ``python -m pytest``'s, and numpy's global generator is not the server's nor a sibling's."""
    monkeypatch.setenv("PYTHONPATH", "/nonexistent/extra")
    os.umask(0o027)
    try:
        views = {}
        for name, command in (("direct", (sys.executable, "-mpytest")), ("forked", child_pytest()),
                              ("forked again", child_pytest())):
            proc, out = started(pytester, command, "-k", "passes")
            assert proc.wait() == 0, out.read_text()
            views[name] = {**seen(project), "popen_pid": proc.pid, "out": str(out)}
    finally:
        os.umask(0o022)
    direct, forked = views["direct"], views["forked"]
    assert direct["pid"] == direct["popen_pid"] and forked["pid"] != forked["popen_pid"]  # it was forked
    for key in ("path", "argv", "cwd", "umask", "main", "main_file", "executable", "plugins"):
        assert forked[key] == direct[key], (key, forked[key], direct[key])
    assert "/nonexistent/extra" in forked["path"]
    for view in views.values():
        view["env"].pop("SEEN_AT")
    assert forked["env"] == direct["env"]
    assert forked["stdout"] == forked["out"] and direct["stdout"] == direct["out"]
    assert len({view["numpy_draw"] for view in views.values()}) == 3


def test_a_forked_child_ends_as_its_client_does(pytester, project):
    """Exit codes pass through; a signal to the client reaches the child and the client ends by it; a killed
    client takes its child with it."""
    proc, out = started(pytester, child_pytest(), "-k", "passes or nothing_else")
    assert proc.wait() == 0
    (pytester.path / "test_fails.py").write_text("def test_fails():\n    assert False\n")
    proc, out = started(pytester, child_pytest(), "test_fails.py")
    assert proc.wait() == 1, out.read_text()
    proc, out = started(pytester, child_pytest(), "--no-such-option")
    assert proc.wait() == 4, out.read_text()

    for how in (signal.SIGTERM, signal.SIGKILL):
        codes = []
        for command in ((sys.executable, "-mpytest"), child_pytest()):
            marker = Path(str(project / "seen.json") + ".sleeping")
            marker.unlink(missing_ok=True)
            proc, out = started(pytester, command, "-k", "sleeps")
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.05)
            child = int(marker.read_text())
            proc.send_signal(how)
            codes.append(proc.wait(timeout=60))
            deadline = time.monotonic() + 30
            while b"zombie" not in _state(child):
                assert time.monotonic() < deadline, f"child {child} outlived its client ({how!r})"
                time.sleep(0.05)
        assert codes[0] == codes[1], (how, codes)


def _state(pid: int) -> bytes:
    try:
        status = Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return b"zombie"
    return b"zombie" if b"State:\tZ" in status else status


@pytest.mark.parametrize("variable", ["PYTHONHASHSEED", "OMP_NUM_THREADS", "LC_ALL"])
def test_a_child_whose_start_up_would_differ_runs_directly(pytester, project, monkeypatch, variable):
    """An environment that shapes an interpreter's start or a library's import unlike the server's: the
    client becomes ``python -m pytest`` itself (same process, same arguments)."""
    monkeypatch.setenv(variable, {"PYTHONHASHSEED": "7", "OMP_NUM_THREADS": "5", "LC_ALL": "POSIX"}[variable])
    proc, out = started(pytester, child_pytest(), "-k", "passes")
    assert proc.wait() == 0, out.read_text()
    view = seen(project)
    assert view["pid"] == proc.pid
    assert view["main"] == "pytest.__main__" and view["argv"][1:3] == ["-p", "no:cacheprovider"]

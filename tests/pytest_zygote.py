"""Child pytests forked from an interpreter that has imported pytest, the plugin and the libraries a session
reports with, instead of each child importing them again: about 0.8 s of processor time per child on 2
cores, over the few hundred children the suite starts.

    python tests/pytest_zygote.py serve SOCKET      # the server: one per xdist worker (tests/conftest.py)
    python -I -S tests/pytest_zygote.py ARGS...      # in place of `python -m pytest ARGS...`

The second form is the client, the process a test starts (pytester's Popen, ``run_child``). It hands the
server its arguments, working directory, environment, umask and standard descriptors; the server forks, and
the fork becomes ``python -m pytest ARGS`` there: ``runpy`` runs pytest's ``__main__`` with that
``sys.argv``, in that directory and environment, with the ``sys.path`` a fresh interpreter would build
(the directory, then ``PYTHONPATH``, then the interpreter's own), numpy's global generator seeded anew as a
fresh import seeds it. It ends as a script does (``SystemExit``, atexit handlers, thread joins). The client
ends as the child does, with its exit code or killed by the same signal; a signal the client receives is
passed on, and a client that is killed (a test's timeout) takes the child with it.

Where a fork could differ from a fresh interpreter, the client runs ``python -m pytest`` itself (``exec``,
same arguments and environment): no server (the variable unset, a test's own environment), a terminal
on a standard descriptor (stdio is then set up otherwise), or an environment variable that shapes an
interpreter's start-up or a library's import (``PYTHON*`` but ``PYTHONPATH``, locale, the numerical
libraries' thread counts, ``LD_*``) that differs from the server's. The suite's own checks of how the
plugin starts (Ctrl-C, Slurm, the external agent, ``fmlbench`` commands) start their pytest directly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

SOCKET_ENV = "FMLBENCH_TEST_ZYGOTE"
# what a test's environment may not change for its child to be a fork of the server
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "MALLOC_")
_STARTUP_NAMES = ("LANG", "LANGUAGE", "TZ")
_RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
_MAX_MESSAGE = 1 << 20


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key != "PYTHONPATH" and
            (key.startswith(_STARTUP_PREFIXES) or key in _STARTUP_NAMES)}


# ------------------------------------------------------------------------------------- the suite's handle

class Zygote:
    """The server of this process (an xdist worker, or a lone pytest), started on first use; ``command()`` is
    what a test runs in place of ``python -m pytest``. Its socket's path is in the environment from the
    session's start, so that a child started before the server (or after it ended) runs directly."""

    def __init__(self, socket_path: str, env: dict[str, str]):
        self.socket_path, self.env, self.process = socket_path, env, None

    def command(self) -> tuple[str, ...]:
        if self.process is None:
            import subprocess

            self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", self.socket_path],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env, cwd="/")
            ready = self.process.stdout.readline()
            if ready != b"ready\n":
                raise RuntimeError(f"the child pytests' server did not start (it said {ready!r})")
        return sys.executable, "-I", "-S", os.path.abspath(__file__)

    def children_cpu(self) -> float:
        """Processor time of the child pytests that have ended (and of what they waited for), in seconds."""
        if self.process is None or self.process.poll() is not None:
            return 0.0
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as link:
            link.connect(self.socket_path)
            link.send(json.dumps({"ask": "cpu"}).encode())
            return json.loads(link.recv(_MAX_MESSAGE))["cpu"]

    def stop(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait()
            self.process.stdout.close()


# ---------------------------------------------------------------------------------------------- the client

def _run_directly(args: list[str], env: dict[str, str]) -> None:
    os.execve(sys.executable, [sys.executable, "-m", "pytest", *args], env)


def client(args: list[str]) -> None:
    env = dict(os.environ)
    path = env.get(SOCKET_ENV)
    if path is None or any(os.isatty(fd) for fd in (0, 1, 2)):
        _run_directly(args, env)
    umask = os.umask(0)
    os.umask(umask)
    request = {"argv": args, "cwd": os.getcwd(), "env": env, "umask": umask}
    link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        link.connect(path)
        socket.send_fds(link, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(link.recv(_MAX_MESSAGE))
    except (OSError, ValueError):  # the server is gone (its worker ended) or never started
        _run_directly(args, env)
    if "direct" in reply:
        _run_directly(args, env)

    def relay(signum, _frame):
        try:
            link.send(json.dumps({"signal": signum}).encode())
        except OSError:
            pass

    for signum in _RELAYED:
        signal.signal(signum, relay)
    while True:
        try:
            message = link.recv(_MAX_MESSAGE)
        except InterruptedError:
            continue
        if not message:  # the server died with the child unreported
            os._exit(1)
        ended = json.loads(message)
        if "exit" in ended:
            os._exit(ended["exit"])
        if "killed" in ended:
            for signum in _RELAYED:
                signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), ended["killed"])
            os._exit(128 + ended["killed"])


# ---------------------------------------------------------------------------------------------- the server

# the modules a benchmark session imports from start to summary (collection, the run, the reports)
PRELOAD = ("pytest", "_pytest.pytester", "pytest_fmlbench.plugin", "pytest_fmlbench.collect",
           "pytest_fmlbench.runner", "pytest_fmlbench.reports.runs", "pytest_fmlbench.reports.session_reports",
           "pytest_fmlbench.reports.human_baseline", "pytest_fmlbench.audit.tables", "pytest_fmlbench.compare.gate",
           "pytest_fmlbench.compare.diff", "pytest_fmlbench.compare.sessions", "pytest_fmlbench.failure_causes",
           "pandas", "pandas.io.formats.csvs", "pandas.core.methods.to_dict", "pandas.core.reshape.reshape", "numpy",
           "rich.console", "rich.table", "zstandard", "xml.etree.ElementTree", "unittest", "pdb", "email.parser")


def _preload() -> None:
    import gc
    import importlib

    from _pytest.config import default_plugins

    for name in (*PRELOAD, *(f"_pytest.{plugin}" for plugin in default_plugins)):
        importlib.import_module(name)
    # what is here now lives as long as any child: its collections need not walk it (nor copy its pages)
    gc.collect()
    gc.freeze()


class _Child:
    def __init__(self, pid: int, link: socket.socket):
        self.pid, self.link = pid, link


def serve(path: str) -> dict | None:
    """Serves until its standard input ends (the worker that started it is gone); returns the request in a
    fork that is to become a child pytest."""
    import selectors

    own_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    _preload()
    base_path = [p for p in sys.path if p not in own_pythonpath]  # its own folder is gone already (__main__)
    startup = _startup_env(dict(os.environ))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "worker")
    children: dict[int, _Child] = {}  # by the client link's descriptor
    by_pidfd: dict[int, _Child] = {}
    children_cpu = 0.0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            what = key.data
            if what == "worker":
                if not os.read(sys.stdin.fileno(), 4096):
                    for child in children.values():
                        child.link.close()
                    listener.close()
                    return None
            elif what == "listener":
                link, _ = listener.accept()
                try:
                    message, fds, _, _ = socket.recv_fds(link, _MAX_MESSAGE, 3)
                except OSError:
                    link.close()
                    continue
                request = json.loads(message)
                if request.get("ask") == "cpu":  # conftest's processor time of a test
                    link.send(json.dumps({"cpu": children_cpu}).encode())
                    link.close()
                    continue
                differs = sorted(set(_startup_env(request["env"]).items()) ^ set(startup.items()))
                if len(fds) != 3 or differs:
                    link.send(json.dumps({"direct": [k for k, _ in differs]}).encode())
                    link.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    # closed by their objects, which would otherwise close the numbers again when collected
                    for held in (selector, listener, link, *(c.link for c in children.values())):
                        held.close()
                    for pidfd in by_pidfd:
                        os.close(pidfd)
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                    for fd in set(fds) - {0, 1, 2}:
                        os.close(fd)
                    request["base_path"] = base_path
                    return request
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                child = _Child(pid, link)
                children[link.fileno()] = child
                by_pidfd[pidfd] = child
                selector.register(link, selectors.EVENT_READ, "client")
                selector.register(pidfd, selectors.EVENT_READ, "ended")
                link.send(json.dumps({"pid": pid}).encode())
            elif what == "client":
                child = children[key.fd]
                try:
                    message = child.link.recv(_MAX_MESSAGE)
                except OSError:
                    message = b""
                if message:
                    os.kill(child.pid, json.loads(message)["signal"])
                else:  # the client was killed: so is its child, as the process the test started would be
                    os.kill(child.pid, signal.SIGKILL)
                    selector.unregister(key.fd)
            elif what == "ended":
                child = by_pidfd.pop(key.fd)
                _, status, usage = os.wait4(child.pid, 0)
                children_cpu += usage.ru_utime + usage.ru_stime
                selector.unregister(key.fd)
                os.close(key.fd)
                if children.pop(child.link.fileno(), None) is not None:
                    try:
                        selector.unregister(child.link)
                    except (KeyError, ValueError):
                        pass
                    code = os.waitstatus_to_exitcode(status)
                    try:
                        child.link.send(json.dumps({"exit": code} if code >= 0 else {"killed": -code}).encode())
                    except OSError:
                        pass
                child.link.close()


def become_pytest(request: dict) -> None:
    """In the fork: ``python -m pytest ARGS`` as a fresh interpreter would run it in the request's place."""
    import runpy
    import tempfile

    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None
    # as a start builds it: PYTHONPATH's entries made absolute, then the interpreter's own, each once (site's
    # removeduppaths), and the working directory in front of them all (-m)
    pythonpath = [os.path.abspath(p) for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request["cwd"], *dict.fromkeys([*pythonpath, *request["base_path"]])]
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.argv[:] = ["-m", *request["argv"]]
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
        forked = serve(sys.argv[2])
        if forked is not None:
            become_pytest(forked)
    else:
        client(sys.argv[1:])

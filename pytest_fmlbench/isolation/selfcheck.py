"""Before a run's first step: does the sandbox show what an experiment needs?

An experiment needs its interpreter (at the path the command names, symlinks and all), this package
(experiments import its evalkit), its workspace and its ``{out}`` folder. When one of them is missing
inside, every step would fail with an error deep in a log; this probe turns that into one line that
names the path and what to do, before any step runs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]

# runs inside the sandbox with the interpreter an experiment gets; prints one JSON line of problems
_PROBE = """
import json, os, sys
problems = []
# found, not imported: importing evalkit would load numpy and pydantic in every run's probe (a quarter
# second of processor time each); what goes missing in a sandbox is the package's folder, which this finds
try:
    import importlib.util
    if importlib.util.find_spec("pytest_fmlbench.evalkit") is None:
        problems.append(["package", "pytest_fmlbench has no evalkit module"])
except Exception as exc:
    problems.append(["package", f"{type(exc).__name__}: {exc}"])
for name, path in (("workspace", sys.argv[1]), ("out", sys.argv[2])):
    if not os.path.isdir(path):
        problems.append([name, "not visible"])
    elif not os.access(path, os.W_OK):
        problems.append([name, "not writable"])
print(json.dumps(problems))
"""


def probe_argv(workspace: Path, out: Path, python: str = sys.executable) -> list[str]:
    return [python, "-c", _PROBE, str(workspace), str(out)]


def problem(returncode: int | None, output: str, workspace: Path, out: Path, python: str = sys.executable) -> str | None:
    """The one-line problem the probe's run reveals, or None when the sandbox shows everything."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if returncode == 0 and lines:
        try:
            found = json.loads(lines[-1])
        except ValueError:
            found = None
        if found == []:
            return None
        if isinstance(found, list) and found:
            what, why = found[0]
            if what == "package":
                return (f"inside the sandbox the experiment cannot import pytest_fmlbench from {PACKAGE_DIR} ({why}); "
                        "install the package into the interpreter's environment (pip install -e .) rather than "
                        "putting it on PYTHONPATH, or pass --no-sandbox (results are then marked 'unsandboxed')")
            path = workspace if what == "workspace" else out
            return (f"the sandbox shows the experiment's {what} folder {path} as {why} (real path "
                    f"{os.path.realpath(path)}); put --fmlbench-out on a filesystem bubblewrap can bind (a local "
                    "disk or a shared one the user can read and write), or pass --no-sandbox")
    tail = lines[-1] if lines else f"exit code {returncode}, no output"
    real_prefix = os.path.realpath(sys.prefix)
    where = python if real_prefix == sys.prefix else f"{python} (its environment {sys.prefix} is {real_prefix})"
    return (f"the sandbox cannot start the experiment's interpreter {where}: {tail}; the interpreter and its "
            "environment must lie outside the task, run and output folders (a virtualenv, or a symlink to one, "
            "anywhere else works), or pass --no-sandbox (results are then marked 'unsandboxed')")

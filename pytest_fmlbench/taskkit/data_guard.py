"""A tripwire for the experiment's own process: once train.py has read the data, the method's code
may not open the data files itself (it gets its data from train.py, as the protocol says). Protected;
the workspaces of the tasks whose train.py seals its data receive a copy of
``pytest_fmlbench.taskkit.data_guard`` as data_guard.py.

It uses a Python audit hook (PEP 578), which cannot be removed once added. It stops the plain ways
of reading a file from Python (open, io.open, os.open, numpy.load, ...); it is not a sandbox, and the
task's rules still apply to anything it does not see.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class ProtocolError(PermissionError):
    pass


def seal(paths: list[Path]) -> None:
    """Refuse, from now on, to open any of ``paths`` (files, or folders and everything under them)."""
    sealed = tuple(os.path.realpath(p) for p in paths)

    def hook(event: str, args: tuple) -> None:
        if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.path.realpath(os.fsdecode(args[0]))
        for s in sealed:
            if path == s or path.startswith(s + os.sep):
                raise ProtocolError(f"protocol: {path} is read by train.py only; the method gets its data "
                                    "through the interface train.py calls")

    sys.addaudithook(hook)

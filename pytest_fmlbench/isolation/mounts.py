"""What an experiment sees: an allowlist of read-only system paths plus its workspace and ``{out}``.

Everything not named here is absent inside the sandbox: run records, task sources, the harness and
its private data, other runs, the user's home, ``/run``, the host's ``/tmp``, ``/dev/shm`` and
``/var/tmp``.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

# system trees an interpreter and its native libraries need, read-only
SYSTEM_TREES = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt/conda")
# single files and folders of /etc that libraries read; the rest of /etc (credentials, service
# configuration) stays hidden
ETC_ALLOW = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "localtime",
    "timezone", "hosts", "host.conf", "ssl", "ca-certificates", "ca-certificates.conf", "pki",
    "alternatives", "os-release", "mime.types", "fonts", "gai.conf", "protocols", "services",
)
SANDBOX_HOME = "/home/fmlbench"


@lru_cache(maxsize=1)
def python_paths() -> tuple[str, ...]:
    """Interpreter prefixes and every import location of this environment, read-only inside."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.realpath(sys.executable))}
    candidates.update(sysconfig.get_paths().values())
    candidates.update(site.getsitepackages())
    # this package (experiments import its evalkit), wherever an editable install keeps it; other
    # sys.path entries (the working directory, the checkout, PYTHONPATH) are the user's, not the
    # interpreter's, and stay hidden
    candidates.add(str(Path(__file__).resolve().parents[1]))
    existing = {os.path.realpath(p) for p in candidates if p and os.path.exists(p)}
    # a folder inside another bound folder needs no bind of its own
    kept = sorted(existing)
    return tuple(p for p in kept if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in kept))


def system_binds() -> list[str]:
    args: list[str] = []
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            args += ["--symlink", os.readlink(tree), tree]
        elif os.path.isdir(tree):
            args += ["--ro-bind", tree, tree]
    for name in ETC_ALLOW:
        path = f"/etc/{name}"
        if os.path.lexists(path):
            args += ["--ro-bind-try", path, path]
    return args


def python_binds(hidden: list[Path]) -> list[str]:
    """Read-only binds of the interpreter's trees, except those that would expose a hidden path."""
    args: list[str] = []
    hidden_real = [os.path.realpath(h) for h in hidden]
    for path in python_paths():
        if path in ("/", "/usr") or path.startswith("/usr/"):
            continue
        if any(h == path or h.startswith(path.rstrip("/") + "/") for h in hidden_real):
            # e.g. a sys.path entry that is the project checkout itself: binding it would show the tasks
            continue
        args += ["--ro-bind", path, path]
    return args


def gpu_binds(device_minors: list[int]) -> list[str]:
    """The NVIDIA control nodes plus the assigned GPUs' nodes; /sys read-only for the driver's queries."""
    if not device_minors:
        return []
    args: list[str] = []
    for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"):
        if os.path.exists(node):
            args += ["--dev-bind", node, node]
    for minor in device_minors:
        node = f"/dev/nvidia{minor}"
        if os.path.exists(node):
            args += ["--dev-bind", node, node]
    for path in ("/sys", "/run/nvidia-persistenced"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args

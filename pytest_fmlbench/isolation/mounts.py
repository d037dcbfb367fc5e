"""What an experiment sees: an allowlist of read-only system paths plus its workspace and ``{out}``.

Everything not named here is absent inside the sandbox: run records, task sources, the harness and
its private data, other runs, the user's home, ``/run``, the host's ``/tmp``, ``/dev/shm`` and
``/var/tmp``.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

from . import gpu

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
def _interpreter_locations() -> tuple[str, ...]:
    """Where this interpreter imports from, as the paths are spelt (symlinks unresolved).

    Besides the prefixes and site-packages, the folders a clean start of the interpreter puts on its
    path (``.pth`` files of its site-packages: another environment layered under this one, a source
    checkout installed in development mode). Other sys.path entries (the working directory, the
    checkout, PYTHONPATH) are the user's, not the interpreter's, and stay hidden.
    """
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
    candidates.update(sysconfig.get_paths().values())
    candidates.update(site.getsitepackages())
    candidates.update(_clean_sys_path())
    # this package (experiments import its evalkit), wherever an editable install keeps it
    candidates.add(str(Path(__file__).absolute().parents[1]))
    return tuple(sorted(p for p in candidates if p and os.path.isabs(p) and os.path.exists(p)))


def _clean_sys_path() -> list[str]:
    """sys.path of this interpreter started with no user site, no PYTHON* variables, from ``/``."""
    probe = "import json, sys; print(json.dumps(sys.path[1:]))"
    try:
        done = subprocess.run([sys.executable, "-s", "-E", "-c", probe], capture_output=True, text=True,
                              cwd="/", timeout=60)
        return [p for p in json.loads(done.stdout) if isinstance(p, str)] if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []


def _outermost(paths) -> tuple[str, ...]:
    kept = sorted(set(paths))
    return tuple(p for p in kept if not any(p != q and _under(p, q) for q in kept))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@lru_cache(maxsize=1)
def python_paths() -> tuple[str, ...]:
    """Interpreter prefixes and every import location of this environment (real paths), read-only inside."""
    return _outermost(os.path.realpath(p) for p in _interpreter_locations())


@lru_cache(maxsize=1)
def python_aliases() -> tuple[tuple[str, str], ...]:
    """(path as spelt, real path) for the interpreter's locations reached through a symlink.

    A virtualenv, checkout or output folder that is a symlink (``.venv -> /scratch/venvs/x``) is used
    under its spelt path (``sys.executable`` is ``.venv/bin/python``): inside the sandbox that path
    must lead to the same files, or the experiment cannot even start its interpreter.
    """
    real_trees = python_paths()
    aliases: dict[str, str] = {}
    for spelt in sorted(_interpreter_locations()):
        real = os.path.realpath(spelt)
        if spelt == real or any(_under(spelt, tree) for tree in real_trees):
            continue  # the host's own view of a bound tree, symlinks included, is what the sandbox shows
        if any(_under(spelt, a) and real == os.path.join(r, os.path.relpath(spelt, a)) for a, r in aliases.items()):
            continue  # inside an alias already bound, at the place it resolves to
        aliases[spelt] = real
    return tuple(aliases.items())


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
    """Read-only binds of the interpreter's trees, except those that would expose a hidden path.

    Each tree is bound at its real path, and again at every symlinked spelling the interpreter uses.
    """
    args: list[str] = []
    hidden_real = [os.path.realpath(h) for h in hidden]

    def exposes_hidden(real: str) -> bool:
        # e.g. a sys.path entry that is the project checkout itself: binding it would show the tasks
        return any(_under(h, real) for h in hidden_real)

    for path in python_paths():
        if path in ("/", "/usr") or path.startswith("/usr/") or exposes_hidden(path):
            continue
        args += ["--ro-bind", path, path]
    for spelt, real in python_aliases():
        if not exposes_hidden(real):
            args += ["--ro-bind", real, spelt]
    return args


def gpu_binds(device_minors: list[int]) -> list[str]:
    """The assigned GPUs' nodes and the driver's shared ones (see ``gpu.CONTROL_NODES``), each where it exists
    on the host; /sys read-only for the driver's queries.

    Only the assigned GPUs' ``/dev/nvidiaN`` are bound, so CUDA inside sees exactly them, numbered from 0
    (the experiment names them by UUID: ``gpu.cuda_ids``). ``/dev/nvidia-uvm`` only appears on the first CUDA
    use on the host: it is created first (``gpu.load_uvm``); when it still is not there the in-sandbox GPU
    check names it.
    """
    if not device_minors:
        return []
    gpu.load_uvm()
    dev = gpu.DEV_ROOT
    args: list[str] = []
    for name in (*gpu.CONTROL_NODES, *(f"nvidia{minor}" for minor in device_minors)):
        if (dev / name).exists():
            args += ["--dev-bind", str(dev / name), f"/dev/{name}"]
    for path in ("/sys", "/run/nvidia-persistenced"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args

"""Isolation of agent-written code: every experiment runs in a bubblewrap sandbox by default.

Inside, the experiment sees the interpreter, its libraries and the system read-only, its workspace
(editable files writable, protected files read-only) and its ``{out}`` folder, and a private, empty
``/tmp`` and ``$HOME``. Data sets that ship inside installed packages (the task's declared sources
and the ``package_data`` defaults) cannot be read there. It has no network, its own PID namespace
(the harness is invisible and cannot be signalled; everything it starts dies with the step), no
capabilities, no secrets, and a memory and a process limit that end the step, never the harness. See
``mounts`` for the allowlist, ``package_data`` for the masked data and ``limits`` for the limits.
Where this cannot be set up, items error before any step unless the user opts out with
``--no-sandbox``, and such runs are marked ``unsandboxed`` everywhere (and see the bundled data).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import hardening, limits, mounts, package_data
from .gpu import device_minors
from .limits import LimitSpec, LimitsUnavailable

SANDBOXED = "bwrap"
UNSANDBOXED = "unsandboxed"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) and "
    "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0), "
    "or pass --no-sandbox to run experiments unisolated (results are then marked 'unsandboxed')"
)


class SandboxUnavailable(RuntimeError):
    """Isolation cannot be set up here; the message is one line that says how to fix it."""


@dataclass(frozen=True)
class ExperimentView:
    """What one experiment may see and write."""

    workspace: Path
    out: Path
    read_only: list[Path]       # protected files and folders inside the workspace
    hidden: list[Path]          # paths that must stay invisible even if an allowed tree contains them
    gpus: tuple[str, ...] = ()
    hide_data: tuple[str, ...] = ()  # package resources ('sklearn:datasets/data/digits.csv.gz') the task's data comes from


@dataclass(frozen=True)
class Bind:
    """A host path shown at another path inside a sandbox."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class AgentView:
    """What an agent's own process may see: its code, read-only, and nothing of any run."""

    code: list[Path]            # the agent's own files and folders
    hidden: list[Path]          # paths that must stay invisible even if an allowed tree contains them
    hide_data: tuple[str, ...] = ()
    # what the harness lends the agent (a working copy of the workspace, its gateway's socket folder), in
    # order: a read-only bind after a writable one covers part of it
    lent: tuple[Bind, ...] = ()


def bwrap_argv(view: ExperimentView, argv: list[str]) -> list[str]:
    """``argv`` wrapped in bubblewrap with the allowlisted view of the machine.

    Raises SandboxUnavailable when a declared data resource cannot be found: its data may have moved
    where no mask covers it.
    """
    masks = _data_masks(view.hide_data)
    args = [*_base_args(view.hidden), *mounts.gpu_binds(device_minors(view.gpus)),
            "--bind", str(view.workspace), str(view.workspace)]
    for path in view.read_only:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(view.out), str(view.out)]
    # last, so that no later bind of a tree shows the data again
    args += masks.binds()
    # nothing outside the binds above can be created or changed, not even in the sandbox's own root
    args += ["--remount-ro", "/", "--chdir", str(view.workspace), "--"]
    return args + argv


def agent_argv(view: AgentView, argv: list[str], hardened: hardening.AgentHardening | None) -> list[str]:
    """``argv`` (an agent's process) in bubblewrap: the experiments' allowlist, minus any workspace or
    ``{out}``, plus the agent's code read-only; its only writable places are its private ``/tmp`` and home,
    and what the harness lent it writable (a working copy). ``hardened`` (see ``hardening``; None: none)
    adds no new user namespaces, a seccomp filter and not uid 0 inside, where this machine allows each."""
    masks = _data_masks(view.hide_data)
    args = _base_args(view.hidden)
    for path in view.code:
        args += ["--ro-bind", str(path), str(path)]
    for bind in view.lent:
        args += ["--bind" if bind.writable else "--ro-bind", str(bind.source), bind.target]
    args += masks.binds()
    # after the system's binds: its passwd and group files cover the machine's
    args += hardened.args if hardened is not None else []
    args += ["--remount-ro", "/", "--chdir", mounts.SANDBOX_HOME, "--"]
    return args + argv


def _data_masks(hide_data: tuple[str, ...]) -> package_data.Masks:
    try:
        return package_data.masks(hide_data)
    except package_data.ResourceError as exc:
        raise SandboxUnavailable(f"the task's data cannot be hidden from the experiment: {exc}") from None


def _base_args(hidden: list[Path]) -> list[str]:
    """No network, no capabilities, its own PID namespace, the system and the interpreter read-only."""
    return [
        "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        # the private scratch folders first: a later bind (an interpreter or a checkout that lives
        # under /tmp) must not be covered by them
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm",
        "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", mounts.SANDBOX_HOME,
        *mounts.system_binds(),
        *mounts.python_binds(hidden),
    ]


# Variables an experiment may inherit; everything else (keys, tokens, database URLs, whatever a user
# keeps in the environment under any name) stays outside. Allowlist, not denylist: a secret's name
# cannot be guessed.
# which instruction set the numeric libraries' kernels use: their rounding differs from one to the next, so a
# user who pins them (to compare numbers across machines) must pin them in the experiments too, and a session
# records them beside the CPU's own extensions (reports.provenance.instruction_set)
KERNEL_PINS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
               "NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE")
_ENV_ALLOW = {
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
    "PYTHONWARNINGS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUBLAS_WORKSPACE_CONFIG",
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM",
    "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    *KERNEL_PINS,
}
_ENV_ALLOW_PREFIXES = ("LC_", "FMLBENCH_EXPERIMENT_")


def sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The experiment's environment inside the sandbox: allowlisted variables, a private home, no user site."""
    env = {name: value for name, value in env.items() if name in _ENV_ALLOW or name.startswith(_ENV_ALLOW_PREFIXES)}
    # the harness's own copy of this package (bound read-only at the same path) is the one experiments
    # import, whichever checkout or install the harness runs from
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env.update(HOME=mounts.SANDBOX_HOME, TMPDIR="/tmp", PYTHONNOUSERSITE="1",
               XDG_CACHE_HOME=f"{mounts.SANDBOX_HOME}/.cache", MPLCONFIGDIR=f"{mounts.SANDBOX_HOME}/.matplotlib")
    return env


@lru_cache(maxsize=1)
def check_available() -> str:
    """Run a trivial command in the full sandbox once per process; returns the limits backend.

    Raises SandboxUnavailable with one line naming the fix.
    """
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(f"experiments run in a bubblewrap sandbox, but bwrap is not on PATH: {INSTALL_HINT}")
    try:
        backend = limits.backend()
    except LimitsUnavailable as exc:
        raise SandboxUnavailable(f"{exc} (or pass --no-sandbox; results are then marked 'unsandboxed')") from None
    with tempfile.TemporaryDirectory(prefix="fmlbench-probe-") as tmp:
        workspace, out = Path(tmp) / "workspace", Path(tmp) / "out"
        workspace.mkdir()
        out.mkdir()
        view = ExperimentView(workspace, out, [], [])
        probe = bwrap_argv(view, [os.path.realpath(_python()), "-c", "import sys"])
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=60, env=sandbox_env(dict(os.environ)))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap could not start a sandbox ({exc}): {INSTALL_HINT}") from None
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise SandboxUnavailable(f"bubblewrap could not start a sandbox ({reason}): {INSTALL_HINT}")
    return backend


def _python() -> str:
    import sys

    return sys.executable


def step_limits(memory_mb: int | None, max_processes: int, gpus: bool, deferred: bool = False) -> limits.StepGroup:
    """A step's control group (or rlimits); ``deferred``: made when a command first needs it (see
    ``limits.Deferred``), for a command that may come built ahead in a group of its own."""
    memory = memory_mb * (1 << 20) if memory_mb else limits.default_memory_bytes()
    spec = LimitSpec(memory, max_processes)
    return limits.Deferred(spec, gpus) if deferred else limits.create(spec, gpus=gpus)


__all__ = [
    "AgentView", "Bind", "ExperimentView", "agent_argv", "hardening", "SANDBOXED", "UNSANDBOXED", "SandboxUnavailable", "bwrap_argv", "check_available",
    "sandbox_env", "step_limits",
]

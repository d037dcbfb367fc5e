"""Where a session's numbers came from: library versions and the git commit of the task suite."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from ..isolation import KERNEL_PINS

# the libraries whose versions can change a number in the tables
KEY_LIBRARIES = ("pytest-fmlbench", "pytest", "pytest-xdist", "torch", "torchvision", "numpy", "pandas", "scipy",
                 "scikit-learn", "transformers", "pydantic", "openai", "anthropic", "genai-prices", "plotly")


def versions() -> dict[str, str | None]:
    """Python and each key library's installed version (None where it is not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in KEY_LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def run_git(folder: Path, *args: str) -> str | None:
    """``git -C folder args...``'s output, or None where git is missing or the command fails."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def suite_commit(folder: Path | None) -> tuple[str | None, bool | None]:
    """(HEAD commit, whether the suite folder has uncommitted changes) of the git checkout holding
    ``folder``; (None, None) when it is not in a git checkout or git is missing."""
    if folder is None or not Path(folder).is_dir():
        return None, None
    commit = run_git(Path(folder), "rev-parse", "--verify", "HEAD")
    if not commit:
        return None, None
    status = run_git(Path(folder), "status", "--porcelain", "--", ".")
    return commit, None if status is None else bool(status)


def common_folder(paths: list[Path]) -> Path | None:
    """The deepest folder holding every path (the suite of a set of task folders)."""
    if not paths:
        return None
    return Path(os.path.commonpath([str(Path(p).resolve()) for p in paths]))


# the CPU features whose kernels round differently (vector and matrix extensions, fused multiply-add), and the
# variables that pin the numeric libraries to a narrower set than the CPU has (experiments inherit them)
_KERNEL_FEATURES = ("sse", "ssse3", "avx", "fma", "f16c", "amx", "asimd", "sve", "neon", "fphp")


def instruction_set(cpuinfo: str | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The CPU's vector and matrix extensions (/proc/cpuinfo's flags, sorted) and, as ``NAME=value``, the
    variables that pin the kernels to fewer of them; [] where neither is known (no /proc/cpuinfo)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):
            flags.update(flag for flag in value.split() if flag.lower().startswith(_KERNEL_FEATURES))
            break  # every core of one machine lists the same
    env = os.environ if env is None else env
    return sorted(flags) + [f"{name}={env[name]}" for name in KERNEL_PINS if env.get(name)]

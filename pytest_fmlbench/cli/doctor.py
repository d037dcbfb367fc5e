"""``fmlbench doctor``: what this machine can run, in one screen, each problem one line with its fix.

The sandbox (bubblewrap, user namespaces, step limits, the self-check an item runs before its first step),
the GPUs as torch sees them inside the sandbox, the full profile's data, the coding tools, Slurm and the
LLM keys (their names only). Exit code 0 when the small profile can run here as it runs by default, in the
sandbox (bwrap on PATH, a sandbox starts with its step limits, the self-check sees the interpreter, this
package and the experiment's folders); 1 otherwise. Everything else is reported, never counted: a GPU, data,
tools, Slurm and keys are needed only by what uses them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.text import Text

from .. import devices, isolation
from ..datacache.artifact import Artifact, human_size
from ..datacache.cache import DataCache, default_root
from ..executor import run_command
from ..isolation import gpu, gpu_check, limits, selfcheck
from ..spec import TASK_FILE, Task, TaskSpecError, load_task

State = Literal["ok", "no", "FAIL"]
STYLES = {"ok": "green", "no": "yellow", "FAIL": "bold red"}
CODING_TOOLS = ("claude-code", "codex", "mini-swe-agent")
BWRAP_FIX = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


@dataclass(frozen=True)
class Line:
    """One line of the screen: ``FAIL`` lines are what the small profile needs, ``no`` lines what else lacks."""

    state: State
    check: str
    detail: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", type=Path, default=Path("task_suites"),
                        help="the task suite whose full-profile tasks' data is checked (default: task_suites)")
    parser.add_argument("--root", type=Path,
                        help="the data cache (default: $FMLBENCH_DATA, else ~/.cache/fmlbench/data)")


def sandbox_lines() -> tuple[list[Line], str | None]:
    """bubblewrap, user namespaces, step limits, a sandbox's start and its self-check (with the GPU probe
    when there are GPUs); also the self-check's output, for the GPU lines."""
    lines: list[Line] = []
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        lines.append(Line("FAIL", "bubblewrap", f"bwrap is not on PATH: {BWRAP_FIX}"))
    else:
        version = _first_line(["bwrap", "--version"])
        lines.append(Line("ok", "bubblewrap", f"{version or 'bwrap'} ({bwrap})"))
    lines.append(_user_namespaces())
    try:
        lines.append(Line("ok", "step limits", limits.backend()))
    except limits.LimitsUnavailable as exc:
        lines.append(Line("FAIL", "step limits", str(exc)))
        return lines, None  # an item does not start its sandbox without them either
    if bwrap is None:
        return lines, None
    try:
        isolation.check_available()
    except isolation.SandboxUnavailable as exc:
        lines.append(Line("FAIL", "sandbox start", str(exc)))
        return lines, None
    lines.append(Line("ok", "sandbox start", "bubblewrap starts a sandbox with no network, its own PID namespace"))
    found, output = _self_check()
    lines.append(Line("FAIL", "self-check", found) if found else
                 Line("ok", "self-check", "the sandbox shows the interpreter, pytest_fmlbench, a workspace and {out}"))
    return lines, output


def _user_namespaces() -> Line:
    for path, off, fix in (
            ("/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
            ("/proc/sys/kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1")):
        if _read(path) == off:
            return Line("FAIL", "user namespaces", f"{path} is {off}, so bwrap cannot make its namespaces: {fix}")
    limit = _read("/proc/sys/user/max_user_namespaces")
    # Ubuntu's restriction lets programs with an AppArmor profile (its bwrap has one) through: the sandbox's
    # start below says whether this bwrap is one of them
    restricted = _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1"
    return Line("ok", "user namespaces", (f"allowed (max {limit})" if limit else "allowed")
                + (", for programs AppArmor lets through" if restricted else ""))


def _self_check() -> tuple[str | None, str]:
    """The item's self-check in a sandbox of a scratch workspace, with every visible GPU and the GPU probe."""
    gpus = gpu.cuda_ids(devices.visible_gpus())
    with tempfile.TemporaryDirectory(prefix="fmlbench-doctor-") as tmp:
        workspace, out = Path(tmp) / "workspace", Path(tmp) / "out"
        workspace.mkdir()
        out.mkdir()
        probe = selfcheck.probe_argv(workspace, out)
        view = isolation.ExperimentView(workspace, out, [], [], gpus=gpus)
        argv = isolation.bwrap_argv(view, gpu_check.probe_argv(probe) if gpus else probe)
        env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus else {}))
        result = run_command(argv, cwd=workspace, env=isolation.sandbox_env(env), timeout_s=300,
                             log_path=Path(tmp) / "self_check.log")
        output = (Path(tmp) / "self_check.log").read_text(errors="replace")
        return selfcheck.problem(result.returncode, result.output_tail, workspace, out), output


def gpu_lines(sandbox_output: str | None) -> list[Line]:
    listed = gpu.inventory()
    if not listed:
        why = "nvidia-smi lists no GPU" if shutil.which("nvidia-smi") else "nvidia-smi is not on PATH"
        return [Line("no", "GPU", f"none ({why}): the full profile's GPU tasks need an NVIDIA GPU, its driver "
                     "and nvidia-smi; small tasks and --scale=smoke run on CPUs")]
    lines = [Line("ok", f"GPU {info.index}", f"{info.name}, {info.memory_mib or '?'} MiB, driver {info.driver or '?'}, "
                  f"{info.uuid}, {gpu.DEV_ROOT / info.node}") for info in listed]
    uuids = tuple(info.uuid for info in listed)
    lines += [Line("no", "device nodes", missing) for missing in gpu.missing_nodes(uuids)]
    if sandbox_output is None:
        return lines + [Line("no", "inside the sandbox", "not checked: the sandbox does not start (see above)")]
    view = gpu_check.parse(sandbox_output)
    unseen = gpu_check.problem(uuids, sandbox_output)
    if unseen:
        return lines + [Line("no", "inside the sandbox", unseen)]
    seen = ", ".join(f"{d.name} ({d.memory_mib} MiB)" for d in view.devices)
    driver = f", the driver's CUDA {view.driver_cuda}" if view.driver_cuda else ""
    return lines + [Line("ok", "inside the sandbox", f"torch {view.torch} (CUDA {view.cuda}{driver}) sees {seen}")]


def data_lines(suite: Path, root: Path) -> list[Line]:
    if not suite.is_dir():
        return [Line("no", "full tasks", f"no task suite at {suite}: run from the project's folder or pass --suite DIR")]
    tasks: list[Task] = []
    for path in sorted(suite.glob(f"*/full/{TASK_FILE}")):
        try:
            tasks.append(load_task(path))
        except TaskSpecError as exc:
            return [Line("no", "full tasks", f"{path}: {exc}")]
    cache = DataCache(root, "full")
    missing: dict[str, Artifact] = {}
    lines: list[Line] = []
    ready = []
    for task in tasks:
        absent = [a for a in task.spec.data if not _present(cache, a)]
        if absent:
            missing.update((a.name, a) for a in absent)
            lines.append(Line("no", task.id, f"missing {', '.join(a.name for a in absent)}: "
                              f"fmlbench data fetch -k {task.id}"))
        else:
            ready.append(task.id)
    without_gpu = [] if gpu.inventory() else [t.id for t in tasks if t.id in ready and t.spec.resources.gpus]
    head = Line("ok" if ready else "no", "full tasks",
                f"{len(ready)} of {len(tasks)} have their data in {root}" + (f": {', '.join(ready)}" if ready else "")
                + (f" ({len(without_gpu)} of them need a GPU, which this machine lacks)" if without_gpu else ""))
    if not missing:
        return [head]
    need = sum(a.size or 0 for a in missing.values())
    unknown = sum(1 for a in missing.values() if not a.size)
    free = shutil.disk_usage(_existing(root)).free
    what = f"{human_size(need)} to fetch" + (f" (and {unknown} more of unpublished size)" if unknown else "")
    disk = (Line("ok", "disk", f"{human_size(free)} free, {what}, plus each run's working copies") if free > need else
            Line("no", "disk", f"{human_size(free)} free, {what}: free space there, or set FMLBENCH_DATA to a "
                 "larger disk"))
    return [head, disk, *lines]


def _present(cache: DataCache, artifact: Artifact) -> bool:
    """Fetched and stamped, of the stamped size (not re-hashed: ``fmlbench data list`` does that)."""
    stamp = cache.read_stamp(artifact)
    path = cache.path(artifact)
    if stamp is None or not path.exists():
        return False
    return artifact.kind == "git" or stamp.get("size") in (None, path.stat().st_size)


def tool_lines() -> list[Line]:
    from ..agentkit.coding_tool import ToolError
    from ..agentkit.loading import AgentLoadError, load_builtin

    lines = []
    for name in CODING_TOOLS:
        try:
            lines.append(Line("ok", name, load_builtin(name)().find_binary()))
        except (ToolError, AgentLoadError) as exc:
            lines.append(Line("no", name, str(exc)))
    return lines


def slurm_lines() -> list[Line]:
    from ..slurm.cluster import SlurmUnreachable, partitions

    try:
        found = partitions()
    except SlurmUnreachable as exc:
        return [Line("no", "Slurm", f"{exc} (only --slurm needs it)")]
    return [Line("ok", "Slurm", f"sinfo answers; partitions: {', '.join(found) or 'none'}")]


def key_lines(suite: Path) -> list[Line]:
    """Which key variables are set, by name; a value is never read beyond whether it is empty."""
    from ..llm.providers import PROVIDERS

    names = list(dict.fromkeys(n for p in PROVIDERS.values() for n in p.key_env))
    tokens = set()
    for path in sorted(suite.glob(f"*/full/{TASK_FILE}")) if suite.is_dir() else []:
        try:
            tokens.update(a.token_env for a in load_task(path).spec.data if a.token_env)
        except TaskSpecError:
            pass
    present = [n for n in names if os.environ.get(n)]
    lines = [Line("ok", "LLM keys", "set: " + ", ".join(present)) if present else
             Line("no", "LLM keys", f"none set: LLM agents need one of {', '.join(names)} (or --provider local, "
                  "the embedded model)")]
    for token in sorted(tokens):
        lines.append(Line("ok", token, "set") if os.environ.get(token) else
                     Line("no", token, f"not set: the gated data that names it cannot be fetched; export {token}"))
    return lines


def _first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout.strip().splitlines() or [""])[0]


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    root = (args.root or default_root()).absolute()

    def section(title: str, lines: list[Line]) -> None:
        console.print(Text(title, style="bold"))
        for line in lines:
            # one line each, however narrow the terminal: a problem and its fix stay together
            console.print(Text.assemble("  ", (f"{line.state:4}", STYLES[line.state]), f" {line.check:18} ",
                                        line.detail), soft_wrap=True)

    console.print(Text(f"fmlbench doctor: what {os.uname().nodename} can run "
                       f"(python {sys.version.split()[0]}, {sys.prefix})", style="bold"), soft_wrap=True)
    sandbox, output = sandbox_lines()
    section("Sandbox (the small profile needs every line)", sandbox)
    section("GPUs", gpu_lines(output))
    section("Full-profile data", data_lines(args.suite, root))
    section("Coding tools", tool_lines())
    section("Cluster", slurm_lines())
    section("Keys (names only)", key_lines(args.suite))
    failed = [line for line in sandbox if line.state == "FAIL"]
    if failed:
        console.print(Text(f"small profile: cannot run sandboxed here; fix the {len(failed)} FAIL line(s) (or pass "
                           "--no-sandbox: results are then marked 'unsandboxed')", style="bold red"), soft_wrap=True)
        return 1
    console.print(Text("small profile: ready", style="bold green"), soft_wrap=True)
    return 0


COMMAND = ("doctor", "what this machine can run: sandbox, GPUs inside it, data, coding tools, Slurm, keys "
           "(exit 1 when the small profile cannot run sandboxed)", add_arguments, run)

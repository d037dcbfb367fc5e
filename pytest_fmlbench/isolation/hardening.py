"""Defence in depth in the agent's sandbox, on top of what every sandbox has (no network, no
capabilities, its own PID namespace, the allowlisted view of the machine).

Three measures, each on where bubblewrap and the kernel allow it:

* **no new user namespaces**: bubblewrap's ``--disable-userns`` (0.8 and later), so that nothing inside
  can make a namespace in which it holds capabilities again (and reach the kernel code behind many
  container escapes);
* **a seccomp filter** of the kind container runtimes apply by default (see ``seccomp``);
* **not uid 0 inside**: where the harness runs as root, the agent is uid ``SANDBOX_UID`` in its sandbox
  (``--uid``), named in a passwd and group file of three lines that the sandbox shows instead of the
  machine's. It still acts as the harness's user on the files it is lent (a user namespace maps one
  uid), so its working copy and ``/tmp`` stay writable; what changes is that nothing inside runs as
  root, whatever would treat root specially. A harness that is not root runs the agent as itself.

Which are on is found once per process by a probe sandbox that checks their effect from inside; a
measure that bubblewrap or the kernel refuses is left off, the sandbox runs with the others, and
``Measures.summary`` says which (the agent's log starts with it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from functools import lru_cache

from . import seccomp

SANDBOX_UID = SANDBOX_GID = 1000
SANDBOX_USER = "fmlbench"
_PASSWD = (f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
           f"{SANDBOX_USER}:x:{SANDBOX_UID}:{SANDBOX_GID}:{SANDBOX_USER}:/home/{SANDBOX_USER}:/bin/sh\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
_GROUP = f"root:x:0:\n{SANDBOX_USER}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"
_PROBE_TIMEOUT_S = 30

# runs inside the probe sandbox: the uid it has, its seccomp mode, whether a user namespace can be made
_PROBE = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
seen = {'uid': os.getuid(), 'seccomp': status.get('Seccomp', '').strip()}
# last: a namespace made changes the uid this process sees
seen['userns'] = libc.unshare(0x10000000) == 0
print(json.dumps(seen))
"""


@dataclass(frozen=True)
class Measures:
    """Which of the agent sandbox's extra measures are on, and why any is off."""

    no_user_namespaces: bool
    seccomp: bool
    remap_uid: bool             # uid SANDBOX_UID inside (the harness is root)
    off: tuple[str, ...] = ()   # "what: why" for each measure that is off

    @property
    def unprivileged(self) -> bool:
        """Not uid 0 inside: remapped, or the harness's own uid, which is not 0."""
        return self.remap_uid or os.getuid() != 0

    def summary(self) -> str:
        on = [name for name, is_on in (("no new user namespaces", self.no_user_namespaces),
                                       ("seccomp filter", self.seccomp),
                                       (f"uid {SANDBOX_UID if self.remap_uid else os.getuid()}", self.unprivileged))
              if is_on]
        text = ", ".join(on) or "no extra measures"
        return text + (f" (off: {'; '.join(self.off)})" if self.off else "")


_NAMES = {"no_user_namespaces": "no new user namespaces", "seccomp": "seccomp filter", "remap_uid": "uid"}


class AgentHardening:
    """The arguments and the file descriptors bubblewrap reads for one agent sandbox's extra measures.

    The descriptors (the filter, the passwd and group files) must reach bubblewrap (``pass_fds``) and be
    closed here once it has started (``close``).
    """

    def __init__(self, measures: Measures):
        self.measures = measures
        self.args, self._fds = _arguments(measures)

    @property
    def fds(self) -> tuple[int, ...]:
        return tuple(self._fds)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def prepare() -> AgentHardening:
    """This machine's measures, ready for one agent sandbox."""
    return AgentHardening(measures())


@lru_cache(maxsize=1)
def measures() -> Measures:
    """The measures bubblewrap and the kernel allow here, each checked from inside a probe sandbox."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Measures(False, False, False, ("all: bwrap is not on PATH",))
    try:
        usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        usage = ""
    off: list[str] = []
    machine = os.uname().machine
    if "--disable-userns" not in usage:
        off.append("no new user namespaces: this bubblewrap has no --disable-userns (0.8 or later has it)")
    if "--seccomp" not in usage:
        off.append("seccomp filter: this bubblewrap has no --seccomp")
    elif seccomp.program(machine) is None:
        off.append(f"seccomp filter: none for {machine}")
    root = os.getuid() == 0
    if root and "--uid" not in usage:
        off.append("uid: this bubblewrap has no --uid")
    wanted = Measures(no_user_namespaces="--disable-userns" in usage,
                      seccomp="--seccomp" in usage and seccomp.program(machine) is not None,
                      remap_uid=root and "--uid" in usage)
    if any(getattr(wanted, measure) for measure in _NAMES) and not _took(wanted, _probe(bwrap, wanted)):
        # one at a time: keep those the kernel allows, name those it refuses
        kept = {}
        for measure in _NAMES:
            alone = Measures(**{name: name == measure and getattr(wanted, name) for name in _NAMES})
            seen = _probe(bwrap, alone) if getattr(alone, measure) else None
            kept[measure] = seen is not None and _took(alone, seen)
            if getattr(alone, measure) and not kept[measure]:
                off.append(f"{_NAMES[measure]}: refused here ({_why(seen)})")
        wanted = Measures(**kept)
    return replace(wanted, off=tuple(off))


def _took(wanted: Measures, seen: dict | None) -> bool:
    """Whether the probe ran and saw every wanted measure in effect."""
    return seen is not None and ((not wanted.no_user_namespaces or not seen["userns"])
                                 and (not wanted.seccomp or seen["seccomp"] == "2")
                                 and (not wanted.remap_uid or seen["uid"] == SANDBOX_UID))


def _why(result: dict | None) -> str:
    if isinstance(result, dict):
        return f"inside: uid {result['uid']}, seccomp mode {result['seccomp']}, user namespace made: {result['userns']}"
    return "bubblewrap did not start"


def _probe(bwrap: str, wanted: Measures) -> dict | None:
    args, fds = _arguments(wanted)
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", *args, "--", sys.executable, "-I", "-S", "-c", _PROBE]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, pass_fds=fds,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _arguments(wanted: Measures) -> tuple[list[str], list[int]]:
    args: list[str] = []
    fds: list[int] = []

    def data(content: bytes) -> str:
        fd = os.memfd_create("fmlbench-agent-sandbox")
        fds.append(fd)
        os.write(fd, content)
        os.lseek(fd, 0, os.SEEK_SET)
        return str(fd)

    try:
        if wanted.no_user_namespaces:
            args += ["--unshare-user", "--disable-userns"]
        if wanted.seccomp:
            args += ["--seccomp", data(seccomp.program(os.uname().machine) or b"")]
        if wanted.remap_uid:
            args += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
                     "--ro-bind-data", data(_PASSWD.encode()), "/etc/passwd",
                     "--ro-bind-data", data(_GROUP.encode()), "/etc/group"]
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds

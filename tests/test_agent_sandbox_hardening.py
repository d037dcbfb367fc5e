"""Defence in depth in the agent's sandbox: no new user namespaces, a seccomp filter of the kind container
runtimes apply by default, and not uid 0 inside, each where bubblewrap and the kernel allow it.

The filter is checked on its own (loaded into a forked process here), its call numbers against the
kernel's headers, and the whole sandbox through the bring-your-own-agent interface: an agent that tries to
make a user namespace (and mount in it), trace, use the kernel's keyring, and then does its honest work.
Where this bubblewrap or kernel lacks a measure, the sandbox runs with the others and says which are on.
"""

import ctypes
import errno
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_record

from pytest_fmlbench import isolation
from pytest_fmlbench.isolation import hardening, seccomp

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
MACHINE = os.uname().machine
covered = pytest.mark.skipif(MACHINE not in seccomp.AUDIT_ARCH, reason=f"no filter for {MACHINE}")

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17


def _verdict(machine: str, name: str | int, *args: int, arch: int | None = None) -> str:
    """What the filter for ``machine`` answers a call, run by a classic BPF interpreter of the few instructions
    it uses: every call on either machine, without making one (a call let through by mistake could, as root,
    rename or reboot this machine)."""
    number = seccomp.call_number(name, machine) if isinstance(name, str) else name
    words = [*args, *[0] * (6 - len(args))]
    data = struct.pack("<iIQ6Q", number, seccomp.AUDIT_ARCH[machine] if arch is None else arch, 0,
                       *[w & (2**64 - 1) for w in words])
    program = list(struct.iter_unpack("=HBBI", seccomp.program(machine)))
    pc = accumulator = 0
    while True:
        op, jump_true, jump_false, k = program[pc]
        if op == 0x06:
            return {0x7FFF0000: "allow"}.get(k) or errno.errorcode[k - 0x00050000]
        if op == 0x20:
            accumulator, pc = struct.unpack_from("<I", data, k)[0], pc + 1
            continue
        taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[op]
        pc += 1 + (jump_true if taken else jump_false)


@pytest.mark.parametrize("machine", sorted(seccomp.AUDIT_ARCH))
def test_the_filter_refuses_what_container_runtimes_refuse_with_eperm(machine):
    refused = seccomp.refused_numbers(machine)
    assert {"mount", "unshare", "setns", "ptrace", "keyctl", "bpf", "userfaultfd", "io_uring_setup"} <= set(refused)
    assert {name: _verdict(machine, name) for name in refused} == dict.fromkeys(refused, "EPERM")
    # what every program needs passes: read, write, openat, mmap, futex, exit_group, on both machines
    everyday = {"x86_64": (0, 1, 257, 9, 202, 231), "aarch64": (63, 64, 56, 222, 98, 94)}[machine]
    assert [_verdict(machine, number) for number in everyday] == ["allow"] * 6


@pytest.mark.parametrize("machine", sorted(seccomp.AUDIT_ARCH))
def test_the_filter_reads_the_arguments_of_clone_socket_and_personality(machine):
    assert _verdict(machine, "clone", CLONE_NEWUSER | SIGCHLD) == "EPERM"
    assert _verdict(machine, "clone", CLONE_NEWNS | SIGCHLD) == "EPERM"
    assert _verdict(machine, "clone", 0x3D0F00) == "allow"  # what pthread_create passes
    assert _verdict(machine, "clone3") == "ENOSYS"  # flags out of reach: the C library falls back to clone
    assert _verdict(machine, "socket", seccomp.AF_VSOCK, 1, 0) == "EPERM"
    assert _verdict(machine, "socket", 1, 1, 0) == "allow"
    assert _verdict(machine, "personality", 0x0040000) == "EPERM"  # ADDR_NO_RANDOMIZE
    assert [_verdict(machine, "personality", p) for p in seccomp.HARMLESS_PERSONALITIES] == ["allow"] * 5


def test_calls_of_another_abi_are_refused_whole():
    assert _verdict("x86_64", 39) == "allow"  # getpid
    assert _verdict("x86_64", 39 | 0x40000000) == "EPERM"  # x32
    assert _verdict("x86_64", 20, arch=0x40000003) == "EPERM"  # getpid of i386 (int 0x80)
    assert _verdict("aarch64", 172, arch=0x40000028) == "EPERM"  # 32-bit ARM


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _under_filter(calls: list[tuple]) -> list[str]:
    """Each (name, *args) called in a fork of this process that has loaded the filter: 'ok' or the errno's name.
    Only calls that do no harm here if the filter let them through."""
    code = seccomp.program(MACHINE)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            buffer = ctypes.create_string_buffer(code, len(code))
            program = _Program(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
                os._exit(3)
            seen = []
            for name, *args in calls:
                number = seccomp.call_number(name, MACHINE) if isinstance(name, str) else name
                result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
                if result == 0 and name == "clone":
                    os._exit(0)  # the clone's child
                if result > 0 and name == "clone":
                    os.waitpid(result, 0)
                seen.append("ok" if result >= 0 else errno.errorcode[ctypes.get_errno()])
            os.write(writer, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        out = pipe.read()
    os.waitpid(child, 0)
    return json.loads(out)


@covered
def test_the_kernel_takes_the_filter_and_answers_as_it_says():
    seen = _under_filter([
        ("unshare", CLONE_NEWUSER), ("clone", CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), ("clone", SIGCHLD, 0, 0, 0, 0),
        ("clone3", 0, 0), ("mount", 0, 0, 0, 0, 0), ("ptrace", 0, 0, 0, 0), ("keyctl", 0, -3, 0, 0, 0),
        ("socket", seccomp.AF_VSOCK, 1, 0), ("personality", 0xFFFFFFFF),
    ])
    assert seen == ["EPERM", "EPERM", "ok", "ENOSYS", "EPERM", "EPERM", "EPERM", "EPERM", "ok"]


@pytest.mark.parametrize(("machine", "header", "pattern"), [
    ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"#define __NR_(\w+)\s+(\d+)"),
    ("aarch64", "/usr/include/asm-generic/unistd.h", r"#define __NR(?:3264)?_(\w+)\s+(\d+)"),
])
def test_the_call_numbers_are_the_kernels(machine, header, pattern):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    kernel = {name: int(number) for name, number in re.findall(pattern, Path(header).read_text())}
    ours = {**seccomp.refused_numbers(machine),
            **{name: seccomp.call_number(name, machine) for name in ("clone", "clone3", "socket", "personality")}}
    known = {name: number for name, number in ours.items() if name in kernel}  # newer calls than the header
    assert known == {name: kernel[name] for name in known}
    assert len(known) > len(ours) - 3


def test_no_filter_for_a_machine_it_does_not_know():
    assert seccomp.program("riscv64") is None


# -- the whole sandbox --------------------------------------------------------------------------------------

@pytest.fixture
def fresh_measures():
    hardening.measures.cache_clear()
    yield
    hardening.measures.cache_clear()


def _fake_bwrap(folder: Path, hide_flags: tuple[str, ...] = (), refuse_flag: str = "") -> None:
    """A bwrap on PATH whose --help lacks ``hide_flags`` and that fails when given ``refuse_flag``: an older
    bubblewrap, or a kernel that refuses one measure."""
    real = shutil.which("bwrap")
    script = folder / "bwrap"
    hidden = "|".join(hide_flags) or "^$"
    script.write_text(f"""#!/bin/sh
if [ "$1" = --help ]; then {real} --help | grep -vE -- '{hidden}'; exit 0; fi
for arg in "$@"; do [ "$arg" = '{refuse_flag or "--never"}' ] && {{ echo 'bwrap: refused' >&2; exit 1; }}; done
exec {real} "$@"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _in_agent_sandbox(code: str) -> dict:
    hardened = hardening.prepare()
    try:
        argv = isolation.agent_argv(isolation.AgentView(code=[], hidden=[]), [sys.executable, "-c", code], hardened)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, pass_fds=hardened.fds,
                              env=isolation.sandbox_env({"PATH": os.environ["PATH"]}))
    finally:
        hardened.close()
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


_STATE = """
import json, os
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
open('/tmp/scratch', 'w').write('x')
fds = sorted(os.listdir("/proc/self/fd"))
print(json.dumps({"uid": os.getuid(), "seccomp": status["Seccomp"].strip(), "fds": fds}))
"""


@needs_bwrap
@pytest.mark.skipif(os.getuid() != 0, reason="the uid is remapped only for a harness that runs as root")
@pytest.mark.parametrize(("hide", "refuse", "on", "off"), [
    ((), "", "no new user namespaces, seccomp filter, uid 1000", ""),
    (("--disable-userns", "--seccomp"), "", "uid 1000",
     "no new user namespaces: this bubblewrap has no --disable-userns (0.8 or later has it); "
     "seccomp filter: this bubblewrap has no --seccomp"),
    ((), "--seccomp", "no new user namespaces, uid 1000", "seccomp filter: refused here (bubblewrap did not start)"),
], ids=["all", "old-bubblewrap", "kernel-refuses-seccomp"])
def test_each_measure_is_on_where_bubblewrap_allows_it_and_the_sandbox_says_which(tmp_path, monkeypatch, fresh_measures,
                                                                                  hide, refuse, on, off):
    if hide or refuse:
        _fake_bwrap(tmp_path, hide, refuse)
        monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    measures = hardening.measures()
    assert measures.summary() == on + (f" (off: {off})" if off else "")
    inside = _in_agent_sandbox(_STATE)
    assert inside["uid"] == hardening.SANDBOX_UID
    assert inside["seccomp"] == ("2" if measures.seccomp else "0")
    assert inside["fds"] == ["0", "1", "2", "3"]  # the filter's and the passwd's descriptors stay outside


HOSTILE_AGENT = """
import ctypes, errno, os, subprocess
from pytest_fmlbench import Agent

libc = ctypes.CDLL(None, use_errno=True)


def attempt(call):
    # in a fork: a namespace made would change this process for what follows
    child = os.fork()
    if child == 0:
        os._exit(0 if call() == 0 else ctypes.get_errno())
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    return 'made' if code == 0 else errno.errorcode.get(code, str(code))


def mount_in_a_namespace_of_its_own():
    if libc.unshare(0x10000000 | 0x00020000) != 0:
        return -1
    return libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)


class MyAgent(Agent):
    def run(self, session):
        probes = {
            'user namespace': lambda: libc.unshare(0x10000000),
            'mount in its own namespace': mount_in_a_namespace_of_its_own,
            'mount': lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None),
            'ptrace': lambda: libc.ptrace(0, 0, None, None),                      # PTRACE_TRACEME
            'keyring': lambda: libc.syscall(KEYCTL, 0, -3, 1, 0, 0),             # the session keyring's id
        }
        for name, call in probes.items():
            print('PROBE', name + ':', attempt(call), flush=True)
        tool = subprocess.run(['unshare', '--user', '--map-root-user', 'true'], capture_output=True, text=True)
        print('PROBE unshare tool:', tool.returncode, tool.stderr.strip(), flush=True)
        print('PROBE uid:', os.getuid(), os.geteuid(), flush=True)
        open('/tmp/notes.txt', 'w').write('scratch')
        open(os.path.expanduser('~/notes.txt'), 'w').write('home')
        result = session.run_step('baseline', plan='honest step after the probes')
        print('PROBE step:', result.success, result.metric, flush=True)
"""


@needs_bwrap
@covered
def test_an_agent_cannot_make_a_namespace_mount_trace_or_use_the_keyring_and_is_not_root(pytester, toy, bench,
                                                                                          write_agent):
    spec = write_agent(HOSTILE_AGENT.replace("KEYCTL", str(250 if MACHINE == "x86_64" else 219)))
    bench(f"--agent={spec}", "--steps=1", "toy_task").assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["status"] == "finished" and record["agent_process"] == "bwrap"
    assert record["test_metric"] == pytest.approx(0.72)
    (run,) = (pytester.path / "reports" / "fmlbench" / "runs" / "toy_task").iterdir()
    log = "\n".join(p.read_text() for p in sorted((run / "logs").glob("agent*.log")))
    probes = dict(line[len("PROBE "):].split(": ", 1) for line in log.splitlines() if line.startswith("PROBE "))
    for name in ("user namespace", "mount in its own namespace", "mount", "ptrace", "keyring"):
        assert probes[name] == "EPERM", (name, log[-3000:])
    assert probes["unshare tool"].startswith("1 unshare: unshare failed: Operation not permitted")
    uid = hardening.SANDBOX_UID if os.getuid() == 0 else os.getuid()
    assert probes["uid"] == f"{uid} {uid}"
    assert probes["step"] == "True 0.76"
    assert f"[agent process: bwrap; no new user namespaces, seccomp filter, uid {uid}]" in log

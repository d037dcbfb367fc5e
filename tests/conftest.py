import os
import resource
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from pytest_zygote import SOCKET_ENV as ZYGOTE_SOCKET_ENV, Zygote

pytest_plugins = ["pytester"]

# the toy task is test data, copied into each test's own folder, not a benchmark item of this suite
collect_ignore = ["data"]

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


def _cpu_seconds() -> float:
    """Processor time of this process and of the children it has waited for (the processes those waited for,
    and so on), child pytests forked by this process's zygote included."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = _zygote.children_cpu() if _zygote is not None else 0.0
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item.stash[CPU_AT_SETUP] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield
    # the test's processor time (setup, call and teardown) beside its wall time in reports/tests.xml: a test
    # that mostly waits (a Slurm queue, a timeout) shows little of it; scripts/suite_time.py sums both
    if CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_s", f"{_cpu_seconds() - item.stash[CPU_AT_SETUP]:.2f}"))


CPU_AT_SETUP = pytest.StashKey[float]()

# Tests that spend most of their time waiting, not computing (a Slurm queue, its scheduler's state changes):
# under `--dist loadgroup` they run one after another on one worker, beside the workers that compute
WAITING = ("tests/test_slurm.py",)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` (`make test`): the tests that read one module-scoped fixture (a task's shared
    run) run on the worker that built it, and the waiting tests on one worker of their own."""
    for item in items:
        path = item.nodeid.split("::")[0]
        if path in WAITING:
            item.add_marker(pytest.mark.xdist_group("waiting"))
            continue
        fixtures = getattr(item, "_fixtureinfo", None)
        shared = fixtures and any(d.scope in ("module", "package", "class") for defs in
                                  fixtures.name2fixturedefs.values() for d in defs)
        if shared:
            item.add_marker(pytest.mark.xdist_group(path))


_zygote: Zygote | None = None


@pytest.fixture(scope="session", autouse=True)
def child_pytest_server():
    """Where this process's child pytests are forked from (tests/pytest_zygote.py), started on a test's first
    child pytest; its socket's path is in the environment every child inherits."""
    global _zygote
    # a short path: a socket's is at most 107 bytes, which a pytester folder inside another can pass
    folder = tempfile.mkdtemp(prefix="fmlbench-zygote-")
    socket_path = os.path.join(folder, "socket")
    _zygote = Zygote(socket_path, dict(os.environ))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ZYGOTE_SOCKET_ENV, socket_path)
        yield _zygote
    _zygote.stop()
    _zygote = None
    shutil.rmtree(folder, ignore_errors=True)


def child_pytest() -> tuple[str, ...]:
    """What runs a child pytest: ``python -m pytest``, or its stand-in forked from this process's zygote."""
    return _zygote.command() if _zygote is not None else (sys.executable, "-mpytest")


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester whose ``runpytest_subprocess`` starts its child from the zygote."""
    pytester._getpytestargs = child_pytest
    return pytester


@pytest.fixture(scope="session", autouse=True)
def shared_embedding_cache(tmp_path_factory):
    """One cache of code embeddings (the exploration metrics') for every run this worker's tests start, as a
    user's ~/.cache keeps one for all their sessions. Each child pytest has its own HOME, so each would
    otherwise load the encoder (torch and transformers, ~5-10 s on 2 busy cores) at its session's end to embed
    code another test's run embedded already. The cache is keyed by the code's hash and the model's files:
    it changes no value. Tests of the cache itself set their own.

    One cache for the whole session, every xdist worker's runs included: a vector is written whole and then
    renamed into place, so workers share it safely, and code one worker's run embedded is not embedded again
    by another's (a load of the encoder costs ~7 s of processor time)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # a worker's basetemp is <the session's>/popen-gwN
    cache = root / "fmlbench-embedding-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FMLBENCH_CACHE", str(cache))
        if ENCODER_ENV not in os.environ:  # a run of the suite that chose an encoder keeps it
            patch.setenv(ENCODER_ENV, STAND_IN_ENCODER)
        yield


# the encoder of every session a test starts, unless the test asks for a real one (tests/stand_in_encoder.py)
ENCODER_ENV = "FMLBENCH_ENCODER"
STAND_IN_ENCODER = f"{Path(__file__).parent / 'stand_in_encoder.py'}:HashedTokens"


@pytest.fixture
def real_encoder(monkeypatch):
    """The encoder a user's session picks (GraphCodeBERT where its weights are here, else all-MiniLM-L6-v2), for
    a test about the encoder or its numbers: ~6 s of processor time more per session that embeds new code."""
    if os.environ.get(ENCODER_ENV) == STAND_IN_ENCODER:
        monkeypatch.delenv(ENCODER_ENV)


@pytest.fixture
def toy(pytester: pytest.Pytester) -> Path:
    """A project folder holding the numpy-only toy task; returns the task folder."""
    shutil.copytree(DATA / "toy_task", pytester.path / "toy_task")
    return pytester.path / "toy_task"


@pytest.fixture
def write_agent(pytester: pytest.Pytester):
    """Write a user agent module into the project folder; returns the --agent value for it."""

    def write(body: str, name: str = "my_agent.py", cls: str = "MyAgent") -> str:
        (pytester.path / name).write_text(textwrap.dedent(body))
        return f"{name}:{cls}"

    return write


# Plugins installed beside ours that a benchmark run never uses (task libraries bring hydra-core and anyio;
# the suite's own benchmarks pytest-benchmark): loading them costs a child pytest ~0.7 s on 2 cores, a few
# minutes over the suite's few hundred children, and tests nothing of ours.
UNUSED_PLUGINS = ("hydra_pytest", "anyio", "benchmark", "platformdirs")


def child_args(*args: str) -> tuple[str, ...]:
    """A child pytest's arguments: no cache folder, none of the UNUSED_PLUGINS, then ``args``."""
    return ("-p", "no:cacheprovider", *(part for name in UNUSED_PLUGINS for part in ("-p", f"no:{name}")), *args)


@pytest.fixture
def bench(pytester: pytest.Pytester):
    """Run the plugin in a child pytest, as users run it."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(*child_args(*args))

    return run


def load_record(project: Path, task: str = "toy_task") -> dict:
    import json

    records = sorted((project / "reports" / "fmlbench" / "runs" / task).glob("*/record.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def junit_props(xml_path: Path, name: str) -> dict:
    """An item's properties, on its testcase (xunit1) or as suite properties '<name>.<prop>' (xunit2)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        if case.get("name") == name:
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            if props:
                return props
            prefix = f"{name}."
            props = {p.get("name")[len(prefix):]: p.get("value") for suite in root.iter("testsuite")
                     for p in suite.findall("properties/property") if p.get("name").startswith(prefix)}
            assert props, f"no properties for {name} in {xml_path}"
            return props
    raise AssertionError(f"no testcase {name} in {xml_path}")

"""On-demand benchmark of running agents out of process (targets: a protocol round trip at most 2 ms, an
agent process's start-up at most 1 s per run).

    .venv/bin/python -m pytest benchmarks/test_agent_protocol.py --benchmark-only

Round trips: requests over a socketpair, answered by the real dispatcher on a real ``HarnessSession`` (the
toy task) in a thread, as the harness answers an agent's process. Start-up: the whole per-run cost of an
agent's own process: started (in its bubblewrap sandbox, and plainly as under --no-sandbox), it loads a
user's agent from its file, says hello, runs nothing, says it is done, and is gone with its limits.
"""

import shutil
import socket
import threading
from pathlib import Path

import pytest

from pytest_fmlbench import isolation
from pytest_fmlbench.agent_host.launcher import AgentLimits, AgentProcess
from pytest_fmlbench.agent_host.locate import locate_spec
from pytest_fmlbench.agent_host.serve import serve
from pytest_fmlbench.agent_host.server import Dispatcher
from pytest_fmlbench.agent_host.transport import SocketTransport, hello
from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.harness_session import HarnessSession
from pytest_fmlbench.record import RunRecord, RunStore
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace

TOY = Path(__file__).parent.parent / "tests" / "data" / "toy_task"
NOOP_AGENT = "from pytest_fmlbench import Agent\n\n\nclass Noop(Agent):\n    def run(self, session):\n        pass\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("agent-protocol")
    shutil.copytree(TOY, root / "toy_task")
    task = load_task(root / "toy_task" / "task.yaml")
    store = RunStore(root / "run")
    spec = task.spec
    record = RunRecord(run_id="r", task=task.id, task_version=spec.version, task_fingerprint="f", domain=spec.domain,
                       agent="noop", seed=0, steps_budget=5, metric_key=spec.metric.key,
                       direction=spec.metric.direction, baseline_val=spec.baseline.val,
                       baseline_test=spec.baseline.test, norm_best=spec.normalization.best,
                       norm_worst=spec.normalization.worst)
    workspace = Workspace.create(task, store.dir / "search", scrubbed_env(), store.logs, sandboxed=False)
    (root / "noop.py").write_text(NOOP_AGENT)
    return root, task, store, HarnessSession(spec, workspace, store, record, workspace.take_manifest())


@pytest.fixture(scope="module")
def client(run):
    ours, theirs = socket.socketpair()
    threading.Thread(target=serve, args=(ours, Dispatcher(run[3]), 3600.0), daemon=True).start()
    transport = SocketTransport(theirs)
    hello(transport)
    yield transport
    transport.request("done", {"outcome": "finished"})


def test_round_trip_small_request(benchmark, client):
    assert benchmark(client.request, "steps", {})["total"] == 5


def test_round_trip_reading_the_editable_files(benchmark, client):
    assert "config.json" in benchmark(client.request, "files", {})["files"]


@pytest.mark.parametrize("sandboxed", [True, False], ids=["bwrap", "no-sandbox"])
def test_agent_process_start_up(benchmark, run, sandboxed):
    root, task, store, session = run
    if sandboxed:
        isolation.check_available()
    locator = locate_spec("noop.py:Noop", root)

    def one_run() -> str:
        dispatcher = Dispatcher(session, agent={"locator": locator.to_json(), "options": {}})
        proc = AgentProcess("run", sandboxed=sandboxed, code=[Path(c) for c in locator.code],
                            hidden=[task.root, store.dir], hide_data=(), agent_limits=AgentLimits(),
                            log_path=store.logs / "agent.log")
        try:
            serve(proc.conn, dispatcher, 60.0, proc)
        finally:
            proc.close()
        return dispatcher.done.outcome

    assert benchmark.pedantic(one_run, rounds=5, iterations=1, warmup_rounds=1) == "finished"

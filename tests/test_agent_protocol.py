"""The agent protocol itself: what the dispatcher accepts and refuses, what it keeps, what the client makes of it.

The harness side is a real HarnessSession on a copy of the toy task (unsandboxed: isolation has its own
tests); requests go in as the bytes a socket would carry.
"""

import json
import shutil
from pathlib import Path

import pytest

from pytest_fmlbench import BudgetExhausted, RunStopped, Session, WholeFile
from pytest_fmlbench.agent_host import protocol as p
from pytest_fmlbench.agent_host.outcome import from_done
from pytest_fmlbench.agent_host.server import Dispatcher
from pytest_fmlbench.agent_host.transport import LocalTransport, hello
from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.harness_session import HarnessSession
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.record import RunRecord, RunStore
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace

TOY = Path(__file__).parent / "data" / "toy_task"


def toy_dispatcher(tmp_path: Path) -> Dispatcher:
    shutil.copytree(TOY, tmp_path / "toy_task")
    task = load_task(tmp_path / "toy_task" / "task.yaml")
    store = RunStore(tmp_path / "run")
    spec = task.spec
    record = RunRecord(run_id="r", task=task.id, task_version=spec.version, task_fingerprint="f", domain=spec.domain,
                       agent="probe", seed=0, steps_budget=2, metric_key=spec.metric.key,
                       direction=spec.metric.direction, baseline_val=spec.baseline.val,
                       baseline_test=spec.baseline.test, norm_best=spec.normalization.best,
                       norm_worst=spec.normalization.worst)
    workspace = Workspace.create(task, store.dir / "search", scrubbed_env(), store.logs, sandboxed=False)
    session = HarnessSession(spec, workspace, store, record, workspace.take_manifest())
    return Dispatcher(session)


@pytest.fixture
def dispatcher(tmp_path):
    return toy_dispatcher(tmp_path)


def ask(dispatcher, op, request_id=1, **args):
    return json.loads(dispatcher.handle_line(p.encode({"id": request_id, "op": op, "args": args})))


def test_hello_first_with_the_version_spoken_here(dispatcher):
    assert ask(dispatcher, "files")["error"] == {"type": "BadRequest", "message": "files: say hello first (protocol "
                                                 "version 2)"}
    assert ask(dispatcher, "hello", version=3)["error"]["message"] == ("hello: protocol version 3 is not spoken here; "
                                                                        "this harness speaks versions 1 and 2")
    reply = ask(dispatcher, "hello", 7, version=1)
    assert reply["id"] == 7 and reply["ok"]
    result = reply["result"]
    assert result["version"] == 1 and result["task"]["id"] == "toy_task" and result["steps_total"] == 2
    assert set(result["baseline_files"]) == {"algorithm.py", "config.json", "split_config.json"}
    assert result["rng_seed"] == "0:toy_task:probe" and result["llm"] is None


def test_the_baseline_run_costs_no_step_and_is_run_once(dispatcher):
    # a version-1 client is served as before: the operation version 2 added is not its to ask
    ask(dispatcher, "hello", version=1)
    refused = ask(dispatcher, "run_baseline")["error"]
    assert refused == {"type": "BadRequest", "message": "run_baseline: an operation of protocol version 2; this "
                                                        "agent said hello with version 1"}
    assert ask(dispatcher, "hello", version=2)["result"]["version"] == 2
    session = dispatcher.session
    session.edit([WholeFile("config.json", json.dumps({"lr": 0.5, "epochs": 10}))])
    reply = ask(dispatcher, "run_baseline")["result"]
    assert reply["result"] == {"step": 0, "success": True, "metric": 0.76, "metrics": {"blobs/accuracy": 0.76}, "error": "",
                               "is_best": False, "replayed": False}
    node = reply["node"]
    assert (node["step"], node["action"], node["parent"]) == (0, "baseline", None)
    # it ran the baseline's files, which the workspace holds afterwards, and cost no step
    assert session.files == session.baseline_files
    assert ask(dispatcher, "steps")["result"] == {"total": 2, "used": 0, "left": 2}
    assert session._record.baseline_run.metric == 0.76 and not session._store.steps_path.exists()
    # a second call answers with the first run
    again = ask(dispatcher, "run_baseline")["result"]
    assert again["result"]["replayed"] and again["node"] == node
    assert ask(dispatcher, "run_step", action="improve")["result"]["result"]["step"] == 1


def test_unknown_operations_fields_and_types_are_refused_with_the_reason(dispatcher):
    ask(dispatcher, "hello", version=1)
    assert "unknown operation 'record.save'" in ask(dispatcher, "record.save")["error"]["message"]
    assert ask(dispatcher, "steps", test_metric=1.0)["error"]["message"] == \
        "steps: test_metric: Extra inputs are not permitted"
    assert "files_of: step: Input should be a valid integer" in ask(dispatcher, "files_of", step="x")["error"]["message"]
    assert "llm.complete: this run has no LLM" in ask(dispatcher, "llm.complete",
                                                      messages=[{"role": "user", "content": "hi"}])["error"]["message"]
    for bad in (b"not json", b"[1, 2]", b'{"op": "steps"}', b"[" * 100000):
        with pytest.raises(p.ProtocolViolation):
            dispatcher.handle_line(bad)


def test_steps_that_do_not_exist_are_refused_and_nothing_is_run(dispatcher):
    ask(dispatcher, "hello", version=1)
    assert ask(dispatcher, "files_of", step=0)["error"]["message"] == "step 0 does not exist: no step is recorded"
    assert ask(dispatcher, "run_step", action="improve", parent=1)["error"]["type"] == "BadRequest"
    assert ask(dispatcher, "steps")["result"] == {"total": 2, "used": 0, "left": 2}


def test_what_an_agent_says_is_kept_as_capped_data(dispatcher):
    ask(dispatcher, "hello", version=1)
    refused = ask(dispatcher, "run_step", action="improve", extra={"blob": "x" * (p.MAX_EXTRA_BYTES + 1)})
    assert "the harness keeps at most 1048576" in refused["error"]["message"]
    reply = ask(dispatcher, "run_step", action="a" * 500, plan="p" * 200_000, extra={"metric": 0.999},
                edit={"applied": True, "changed": ["config.json"], "error": ""})["result"]
    node = reply["node"]
    assert reply["result"]["step"] == 1 and reply["result"]["success"]
    assert len(node["action"]) < 300 and node["plan"].startswith("p" * p.MAX_TEXT_CHARS + "\n[... 100000 characters cut")
    assert node["extra"] == {"metric": 0.999} and node["metric"] == pytest.approx(0.76)
    # annotations add up: the merged extra stays within the cap
    half = "y" * (p.MAX_EXTRA_BYTES // 2 + 10)
    assert ask(dispatcher, "annotate", step=1, extra={"a": half})["ok"]
    assert "would be" in ask(dispatcher, "annotate", step=1, extra={"b": half})["error"]["message"]
    recorded = dispatcher.session.journal.get(1)
    assert set(recorded.extra) == {"metric", "a"} and recorded.metric == pytest.approx(0.76)


def test_budget_exhausted_and_done(dispatcher):
    ask(dispatcher, "hello", version=1)
    ask(dispatcher, "run_step", action="baseline")
    ask(dispatcher, "run_step", action="baseline")
    assert ask(dispatcher, "run_step", action="baseline")["error"] == {"type": "BudgetExhausted",
                                                                       "message": "all 2 steps used"}
    assert ask(dispatcher, "done", outcome="finished")["ok"]
    assert dispatcher.done.outcome == "finished"
    assert "already said it was done" in ask(dispatcher, "steps")["error"]["message"]


def test_the_session_client_gives_what_the_harness_holds(dispatcher):
    transport = LocalTransport(dispatcher)
    session = Session(transport, hello(transport))
    harness = dispatcher.session
    assert session.task == harness.task and session.baseline_files == harness.baseline_files
    assert session.files == harness.files and session.steps_left == 2
    bad = session.edit([WholeFile("train.py", "x = 1\n")])
    assert not bad.applied and "not editable" in bad.error
    edit = session.edit([WholeFile("config.json", json.dumps({"lr": 0.5, "epochs": 150}))])
    assert edit.applied and edit.changed == ("config.json",)
    result = session.run_step("improve", edit=edit, plan="more epochs", extra={"k": [1, 2]})
    assert result.step == 1 and result.is_best and session.best.step == 1
    assert session.journal.nodes == harness.journal.nodes
    session.annotate(1, analysis="it helped", extra={"more": True})
    assert session.journal.get(1) == harness.journal.get(1) and session.journal.get(1).analysis == "it helped"
    assert session.files_of(1) == harness.files_of(1)
    with pytest.raises(p.RequestError, match="step 5 does not exist"):
        session.files_of(5)
    session.run_step("improve")
    with pytest.raises(BudgetExhausted):
        session.run_step("improve")
    assert session.steps_left == 0 and len(harness.journal) == 2


def test_an_agents_last_words_stay_one_printable_line():
    said = {"outcome": "crashed", "error_type": "Boom\x1b[31m", "reason": "\x1b[2J\x1b[Hall tests PASSED\nmore"}
    with pytest.raises(p.ProtocolViolation, match="U\\+001B"):
        p.DoneArgs.model_validate(said)
    # the Python client spells the escapes out before it sends them
    outcome = from_done(p.DoneArgs.model_validate(p.clean_args("done", said)))
    assert outcome.kind == "failed" and "\n" not in outcome.reason and "\x1b" not in outcome.reason
    assert outcome.reason == "crashed: Boom\\x1b[31m: \\x1b[2J\\x1b[Hall tests PASSED"
    assert from_done(p.DoneArgs(outcome="stopped", reason="x" * 5000)).reason.endswith(" [...]")


def test_exceptions_an_agent_caught_reach_the_outcome_within_their_caps(dispatcher):
    ask(dispatcher, "hello", version=1)
    caught = ["main loop: RuntimeError: boom\nTraceback ...", "x" * (p.MAX_TRACEBACK_CHARS + 50)]
    assert ask(dispatcher, "done", outcome="finished", caught=caught)["ok"]
    outcome = from_done(dispatcher.done)
    assert outcome.kind == "finished" and outcome.caught[0] == caught[0]
    # a longer one is cut to the traceback's cap, with the harness's note
    assert outcome.caught[1].startswith("x" * p.MAX_TRACEBACK_CHARS) and "characters cut" in outcome.caught[1]
    assert "at most 100" in ask(dispatcher, "done", 2, outcome="finished", caught=["e"] * 101)["error"]["message"]


class _RefusingModel:
    model, provider = "gpt-4o", "openai"

    def complete(self, messages, **kwargs):
        raise LLMCallError("openai: HTTP 401: bad key", status=401, kind="auth")


def test_a_failed_model_call_reaches_the_agent_as_the_same_exception(dispatcher):
    dispatcher.llm = _RefusingModel()
    transport = LocalTransport(dispatcher)
    session = Session(transport, hello(transport))
    assert (session.llm.model, session.llm.provider) == ("gpt-4o", "openai")
    with pytest.raises(LLMCallError, match="HTTP 401: bad key") as raised:
        session.llm.complete([{"role": "user", "content": "hi"}], purpose="draft")
    assert (raised.value.status, raised.value.kind) == (401, "auth")
    with pytest.raises(p.RequestError, match="role"):
        session.llm.complete([{"role": "wizard", "content": "hi"}])


class _OverBudgetModel:
    model, provider = "gpt-4o", "openai"

    def complete(self, messages, **kwargs):
        raise RunStopped("max-tokens 10 exceeded (12 used)")


def test_a_crossed_budget_ends_the_run_whatever_the_agent_does_with_it(dispatcher):
    dispatcher.llm = _OverBudgetModel()
    ask(dispatcher, "hello", version=1)
    assert ask(dispatcher, "llm.complete", messages=[{"role": "user", "content": "hi"}])["error"]["type"] == "RunStopped"
    # the agent swallowed it and goes on: no step is run, no call made
    assert ask(dispatcher, "run_step", action="improve")["error"] == {"type": "RunStopped",
                                                                      "message": "max-tokens 10 exceeded (12 used)"}
    assert dispatcher.session.steps_used == 0 and dispatcher.stop_reason == "max-tokens 10 exceeded (12 used)"

"""The harness's failures are contained, and records are read as they were written (issue 43, parts 3 and 5).

A failure while serving an agent still gives the best code its final test; a record holding what the writer
cannot encode is still written, complete; a reader names the file and line it cannot read and drops only a
torn last line; one item that cannot be loaded, scored, audited or rendered leaves the session's report of
the others whole.
"""

import json
import socket
import threading

import pytest

from llm.fixtures import TOY
from pytest_fmlbench import Agent, WholeFile
from pytest_fmlbench.audit.run import audit_run
from pytest_fmlbench.harness_session import HarnessSession
from pytest_fmlbench.record import RecordUnreadable, RunStore
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.spec import load_task

from scoring.records import record, step, write_run


# -- the final test runs whenever there is code to test ------------------------------------------------------

class StepThenEdit(Agent):
    """One honest step, then an edit (which the test makes the harness fail on)."""

    name = "step-then-edit"

    def run(self, session):
        config = json.loads(session.files["config.json"])
        session.edit([WholeFile("config.json", json.dumps({**config, "lr": 0.5, "epochs": 150}))])
        session.run_step("improve", plan="tuned")
        session.edit([WholeFile("algorithm.py", "pathological")])
        session.run_step("improve", plan="never run")


class TwoSteps(StepThenEdit):
    def run(self, session):
        config = json.loads(session.files["config.json"])
        session.edit([WholeFile("config.json", json.dumps({**config, "lr": 0.5, "epochs": 150}))])
        session.run_step("improve", plan="tuned")
        session.edit([WholeFile("config.json", json.dumps({**config, "lr": 0.4, "epochs": 150}))])
        session.run_step("improve", plan="tuned again")


def run_in_process(tmp_path, agent_cls, mode="in process", announce=None):
    settings = RunSettings(agent_cls=agent_cls, agent_name=agent_cls.name, agent_options=agent_cls.Options(),
                           out_dir=tmp_path / "out", steps=2, sandboxed=False, agent_mode=mode, warm=False,
                           announce=announce)
    task = load_task(TOY / "task.yaml")
    with pytest.raises(RunError) as raised:
        execute(task, 0, settings)
    store = RunStore(next((tmp_path / "out" / "runs" / task.id).iterdir()))
    return str(raised.value), store.load(), store.load_steps()


def test_a_harness_failure_while_serving_the_agent_still_tests_the_best_code(tmp_path, monkeypatch):
    real_edit = HarnessSession.edit

    def edit(self, edits):
        if any(e.content == "pathological" for e in edits):
            raise RecursionError("maximum recursion depth exceeded in the editor")
        return real_edit(self, edits)

    monkeypatch.setattr(HarnessSession, "edit", edit)
    line, rec, steps = run_in_process(tmp_path, StepThenEdit)
    assert line == ("toy_task: agent step-then-edit was ended by a failure of the harness (RecursionError: maximum "
                    "recursion depth exceeded in the editor)")
    assert rec.status == "error" and "RecursionError" in rec.error
    assert len(steps) == 1 and rec.best_step == 1
    # the recorded step's code, not the baseline's, got its final test
    assert rec.test_metric is not None and not rec.test_on_baseline and rec.test_error is None

    # a kill tore the line of a step in flight; the resumed run replays step 1 and appends after it, not after
    # the torn bytes
    store = RunStore(next((tmp_path / "out" / "runs" / "toy_task").iterdir()))
    with open(store.steps_path, "ab") as fh:
        fh.write(b'{"step": 2, "action": "impr')
    resumed = execute(load_task(TOY / "task.yaml"), 0, RunSettings(
        agent_cls=TwoSteps, agent_name=StepThenEdit.name, agent_options=TwoSteps.Options(), out_dir=tmp_path / "out",
        steps=2, sandboxed=False, agent_mode="in process", warm=False))
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 1
    assert [s.step for s in store.load_steps()] == [1, 2]


def test_an_external_agent_that_breaks_the_protocol_after_a_step_still_gets_its_final_test(tmp_path):
    def client(path: str) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            stream = sock.makefile("rwb")
            for n, (op, args) in enumerate([("hello", {"version": 2}), ("run_step", {"action": "draft"})], 1):
                stream.write(json.dumps({"id": n, "op": op, "args": args}).encode() + b"\n")
                stream.flush()
                assert json.loads(stream.readline())["ok"]
            stream.write(b"{not json\n")
            stream.flush()
            stream.readline()

    def announce(line: str) -> None:
        if "waiting for an external agent on " in line:
            path = line.split("waiting for an external agent on ")[1].split(" ")[0]
            threading.Thread(target=client, args=(path,), daemon=True).start()

    class External(Agent):
        name = "external"

    line, rec, steps = run_in_process(tmp_path, External, mode="external", announce=announce)
    assert "broke the protocol" in line and "\n" not in line
    assert rec.status == "error" and len(steps) == 1 and rec.test_metric is not None


# -- the record is always written, and read as written -------------------------------------------------------

def deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def test_a_record_holding_what_json_cannot_encode_is_saved_complete_and_says_what_was_mended(tmp_path):
    store = RunStore(tmp_path)
    rec = record(end_reason="done \ud800", caught_errors=["loop: \udfff"], test_metric=0.7,
                 agent_options={"nested": deep(300)})
    rec.baseline_run = step(0, 0.5)
    store.save(rec)
    back = store.load()
    assert back.status == "finished" and back.test_metric == 0.7
    assert back.end_reason == "done \ufffd" and back.caught_errors == ["loop: \ufffd"]
    assert any(n.startswith("end_reason:") for n in back.mended)
    assert any("nested deeper than" in n for n in back.mended)

    first = step(1, 0.6)
    first.plan, first.analysis = "plan \ud800", "a\u2028b\x85c"  # line separators JSON keeps as they are
    first.extra = {"deep": deep(220), "ok": 1}
    first.metrics = {"f1": float("nan"), "acc": 0.6}
    store.append_step(first)
    store.append_step(step(2, 0.7))
    steps = store.load_steps()
    assert [s.step for s in steps] == [1, 2]
    assert steps[0].plan == "plan \ufffd" and steps[0].analysis == "a\u2028b\x85c" and steps[0].extra["ok"] == 1
    assert steps[0].metrics == {"acc": 0.6} and steps[0].mended and steps[1].mended == []


def test_a_step_nested_deeper_than_the_reader_reads_is_written_readable(tmp_path):
    # pydantic writes ~200-254 levels and cannot read them back: the steps after it were lost to every reader
    store = RunStore(tmp_path)
    hidden = step(1, 0.6)
    hidden.extra = {"x": deep(230)}
    store.append_step(hidden)
    store.append_step(step(2, 0.9))
    assert [s.step for s in store.load_steps()] == [1, 2]


def steps_file(tmp_path) -> tuple[RunStore, list[bytes]]:
    store = RunStore(tmp_path)
    for n in (1, 2, 3):
        store.append_step(step(n, 0.5 + n / 10))
    lines = store.steps_path.read_bytes().split(b"\n")
    return store, lines


def test_a_corrupt_middle_line_is_an_error_naming_the_file_and_line(tmp_path):
    store, lines = steps_file(tmp_path)
    store.steps_path.write_bytes(b"\n".join([lines[0], b'{"step": 2, "oops"', lines[2], b""]))
    with pytest.raises(RecordUnreadable) as raised:
        store.load_steps()
    assert raised.value.line == 2 and raised.value.path == store.steps_path
    assert f"{store.steps_path}, line 2" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("tail", [b'{"step": 4, "act', b"\x00\x00\x00\x00\n"], ids=["no newline", "garbage"])
def test_a_torn_last_line_is_dropped(tmp_path, tail):
    store, lines = steps_file(tmp_path)
    store.steps_path.write_bytes(store.steps_path.read_bytes() + tail)
    assert [s.step for s in store.load_steps()] == [1, 2, 3]


def test_an_unreadable_record_json_names_its_file(tmp_path):
    store = RunStore(tmp_path)
    store.save(record())
    store.record_path.write_text('{"run_id": ')
    with pytest.raises(RecordUnreadable, match="record.json"):
        store.load()


def test_the_audit_of_a_record_whose_steps_cannot_be_read_flags_it(tmp_path):
    run_dir = write_run(tmp_path, [(0.6, {"config.json": "{}"}), (0.7, {"config.json": "{}"})])
    store = RunStore(run_dir)
    lines = store.steps_path.read_bytes().split(b"\n")
    store.steps_path.write_bytes(b"\n".join([b"garbage", *lines[1:]]))
    audit = audit_run(run_dir)
    assert audit.suspect and [f.kind for f in audit.signals] == ["unreadable_record"]
    assert "line 1" in audit.signals[0].reason
    assert RunStore(run_dir).load().audit.suspect  # saved with the record


# -- one item's failure never ends the session's reporting of the others -------------------------------------

# A fault the reports cannot help: every report (tables, CSVs, summary, HTML) averages per task, and this
# makes that raise for one agent's runs, whatever rendering makes safe.
INJECTED = '''
import pytest
from pytest_fmlbench.scoring.aggregate import Scores

real_per_task = Scores.per_task


def per_task(self):
    if "breaks-reports" in set(self.runs["agent"]):
        raise RuntimeError("injected: this run breaks every report")
    return real_per_task(self)


Scores.per_task = per_task
'''

ITEMS = '''
import pytest


@pytest.mark.parametrize("run_dir", {dirs!r})
def test_run(record_property, run_dir):
    record_property("fmlbench_run_dir", run_dir)
'''


def test_a_session_reports_every_run_it_can_and_names_those_it_cannot(pytester, bench, monkeypatch):
    monkeypatch.setenv("FMLBENCH_ENCODER", "none")  # no exploration metrics: they are not what is tested here
    root = pytester.path / "records"
    files = [(0.6, {"config.json": '{"lr": 0.5}'}), (0.7, {"config.json": '{"lr": 0.7}'})]
    good = write_run(root, files, agent="good-agent", test_metric=0.7)
    torn = write_run(root, files, agent="torn-steps", test_metric=0.7)
    lines = RunStore(torn).steps_path.read_bytes().split(b"\n")
    RunStore(torn).steps_path.write_bytes(b"\n".join([b'{"step": 1, "act', *lines[1:]]))
    breaking = write_run(root, files, agent="breaks-reports", test_metric=0.7)
    # what a hostile agent names itself and says, as the issue found them: rich markup, deep options
    hostile = write_run(root, files, agent="[/]evil[bold", end_reason="[/] \ud800", test_metric=0.7,
                        agent_options={"default": deep(300)})
    (pytester.path / "conftest.py").write_text(INJECTED)
    (pytester.path / "test_items.py").write_text(ITEMS.format(dirs=[str(d) for d in (good, torn, breaking, hostile)]))

    result = bench("--agent=random-search", "--fmlbench-html=out/session.html", "test_items.py")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "FML-bench results" in out and "good-agent" in out
    reports = pytester.path / "reports" / "fmlbench" / "reports"
    assert {p.name for p in (reports / "good-agent__-").iterdir()} >= {"raw_performance.csv", "runs.csv"}
    summary = json.loads((reports / "session.json").read_text())
    agents = {t["agent"] for t in summary["tables"]}
    assert "good-agent" in agents and "breaks-reports" not in agents and "torn-steps" not in agents
    html = (pytester.path / "out" / "session.html").read_text()
    assert "good-agent" in html and "breaks-reports" not in html
    result.stdout.fnmatch_lines([f"HTML report written to {pytester.path / 'out' / 'session.html'}"])

    # each run left out is named, with the reason, in one line
    unreadable = [line for line in out.splitlines() if "unreadable run record" in line]
    assert len(unreadable) == 1 and f"{torn / 'steps.jsonl'}, line 1" in unreadable[0]
    for what in ("tables", "CSV tables", "session summary", "HTML report"):
        assert sum(f"of agent breaks-reports ({breaking}) left out of the {what}: RuntimeError: injected" in line
                   for line in out.splitlines()) == 1, what
    # the hostile names are reported, or left out in one line: never the end of the session's report
    assert "[/]evil[bold" in agents or "of agent [/]evil[bold" in out


def test_a_run_that_cannot_be_scored_is_left_out_and_the_others_are_scored(tmp_path, monkeypatch):
    from pytest_fmlbench.reports.runs import load_runs
    from pytest_fmlbench.scoring import aggregate
    from pytest_fmlbench.scoring.aggregate import Scores

    real = aggregate.score_run

    def score_run(run):
        if run.agent == "unscorable":
            raise ZeroDivisionError("a record no scorer expected")
        return real(run)

    monkeypatch.setattr(aggregate, "score_run", score_run)
    dirs = [write_run(tmp_path, [(0.6, {})], agent=agent, test_metric=0.7) for agent in ("good", "unscorable")]
    told = []
    scores = Scores.from_runs(load_runs(dirs), encoder=None, left_out=lambda item, why: told.append((item, why)))
    assert list(scores.runs["agent"]) == ["good"]
    assert [why for _, why in told] == ["cannot be scored: ZeroDivisionError: a record no scorer expected"]
    assert told[0][0][2] == dirs[1]


def test_a_session_summary_holding_an_agents_deep_options_and_broken_text_is_written_readable(tmp_path):
    from pytest_fmlbench.reports import summary
    from pytest_fmlbench.scoring.aggregate import Scores

    options = summary.SessionOptions(agent="odd \ud800", agent_options={"default": deep(300)}, steps=1, seeds=1)
    made = summary.build_summary(Scores.from_runs([], encoder=None), source="pytest", options=options)
    path = summary.write_summary(made, tmp_path / "session.json")
    back = summary.SessionSummary.model_validate_json(path.read_bytes())
    assert back.options.agent == "odd \ufffd" and back.options.agent_options["default"]

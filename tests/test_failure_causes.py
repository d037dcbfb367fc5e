"""Whose failure an item's end was (agent, infra, provider, budget), and --retry-infra running only the items
the infrastructure failed. The Slurm side (a job cancelled under its item) is in tests/test_slurm.py."""

import json
import shutil

import pandas as pd
import pytest
import yaml
from filelock import FileLock

from conftest import junit_props

from pytest_fmlbench.cli import main
from pytest_fmlbench.failure_causes import FAILURES_FILE, FailureLog, cause_of_record
from pytest_fmlbench.record import RunRecord, RunStore, Usage
from pytest_fmlbench.reports import causes
from pytest_fmlbench.reports.runs import load_runs
from pytest_fmlbench.reports.summary import SessionSummary
from pytest_fmlbench.scoring.aggregate import Scores

from scoring.records import write_run

CRASHES_ON_ONE_TASK = """
    from pytest_fmlbench import Agent

    class MyAgent(Agent):
        def run(self, session):
            session.run_step("baseline")
            if session.task.id == "crash_task":
                raise RuntimeError("policy bug")
"""


def record(**fields) -> RunRecord:
    return RunRecord.model_construct(agent="aide", **fields)


@pytest.mark.parametrize("fields, cause", [
    ({"status": "finished"}, None),
    ({"status": "running"}, None),
    ({"status": "stopped", "stop_reason": "max-tokens 10 exceeded (12 used)"}, "budget"),
    ({"status": "error", "error": "agent aide crashed: RuntimeError: policy bug"}, "agent"),
    ({"status": "error", "error": "agent aide timed out after 600 s"}, "agent"),
    ({"status": "error", "error": "OSError: [Errno 28] No space left on device"}, "infra"),
    ({"status": "error", "error": "MemoryError: harness"}, "infra"),
    ({"status": "error", "error": "agent aide crashed: LLMCallError: openai: HTTP 503 (gave up after 7 attempts)"},
     "provider"),
    # not one call answered: the provider was down for the whole run, whatever the agent made of it
    ({"status": "error", "error": "agent aide crashed: ValueError: no code", "llm_failed_calls": 3,
      "usage": Usage(calls=0)}, "provider"),
    ({"status": "error", "error": "agent aide crashed: ValueError: no code", "llm_failed_calls": 1,
      "usage": Usage(calls=2, input_tokens=5)}, "agent"),
])
def test_a_run_records_cause_class(fields, cause) -> None:
    assert cause_of_record(record(**fields)) == cause


def test_an_agent_failure_is_the_agents_and_retry_infra_runs_only_the_items_the_infrastructure_failed(
        pytester, toy, bench, write_agent) -> None:
    crash = pytester.path / "crash_task"
    shutil.copytree(toy, crash)
    spec = yaml.safe_load((crash / "task.yaml").read_text())
    (crash / "task.yaml").write_text(yaml.safe_dump({**spec, "id": "crash_task"}, sort_keys=False))
    agent = write_agent(CRASHES_ON_ONE_TASK)
    args = (f"--agent={agent}", "--steps=1", "-o", "junit_family=xunit1", "toy_task", "crash_task")
    first = bench(*args, "--junitxml=first.xml")
    first.assert_outcomes(passed=1, errors=1)
    assert junit_props(pytester.path / "first.xml", "crash_task[seed0]")["failure_cause"] == "agent"
    assert junit_props(pytester.path / "first.xml", "toy_task[seed0]")["failure_cause"] == "none"
    out = pytester.path / "reports" / "fmlbench"
    failures = json.loads((out / FAILURES_FILE).read_text())
    ((crash_run, crash_failure),) = failures.items()
    assert crash_failure["cause"] == "agent" and "policy bug" in crash_failure["why"]
    # nothing failed for the infrastructure: a rerun of infra failures runs nothing
    bench(*args, "--retry-infra=2").assert_outcomes(deselected=2)
    # the infrastructure failed toy_task's run, as a lost Slurm job leaves it (its record still running)
    (toy_record,) = (out / "runs" / "toy_task").glob("*/record.json")
    saved = json.loads(toy_record.read_text())
    toy_record.write_text(json.dumps({**saved, "status": "running"}))
    FailureLog(out).note(saved["run_id"], "infra", "Slurm job 7 is NODE_FAIL without a result")
    rerun = bench(*args, "--retry-infra=2", "--junitxml=rerun.xml")
    rerun.assert_outcomes(passed=1, deselected=1)  # crash_task, the agent's failure, is not run again
    assert junit_props(pytester.path / "rerun.xml", "toy_task[seed0]")["failure_cause"] == "none"
    assert json.loads((out / FAILURES_FILE).read_text()).keys() == {crash_run}
    assert bench(*args, "--retry-infra=0").ret == pytest.ExitCode.USAGE_ERROR


def test_tables_and_session_json_count_failures_by_cause_and_leave_infra_failures_out_of_ni(
        tmp_path, capsys) -> None:
    root = tmp_path / "runs"
    # test 0.8 against the baseline's 0.6 with D = 1: NI 0.2; an agent's crash scores as the baseline (NI 0)
    write_run(root, [(0.7, {"config.json": '{"lr": 1}'})], seed=0, test_metric=0.8)
    write_run(root, [(0.7, {"config.json": '{"lr": 2}'})], seed=1, status="error",
              error="agent a crashed: RuntimeError: policy bug")
    # a Slurm job lost with its node: its record still running, the cause written by its item's end
    lost = write_run(root, [(0.7, {"config.json": '{"lr": 3}'})], seed=2, status="running")
    store = RunStore(lost)
    store.save(store.load().model_copy(update={"failure_cause": "infra"}))
    assert main(["score", str(root), "--encoder", "none", "--csv-dir", str(tmp_path / "csv")]) == 0
    out = capsys.readouterr().out
    assert "Failures by cause: agent 1, infra 1; infra failures are left out of NI" in " ".join(out.split())
    assert "t[seed2]" in out
    (tables,) = SessionSummary.model_validate_json((tmp_path / "csv" / "session.json").read_text()).tables
    assert tables.failures_by_cause == {"agent": 1, "infra": 1} and tables.infra_left_out == ["t[seed2]"]
    # the mean of seeds 0 and 1 only: the lost job's would have been the baseline's (NI 0), the agent's loss
    assert tables.normalized_improvement[0].ni == pytest.approx(0.1)
    assert tables.normalized_improvement[0].seeds == 2
    failures = pd.read_csv(tmp_path / "csv" / "failures_by_cause.csv", index_col=0)
    assert failures["a"].to_dict() == {"agent": 1, "infra": 1, "provider": 0, "budget": 0}
    runs = pd.read_csv(tmp_path / "csv" / "runs.csv")
    assert sorted(runs["failure_cause"].fillna("")) == ["", "agent", "infra"]


def test_the_cause_is_written_into_the_runs_record_and_read_from_failures_json_while_its_run_is_held(
        tmp_path) -> None:
    out = tmp_path / "out"
    run_dir = write_run(out / "runs", [(0.7, {"config.json": '{"lr": 1}'})], status="running", run_id="0123456789ab")
    run_dir = run_dir.rename(run_dir.with_name(f"{run_dir.name}__0123456789ab"))  # as runner.run_dir_for names it
    held = FileLock(str(run_dir / ".lock"))
    held.acquire()  # a cancelled job's process, still being killed, holds its run
    FailureLog(out).note("0123456789ab", "infra", "Slurm job 7_2 is CANCELLED without a result")
    assert RunStore(run_dir).load().failure_cause is None  # left alone while held
    assert causes.counts(Scores.from_runs(load_runs([run_dir]), encoder=None)) == {"infra": 1}
    held.release()
    FailureLog(out).note("0123456789ab", "infra", "Slurm job 7_2 is CANCELLED without a result")
    record = RunStore(run_dir).load()
    assert record.failure_cause == "infra" and cause_of_record(record) == "infra"
    FailureLog(out).note("0123456789ab", None)  # its rerun ended well
    assert RunStore(run_dir).load().failure_cause is None
    assert causes.counts(Scores.from_runs(load_runs([run_dir]), encoder=None)) == {}


def test_an_item_refused_before_it_ran_a_finished_run_again_leaves_that_runs_result_counted(tmp_path) -> None:
    """A finished run's item run again and refused before the run (its data changed: "rerun with --fresh") is
    noted as failed, but the finished run's record keeps its own end: its result is not left out as a lost run's."""
    out = tmp_path / "out"
    run_dir = write_run(out / "runs", [(0.7, {"config.json": '{"lr": 1}'})], test_metric=0.8, run_id="0123456789ab")
    run_dir = run_dir.rename(run_dir.with_name(f"{run_dir.name}__0123456789ab"))
    FailureLog(out).note("0123456789ab", "infra", "the data differ from those its recorded steps were measured on")
    assert RunStore(run_dir).load().failure_cause is None
    scores = Scores.from_runs(load_runs([run_dir]), encoder=None)
    assert causes.counts(scores) == {} and len(causes.agents_own(scores).runs) == 1

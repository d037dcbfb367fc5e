"""Whose failure an item's end was (agent, infra, provider, budget), and --retry-infra running only the items
the infrastructure failed. The Slurm side (a job cancelled under its item) is in tests/test_slurm.py."""

import json
import shutil

import pytest
import yaml

from conftest import junit_props

from pytest_fmlbench.failure_causes import FAILURES_FILE, FailureLog, cause_of_record
from pytest_fmlbench.record import RunRecord, Usage

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

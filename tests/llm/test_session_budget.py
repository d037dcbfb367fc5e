"""--session-max-tokens: one LLM budget for the whole session, across xdist workers (a child pytest, the real
OpenAI SDK, the loopback server)."""

import json

from conftest import junit_props

from pytest_fmlbench.session_budget import LEDGER_NAME, NOT_RUN

from .toy_coder import ToyCoder

CAP = 300  # the toy task's AIDE calls take ~160 tokens each: a run of 2 steps needs 4 of them


def records_of(project) -> list[dict]:
    return [json.loads(p.read_text()) for p in project.glob("reports/fmlbench/runs/toy_task/*/record.json")]


def test_a_session_token_cap_holds_across_two_workers_and_a_higher_cap_resumes(pytester, toy, bench, fake_llm,
                                                                                 api_keys):
    fake_llm.responder = ToyCoder()
    args = ["--agent=aide", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", "--seeds=3", "-n", "2",
            "--agent-opt", "num_drafts=2", "-rs", "--junitxml=junit.xml", "toy_task"]
    result = bench(*args, f"--session-max-tokens={CAP}")
    outcomes = result.parseoutcomes()
    # no run can finish within the cap: those started are stopped, and an item that would start after it
    # was reached is not run (which ones started depends on the workers' timing)
    started, not_run = outcomes.get("passed", 0), outcomes.get("skipped", 0)
    assert started >= 1 and not_run >= 1 and started + not_run == 3, outcomes
    result.stdout.fnmatch_lines([f"SKIPPED*{NOT_RUN} (session-max-tokens {CAP} reached (* used across the session))"])
    records = records_of(pytester.path)
    assert len(records) == started
    for record in records:
        assert record["status"] == "stopped", record
        assert record["stop_reason"].startswith(f"session-max-tokens {CAP} reached ("), record
        assert junit_props(pytester.path / "junit.xml", f"toy_task[seed{record['seed']}]")["status"] == "stopped"
    ledger = json.loads((pytester.path / "reports/fmlbench" / LEDGER_NAME).read_text())
    # every process charged the one ledger; no call was made once the cap was reached (the calls already on
    # their way when it was, one per running item at most, are used)
    assert ledger["tokens"] == sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in records)
    assert CAP < ledger["tokens"] <= CAP + 2 * 200, ledger
    spent_before = ledger["tokens"]

    # a higher cap: the stopped runs resume from their steps (replayed calls are not charged again), the
    # others run
    more = bench(*args, "--session-max-tokens=100000")
    more.assert_outcomes(passed=3)
    records = records_of(pytester.path)
    assert sorted(r["status"] for r in records) == ["finished"] * 3
    assert sum(1 for r in records if r["resumed_from_step"] is not None) == started
    ledger = json.loads((pytester.path / "reports/fmlbench" / LEDGER_NAME).read_text())
    total = sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in records)
    assert ledger["tokens"] == total - spent_before

    # no cap: the ledger of the earlier session does not hold this one
    bench(*args, "--collect-only")
    assert not (pytester.path / "reports/fmlbench" / LEDGER_NAME).exists()

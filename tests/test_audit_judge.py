"""``fmlbench judge`` on recorded runs: replies that are not JSON, empty replies, replay, the budget,
citations the records do not hold; and the cheap signals on hand-made records."""

import json
from pathlib import Path

import pytest

from audit_judge import research_reply, respond
from llm.fake_llm import Say
from llm.fixtures import TOY, api_keys, fake_llm  # noqa: F401 (fixtures)
from pytest_fmlbench import Agent, WholeFile
from pytest_fmlbench.audit.signals import Limits, gap_signal, signals
from pytest_fmlbench.cli import main
from pytest_fmlbench.record import RunStore
from pytest_fmlbench.runner import RunSettings, execute
from pytest_fmlbench.spec import load_task


class Tuner(Agent):
    """Two honest steps: the baseline, then a larger learning rate."""

    name = "tuner"

    def run(self, session):
        session.run_step("draft", plan="the baseline")
        config = dict(json.loads(session.files["config.json"]), lr=0.5, epochs=150)
        session.edit([WholeFile("config.json", json.dumps(config))])
        session.run_step("improve", plan="a larger learning rate", parent=1, analysis="it converged")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    settings = RunSettings(agent_cls=Tuner, agent_name="tuner", agent_options=Tuner.Options(), out_dir=tmp_path / "out",
                           steps=2, sandboxed=False, agent_mode="in process")
    return execute(load_task(TOY / "task.yaml"), 0, settings).store.dir


def judge(run_dir, server, *extra) -> int:
    return main(["judge", str(run_dir), "--judge-model=gpt-4o", "--judge-provider=openai",
                 f"--judge-base-url={server.url}", f"--tasks={TOY.parent}", *extra])


def audit_of(run_dir):
    return RunStore(run_dir).load().audit


def test_replies_that_are_not_json_or_empty_are_one_line_each_and_no_crash(run_dir, fake_llm, api_keys, capsys):
    fake_llm.script(Say("Scores: consistency is good, I think"), Say("{\"consistency\": 5,"), Say(""), Say("   "))
    assert judge(run_dir, fake_llm) == 0
    out = capsys.readouterr().out
    [outcome] = audit_of(run_dir).judges
    assert outcome.review is None and outcome.rules_clean is None and len(outcome.errors) == 2
    research, rules = outcome.errors
    assert research.startswith("research review: the reply is not a JSON object") and "(asked 2 times)" in research
    assert rules == "rule review: the reply is empty (asked 2 times)"
    for line in outcome.errors:
        assert "\n" not in line and f"  judge openai:gpt-4o: {line}" in out.splitlines()
    assert "Research review: no judge gave a usable review" in out and "Suspect runs: none of 1" in out


def test_a_rerun_replays_the_judge_and_costs_nothing(run_dir, fake_llm, api_keys, capsys):
    fake_llm.responder = respond
    assert judge(run_dir, fake_llm) == 0
    first = capsys.readouterr().out
    assert "replayed from the run records" in first and "0 of 2 judge call(s) replayed" in first
    asked = len(fake_llm.completions)
    assert judge(run_dir, fake_llm) == 0
    again = capsys.readouterr().out
    assert len(fake_llm.completions) == asked
    assert "judging spent $0.0000 now; 2 of 2 judge call(s) replayed" in again
    ledger = [json.loads(line) for line in (run_dir / "judge_calls.jsonl").read_text().splitlines()]
    # prompts and replies are kept; the agent's own call log is untouched
    assert [e["purpose"] for e in ledger] == ["research review", "rule review"]
    assert "## The tested code (step 2) against the baseline" in ledger[1]["request"]["messages"][1]["content"]
    assert not (run_dir / "llm_calls.jsonl").exists()
    [outcome] = audit_of(run_dir).judges
    assert outcome.review.scores["overall"] == 5 and outcome.rules_clean and outcome.usage.cost_usd > 0


def test_the_judges_budget_stops_judging_in_one_line(run_dir, fake_llm, api_keys, capsys):
    fake_llm.responder = respond
    # gpt-4o's list price: 3,000 prompt tokens cost more than this already
    assert judge(run_dir, fake_llm, "--max-cost-usd=0.001") == 0
    [outcome] = audit_of(run_dir).judges
    assert outcome.review is not None and outcome.rules_clean is None
    assert outcome.errors == [outcome.errors[0]] and outcome.errors[0].startswith("stopped: max-cost-usd 0.00 exceeded")
    assert len(fake_llm.completions) == 1


@pytest.mark.parametrize("violation, why", [
    ({"rule": "labels", "step": 2, "file": "config.json", "lines": [40, 41], "quote": "labels"}, "not in that file"),
    ({"rule": "labels", "step": 9, "file": "config.json", "lines": [1, 1]}, "which the run does not have"),
    ({"rule": "test_data", "step": 1, "file": None, "quote": "I read test_labels.npy"}, "not in that step's transcript"),
    ({"rule": "test_data", "step": "final", "file": "harness/evaluate.py", "lines": [1, 2]}, "not a file of that step"),
])
def test_a_finding_the_records_do_not_confirm_flags_nothing(run_dir, fake_llm, api_keys, violation, why):
    fake_llm.script(Say(research_reply()), Say(json.dumps({"violations": [violation]})))
    assert judge(run_dir, fake_llm) == 0
    audit = audit_of(run_dir)
    [finding] = audit.judges[0].findings
    assert not finding.verified and why in finding.reason
    assert not audit.suspect


def test_a_finding_that_quotes_the_code_is_placed_on_its_lines(run_dir, fake_llm, api_keys):
    violation = {"rule": "protected_protocol", "step": 2, "file": "config.json", "lines": [7, 9], "quote": '"lr": 0.5'}
    fake_llm.script(Say(research_reply()), Say(json.dumps({"violations": [violation]})))
    assert judge(run_dir, fake_llm) == 0
    audit = audit_of(run_dir)
    [finding] = audit.judges[0].findings
    assert finding.verified and finding.lines == (1, 1) and '"lr": 0.5' in finding.excerpt
    assert audit.suspect and "changes or works around the protected protocol" in audit.reasons[0]


def test_judge_setup_errors_are_one_line(run_dir, tmp_path, api_keys, monkeypatch, capsys):
    assert main(["judge", str(tmp_path / "nowhere")]) == 2
    monkeypatch.delenv("OPENAI_API_KEY")
    assert main(["judge", str(run_dir), "--judge-model=gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "judge: provider openai needs an API key" in err


def test_signals_alone_without_a_judge(run_dir, capsys):
    assert main(["judge", str(run_dir), f"--tasks={TOY.parent}"]) == 0
    out = capsys.readouterr().out
    assert "not suspect" in out and "audited 1 run(s)" in out and audit_of(run_dir).judges == []


def test_gap_signal_reads_the_gap_against_the_baseline_in_both_directions(run_dir):
    record = RunStore(run_dir).load()
    honest = record.model_copy(update={"final_val": 0.80, "test_metric": 0.77})
    assert gap_signal(honest, Limits()) is None
    jump = record.model_copy(update={"final_val": 0.80, "test_metric": 0.97})
    assert "beats the best code's validation value 0.8 by 0.17" in gap_signal(jump, Limits()).reason
    # overfitting to validation is not what this signal is about
    assert gap_signal(record.model_copy(update={"final_val": 0.95, "test_metric": 0.70}), Limits()) is None
    lower = record.model_copy(update={"direction": "lower", "baseline_val": 0.20, "baseline_test": 0.22,
                                      "norm_best": 0.0, "norm_worst": 1.0, "final_val": 0.18, "test_metric": 0.01})
    assert gap_signal(lower, Limits()) is not None
    assert gap_signal(lower, Limits(usual_gap=0.2)) is None


def test_sandbox_refusals_are_signals(run_dir):
    store = RunStore(run_dir)
    steps = store.load_steps()
    steps[1].blocked = ["PermissionError: [Errno 13] Permission denied: '/usr/lib/python3/dist-packages/sklearn/x'"]
    store.rewrite_steps(steps)
    [found] = signals(store.load(), store.load_steps(), run_dir)
    assert found.kind == "sandbox_blocked" and found.step == 2 and "Permission denied" in found.reason


def test_the_research_review_and_suspect_runs_keep_run_groups_apart():
    """Two option variants of one agent/model are two columns of the review, never one mean (issue 52)."""
    import pandas as pd
    from rich.console import Console

    from pytest_fmlbench.audit.tables import audit_items

    dims = ["consistency", "completeness", "novelty", "soundness", "insightfulness", "significance", "overall"]
    rows = [{"task": "t", "agent": "a", "model": "-", "seed": 0, "group": group, "judges": "j", "judge_cost_usd": 0.0,
             "suspect": 1, "suspect_reasons": f"why {group}", **{f"review_{d}": score for d in dims}}
            for group, score in (("a / opts lr=0.05", 2.0), ("a / opts lr=0.1", 8.0))]
    console = Console(width=200, record=True)
    for item in audit_items(pd.DataFrame(rows)):
        console.print(item)
    text = console.export_text()
    assert "a / opts lr=0.05 (overall)" in text and "a / opts lr=0.1 (overall)" in text
    assert "5" not in text.split("Mean")[1].splitlines()[0]  # no mean of the two variants
    assert "why a / opts lr=0.05" in text and "why a / opts lr=0.1" in text

"""Replies cut off at their length limit, counted per run where users look: the record, the JUnit properties
and the Process-Level table; and the sampling fields that calls asked for but did not send, summed in
``session.json``.

The first test runs one child pytest over the loopback server, on the toy task: Autoresearch makes one idea
call (asking for temperature 0.75, 8,192 tokens and seed 0) and one editor call (asking for none of them) per
step. The model is a Llama on the user's own server, whose family FML-bench's llm.py sends no seed: every idea
call goes without its seed. Each editor reply ends on the length limit (``finish_reason: length``) after a
whole edit.
"""

from __future__ import annotations

import json
from dataclasses import replace

from conftest import junit_props, load_record
from llm.fake_llm import Say, Seen
from llm.fixtures import api_keys, fake_llm  # noqa: F401 (fixtures)
from scripted_coder import ScriptedCoder, kind_of

from pytest_fmlbench.reports.summary import SessionSummary, unsent_sampling

STEPS = 2


class CutOffEdits(ScriptedCoder):
    """The scripted coder, whose edit replies all end on the model's length limit."""

    def __call__(self, seen: Seen) -> Say:
        reply = super().__call__(seen)
        return replace(reply, finish_reason="length") if kind_of(seen) == "edit" else reply


def test_cut_off_replies_are_counted_in_the_record_junit_and_table_and_unsent_fields_in_the_summary(
        pytester, toy, bench, fake_llm, api_keys, monkeypatch):
    monkeypatch.setenv("FMLBENCH_ENCODER", "none")  # the exploration metrics play no part here, nor does the sandbox
    fake_llm.responder = CutOffEdits()
    result = bench("--agent=autoresearch", "--model=llama-3.1-8b", f"--base-url={fake_llm.url}",
                   f"--steps={STEPS}", "--no-sandbox", "--llm-backoff=0.001", "--junitxml=junit.xml", "toy_task")
    result.assert_outcomes(passed=1)

    record = load_record(pytester.path)
    assert record["provider"] == "openai-compatible" and record["status"] == "finished"
    assert record["llm_truncated_calls"] == STEPS and record["llm_failed_calls"] == 0
    assert record["llm_unsent"] == {"seed": STEPS}  # llama is sent no seed, as FML-bench's llm.py sends none
    assert junit_props(pytester.path / "junit.xml", "toy_task[seed0]")["llm_truncated_calls"] == str(STEPS)

    # the Process-Level table: the column, and the run's count under it (two rows: the task's and the mean)
    table = result.stdout.str().split("Process-Level metrics", 1)[1].split("Exploration metrics", 1)[0]
    header = next(line.split("┃") for line in table.splitlines() if "Cut-off replies" in line)
    column = next(i for i, cell in enumerate(header) if cell.strip() == "Cut-off replies")
    rows = {row[1].strip(): row[column].strip() for row in (line.split("│") for line in table.splitlines())
            if len(row) == len(header)}
    assert rows == {"toy_task": str(STEPS), "Mean": str(STEPS)}

    # what was asked for and not sent: the ledger per call, the session summary summed over the runs
    ledger = [json.loads(line) for line in next(pytester.path.rglob("llm_calls.jsonl")).read_text().splitlines()]
    assert [(call["purpose"], call["unsent"]) for call in ledger] == [
        ("idea", ["seed"]), ("draft", []), ("idea", ["seed"]), ("improve", [])]
    summary = SessionSummary.model_validate_json(
        (pytester.path / "reports" / "fmlbench" / "reports" / "session.json").read_text())
    (tables,) = summary.tables
    assert tables.llm_unsent == {"seed": STEPS}
    assert tables.process_metrics[0].values.llm_truncated_calls == STEPS


def test_the_unsent_fields_are_read_from_the_ledgers_fields_alone(tmp_path):
    # a reply quoting the field is text, not a field; a line torn by a kill and a run without a ledger add nothing
    run, bare = tmp_path / "run", tmp_path / "bare"
    run.mkdir()
    bare.mkdir()
    calls = [{"purpose": "idea", "text": 'say "unsent": ["seed"]', "unsent": ["seed", "temperature"]},
             {"purpose": "edit", "text": '"unsent": ["max_output_tokens"]', "unsent": []},
             {"purpose": "tool", "via": "gateway", "text": "no such field"}]
    lines = [json.dumps(call, ensure_ascii=False) for call in calls]
    (run / "llm_calls.jsonl").write_text("\n".join(lines) + "\n" + lines[0][:40])
    assert unsent_sampling([str(run), str(bare), ""]) == {"seed": 1, "temperature": 1}

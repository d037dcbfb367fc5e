"""The LLM options as users drive them: a child pytest, the real SDKs, the loopback server."""

import json

import pytest

from conftest import junit_props, load_record

from .conftest import ANTHROPIC_KEY, OPENAI_KEY
from .fake_llm import Fail, Say
from .toy_coder import ToyCoder


def assert_no_file_contains(root, secret: str) -> None:
    leaked = [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []


def test_openai_run_on_xdist_survives_a_flaky_provider_and_keeps_the_key_out_of_every_file(
        pytester, toy, bench, fake_llm, api_keys):
    # a rate limit, a server error and a timeout before the first replies
    fake_llm.script(Fail(429, "rate limited", headers={"retry-after": "0.05"}), Fail(500, "oops"),
                    Say("too late", delay_s=2.5))
    fake_llm.responder = ToyCoder()
    result = bench("--agent=aide", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", "--seeds=2", "-n", "2",
                   "--agent-opt", "num_drafts=1", "--llm-backoff=0.001", "--llm-timeout=1", "--junitxml=junit.xml",
                   "-o", "junit_logging=all", "--log-level=DEBUG", "toy_task")
    result.assert_outcomes(passed=2)
    # one preflight for the session (not one per worker), then 3 failed tries and 2 runs x 2 steps x (code + review)
    preflight, *calls = fake_llm.requests
    assert (preflight.method, preflight.path) == ("GET", "/v1/models/gpt-4o")
    assert [r.path for r in calls] == ["/v1/chat/completions"] * (3 + 8)
    assert all(r.headers["authorization"] == f"Bearer {OPENAI_KEY}" for r in fake_llm.requests)
    records = [json.loads(p.read_text()) for p in pytester.path.glob("reports/fmlbench/runs/toy_task/*/record.json")]
    assert sorted(r["seed"] for r in records) == [0, 1]
    for record in records:
        assert (record["agent"], record["model"], record["provider"], record["status"]) == \
            ("aide", "gpt-4o", "openai", "finished")
        assert record["agent_options"]["num_drafts"] == 1 and record["agent_options"]["max_debug_depth"] == 3
        assert record["usage"]["calls"] == 4 and record["usage"]["cost_usd"] > 0
        props = junit_props(pytester.path / "junit.xml", f"toy_task[seed{record['seed']}]")
        assert (props["provider"], props["model"]) == ("openai", "gpt-4o")
        assert int(props["tokens_total"]) == record["usage"]["input_tokens"] + record["usage"]["output_tokens"]
        assert float(props["cost_usd"]) == pytest.approx(record["usage"]["cost_usd"], abs=1e-6)
    assert OPENAI_KEY not in result.stdout.str() + result.stderr.str()
    assert_no_file_contains(pytester.path, OPENAI_KEY)


def test_anthropic_run_stops_at_the_cost_budget(pytester, toy, bench, fake_llm, api_keys):
    fake_llm.responder = ToyCoder()
    (pytester.path / "prices.yaml").write_text("claude-haiku-4-5: {input: 1000, output: 1000}\n")
    # $1000 per 1M tokens: a draft (160 tokens) costs $0.16, a review (330) $0.33
    args = ["--agent=aide", "--provider=anthropic", "--model=claude-haiku-4-5", f"--base-url={fake_llm.url}",
            "--steps=4", "--agent-opt", "num_drafts=4", "--max-cost-usd=0.5", "--price-table=prices.yaml",
            "--junitxml=junit.xml", "toy_task"]
    result = bench(*args)
    result.assert_outcomes(passed=1)
    assert fake_llm.requests[0].path == "/v1/models/claude-haiku-4-5"
    assert {r.path for r in fake_llm.completions} == {"/v1/messages"}
    assert all(ANTHROPIC_KEY in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
               for r in fake_llm.requests)
    record = load_record(pytester.path)
    assert record["provider"] == "anthropic" and record["status"] == "stopped"
    assert record["stop_reason"] == "max-cost-usd 0.50 exceeded (0.6500 spent)"
    assert record["steps_used"] == 2 and record["usage"]["cost_usd"] == pytest.approx(0.65)
    assert record["test_metric"] is not None
    assert junit_props(pytester.path / "junit.xml", "toy_task[seed0]")["status"] == "stopped"
    assert_no_file_contains(pytester.path, ANTHROPIC_KEY)

    # the same limit: the stopped run is final and reused, nothing is asked again
    asked = len(fake_llm.completions)
    same = bench(*args)
    same.stdout.fnmatch_lines(["*reused 1 finished run(s)*"])
    assert len(fake_llm.completions) == asked
    # a raised limit: the run continues; recorded steps and replies are replayed, not paid again
    more = bench(*[a.replace("--max-cost-usd=0.5", "--max-cost-usd=5") for a in args])
    more.assert_outcomes(passed=1)
    more.stdout.fnmatch_lines(["*resumed toy_task[[]seed0] after 2 recorded step(s)*"])
    record = load_record(pytester.path)
    assert (record["status"], record["steps_used"], record["resumed_from_step"]) == ("finished", 4, 2)
    # review 2, then draft + review for steps 3 and 4
    assert len(fake_llm.completions) == asked + 5


@pytest.mark.parametrize("args, unset, line", [
    (["--model=gpt-4o"], "OPENAI_API_KEY", "provider openai needs an API key: set OPENAI_API_KEY in the environment"),
    (["--model=gpt-4o", "--provider=azure"], None,
     "unknown provider 'azure'; providers: openai, anthropic, google, openrouter, openai-compatible, local"),
    (["--model=gpt-nope", "--base-url={url}"], None,
     "model 'gpt-nope' rejected by provider openai: openai: HTTP 404: The model `gpt-nope` does not exist"),
    (["--model=gpt-4o", "--max-cost-usd=-1"], None, "--max-cost-usd: Input should be greater than 0"),
], ids=["missing-key", "unknown-provider", "model-rejected", "bad-budget"])
def test_setup_problems_are_one_line_before_any_task(pytester, toy, bench, fake_llm, api_keys, monkeypatch,
                                                     args, unset, line):
    if unset:
        monkeypatch.delenv(unset)
    fake_llm.unknown_models.add("gpt-nope")
    result = bench("--agent=aide", *[a.format(url=fake_llm.url) for a in args], "toy_task")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {line}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "reports").exists()
    assert fake_llm.completions == []  # nothing was spent

"""The client with the real openai and anthropic SDKs over HTTP to the loopback server."""

import json
import socket
import time

import pytest

from pytest_fmlbench.llm import LLMCallError, LLMSetupError, build_client, preflight
from pytest_fmlbench.session import RunStopped

from .conftest import ANTHROPIC_KEY, OPENAI_KEY, llm_settings
from .fake_llm import Fail, Say

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]


def test_openai_request_usage_and_cost(fake_llm, api_keys):
    fake_llm.script(Say("hi there", input_tokens=1000, output_tokens=100, cached_tokens=400))
    client = build_client(llm_settings(fake_llm, model="gpt-4o"))
    charged = []
    client.bind_usage(charged.append)
    reply = client.complete(MESSAGES, temperature=0.5, max_output_tokens=64, purpose="draft")
    assert reply.text == "hi there" and not reply.replayed
    u = reply.usage
    assert (u.input_tokens, u.output_tokens, u.cached_tokens, u.calls) == (1000, 100, 400, 1)
    assert u.cost_usd == pytest.approx((600 * 2.5 + 400 * 1.25 + 100 * 10.0) / 1e6)
    assert charged == [u] and client.spent == u
    (seen,) = fake_llm.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    # FML-bench's llm.py: max_tokens for a gpt model that is no gpt-5 (the per-family rules: test_wire_sampling.py)
    assert seen.body == {"model": "gpt-4o", "messages": MESSAGES, "max_tokens": 64, "temperature": 0.5}


def test_anthropic_native_request_usage_and_cost(fake_llm, api_keys):
    fake_llm.script(Say("hello", input_tokens=1000, output_tokens=100, cached_tokens=400))
    # the OpenAI-style .../v1 base URL works for the anthropic provider too
    client = build_client(llm_settings(fake_llm, provider="anthropic", model="claude-haiku-4-5"))
    reply = client.complete(MESSAGES, temperature=0.2, max_output_tokens=50)
    assert reply.text == "hello"
    u = reply.usage
    assert (u.input_tokens, u.output_tokens, u.cached_tokens) == (1000, 100, 400)
    assert u.cost_usd == pytest.approx((600 * 1.0 + 400 * 0.1 + 100 * 5.0) / 1e6)
    (seen,) = fake_llm.requests
    assert seen.path == "/v1/messages" and "anthropic-version" in seen.headers
    assert ANTHROPIC_KEY in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    assert seen.body["system"] == "You are terse."
    assert seen.body["messages"] == [{"role": "user", "content": "Say hi."}]
    # the SDK's messages.create takes no temperature: it goes in the body as the port's request has it
    assert seen.body["max_tokens"] == 50 and seen.body["temperature"] == 0.2


def test_users_server_without_key_or_price(fake_llm, api_keys):
    fake_llm.script(Say("local answer", input_tokens=10, output_tokens=5))
    client = build_client(llm_settings(fake_llm, provider="openai-compatible", model="llama3"))
    reply = client.complete(MESSAGES, max_output_tokens=16)
    assert reply.usage.cost_usd is None and reply.usage.total_tokens == 15
    seen = fake_llm.requests[0]
    assert seen.body["max_tokens"] == 16 and "max_completion_tokens" not in seen.body
    # the user's server never receives the hosted providers' keys
    assert OPENAI_KEY not in str(seen.headers) and ANTHROPIC_KEY not in str(seen.headers)


def test_google_and_openrouter_speak_openai_with_their_own_keys(fake_llm, api_keys, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key-123456")
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-test-key-123456")
    fake_llm.script(Say("g"), Say("r"))
    build_client(llm_settings(fake_llm, provider="google", model="gemini-2.5-flash")).complete(MESSAGES)
    build_client(llm_settings(fake_llm, provider="openrouter", model="openai/gpt-4o")).complete(MESSAGES)
    google, router = fake_llm.requests
    assert google.headers["authorization"] == "Bearer gemini-test-key-123456"
    assert router.headers["authorization"] == "Bearer or-test-key-123456"
    assert router.body["model"] == "openai/gpt-4o" and router.path == "/v1/chat/completions"


@pytest.mark.parametrize("provider, model", [("openai", "gpt-4o"), ("anthropic", "claude-haiku-4-5")])
def test_rate_limits_and_server_errors_are_retried_honouring_retry_after(fake_llm, api_keys, provider, model):
    fake_llm.script(Fail(429, "slow down", headers={"retry-after": "0.4"}), Fail(500, "boom"),
                    Fail(503, "overloaded", headers={"retry-after-ms": "150"}), Say("finally"))
    client = build_client(llm_settings(fake_llm, provider=provider, model=model))
    assert client.complete(MESSAGES).text == "finally"
    first, second, third, fourth = fake_llm.requests
    assert second.at - first.at >= 0.4       # Retry-After in seconds
    assert fourth.at - third.at >= 0.15      # retry-after-ms
    assert third.at - second.at < 0.3        # otherwise the (test-sized) back-off
    assert client.spent.calls == 1


def test_timeouts_are_retried(fake_llm, api_keys):
    fake_llm.script(Say("too late", delay_s=1.5), Say("in time"))
    client = build_client(llm_settings(fake_llm, timeout_s=0.4))
    started = time.monotonic()
    assert client.complete(MESSAGES).text == "in time"
    assert len(fake_llm.requests) == 2 and time.monotonic() - started < 1.5  # never waited out the delay


def test_retries_give_up_with_one_line(fake_llm, api_keys):
    fake_llm.script(*[Fail(502, "bad gateway")] * 3)
    client = build_client(llm_settings(fake_llm, retries=2))
    with pytest.raises(LLMCallError) as err:
        client.complete(MESSAGES)
    assert str(err.value) == "openai: HTTP 502: bad gateway (gave up after 3 attempts)"
    assert err.value.kind == "unavailable" and len(fake_llm.requests) == 3


def test_a_call_that_failed_for_good_is_counted_kept_and_replayed_as_a_failure(fake_llm, api_keys, tmp_path):
    fake_llm.script(*[Fail(503, "overloaded")] * 3)
    client = build_client(llm_settings(fake_llm, retries=2), tmp_path)
    seen = []
    client.bind_failures(seen.append)
    with pytest.raises(LLMCallError):
        client.complete(MESSAGES, purpose="edit")
    assert client.failed_calls == 1 and [e.kind for e in seen] == ["unavailable"] and len(fake_llm.requests) == 3
    entry = json.loads((tmp_path / "llm_calls.jsonl").read_text())
    assert entry["purpose"] == "edit" and entry["error"]["kind"] == "unavailable" and entry["usage"]["calls"] == 0
    # a resumed run is answered from the ledger: the same failure, no new request, counted again
    again = build_client(llm_settings(fake_llm, retries=2), tmp_path)
    with pytest.raises(LLMCallError, match="overloaded"):
        again.complete(MESSAGES, purpose="edit")
    assert again.failed_calls == 1 and len(fake_llm.requests) == 3 and again.spent.calls == 0


@pytest.mark.parametrize("fail, kind", [
    (Fail(429, "You exceeded your current quota", code="insufficient_quota"), "quota"),
    (Fail(400, "messages: too long"), "request"),
    (Fail(401, "invalid api key"), "auth"),
])
def test_answers_that_waiting_cannot_fix_are_not_retried(fake_llm, api_keys, fail, kind):
    fake_llm.script(fail)
    with pytest.raises(LLMCallError) as err:
        build_client(llm_settings(fake_llm)).complete(MESSAGES)
    assert err.value.kind == kind and len(fake_llm.requests) == 1


def test_a_key_echoed_by_the_server_is_redacted_from_errors(fake_llm, api_keys):
    fake_llm.script(Fail(401, f"Incorrect API key provided: {OPENAI_KEY}"))
    with pytest.raises(LLMCallError) as err:
        build_client(llm_settings(fake_llm)).complete(MESSAGES)
    assert OPENAI_KEY not in str(err.value) and "[redacted]" in str(err.value)


def test_ledger_replays_each_occurrence_without_new_requests(fake_llm, api_keys, tmp_path):
    fake_llm.script(Say("first", input_tokens=50), Say("second", input_tokens=60), Say("other"))
    settings = llm_settings(fake_llm)
    original = build_client(settings, tmp_path)
    texts = [original.complete(MESSAGES).text, original.complete(MESSAGES).text,
             original.complete([{"role": "user", "content": "else"}]).text]
    assert texts == ["first", "second", "other"]  # a repeated question gets a fresh answer
    assert len(fake_llm.requests) == 3
    resumed = build_client(settings, tmp_path)
    replies = [resumed.complete(MESSAGES), resumed.complete(MESSAGES), resumed.complete([{"role": "user", "content": "else"}])]
    assert [r.text for r in replies] == texts and all(r.replayed for r in replies)
    assert len(fake_llm.requests) == 3  # nothing asked again, nothing paid again
    assert resumed.spent == original.spent  # budgets count replayed calls at their recorded cost
    fake_llm.script(Say("third"))
    assert resumed.complete(MESSAGES).text == "third" and len(fake_llm.requests) == 4
    ledger = (tmp_path / "llm_calls.jsonl").read_text()
    assert OPENAI_KEY not in ledger and ledger.count("\n") == 4


def test_token_budget_stops_before_the_next_call(fake_llm, api_keys):
    fake_llm.script(Say("a", input_tokens=120, output_tokens=40), Say("b", input_tokens=120, output_tokens=40))
    client = build_client(llm_settings(fake_llm, max_tokens=250))
    client.complete(MESSAGES)
    client.complete(MESSAGES)  # crosses the limit: its reply is still used
    with pytest.raises(RunStopped) as err:
        client.complete(MESSAGES)
    assert str(err.value) == "max-tokens 250 exceeded (320 used)"
    assert len(fake_llm.requests) == 2


def test_cost_budget_message(fake_llm, api_keys, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"models": {"gpt-4o": {"input": 1000, "output": 1000}}}')
    fake_llm.script(Say("a", input_tokens=400, output_tokens=112), Say("b"))
    client = build_client(llm_settings(fake_llm, max_cost_usd=0.5, price_table=prices))
    client.complete(MESSAGES)
    with pytest.raises(RunStopped) as err:
        client.complete(MESSAGES)
    assert str(err.value) == "max-cost-usd 0.50 exceeded (0.5120 spent)"


# -- preflight -----------------------------------------------------------------------------------
def test_preflight_accepts_a_known_model_with_a_free_request(fake_llm, api_keys):
    endpoint = preflight(llm_settings(fake_llm, model="gpt-4o"))
    assert endpoint.provider.name == "openai"
    (seen,) = fake_llm.requests
    assert (seen.method, seen.path) == ("GET", "/v1/models/gpt-4o")


@pytest.mark.parametrize("provider, model", [("openai", "gpt-nope"), ("anthropic", "claude-nope")])
def test_preflight_rejected_model_is_one_line(fake_llm, api_keys, provider, model):
    fake_llm.unknown_models.add(model)
    with pytest.raises(LLMSetupError) as err:
        preflight(llm_settings(fake_llm, provider=provider, model=model))
    message = str(err.value)
    assert message.startswith(f"model '{model}' rejected by provider {provider}: {provider}: HTTP 404: ")
    assert "\n" not in message


def test_preflight_of_a_users_server_sends_a_tiny_completion(fake_llm, api_keys):
    fake_llm.script(Fail(404, "model 'qwen-x' not found"))
    with pytest.raises(LLMSetupError, match=r"^model 'qwen-x' rejected by provider openai-compatible"):
        preflight(llm_settings(fake_llm, provider="openai-compatible", model="qwen-x"))
    (seen,) = fake_llm.requests
    assert seen.method == "POST" and seen.body["max_tokens"] == 8


def test_preflight_bad_key_names_the_variable_not_the_value(fake_llm, api_keys):
    fake_llm.script()
    fake_llm.responder = lambda seen: Fail(401, "invalid x-api-key")
    fake_llm.unknown_models.clear()
    # models.retrieve is a GET; make the server refuse it as a bad key would
    with pytest.raises(LLMSetupError) as err:
        preflight(llm_settings(fake_llm, provider="openai-compatible", model="m"), env={"FMLBENCH_LLM_API_KEY": "wrong-key-1234567"})
    assert str(err.value).startswith("provider openai-compatible rejected the API key from FMLBENCH_LLM_API_KEY: ")
    assert "wrong-key" not in str(err.value)


def test_preflight_unreachable_server(api_keys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = llm_settings(type("S", (), {"url": f"http://127.0.0.1:{port}/v1"}), retries=1)
    with pytest.raises(LLMSetupError) as err:
        preflight(settings)
    assert str(err.value).startswith(f"provider openai at http://127.0.0.1:{port}/v1 is not answering: ")
    assert "gave up after 2 attempts" in str(err.value)

"""The LLM gateway and the forwarder, with the real SDKs: tool SDK -> forwarder (TCP on 127.0.0.1) ->
gateway (UNIX socket) -> loopback wire server. The tool's SDK holds a placeholder key; only the
gateway's real key may reach the server."""

import json
import logging
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import httpx2 as httpx  # the SDKs' HTTP client in this environment
except ImportError:  # pragma: no cover
    import httpx

from pytest_fmlbench.agentkit.forwarder import start_forwarder
from pytest_fmlbench.llm import LLMClient, LLMSettings, LLMSetupError, PriceTable, build_client
from pytest_fmlbench.llm.gateway import Gateway, upstream_base
from pytest_fmlbench.llm.ledger import Ledger
from pytest_fmlbench.llm.providers import resolve
from pytest_fmlbench.record import Usage
from pytest_fmlbench.session import RunStopped

from .conftest import ANTHROPIC_KEY, OPENAI_KEY, llm_settings
from .wire_servers import Failure, ToolCall, Turn, WireServer

PLACEHOLDER = "sk-ant-sandbox-placeholder-0000"  # what a tool inside the sandbox is given
REAL_KEYS = (ANTHROPIC_KEY, OPENAI_KEY)
ASK = [{"role": "user", "content": "List the files."}]


@dataclass
class Rig:
    wire: WireServer
    client: LLMClient
    gateway: Gateway
    base_url: str  # the forwarder's, as a tool inside the sandbox sees it
    charged: list
    run_dir: Path

    def anthropic(self) -> "anthropic.Anthropic":
        import anthropic

        return anthropic.Anthropic(api_key=PLACEHOLDER, base_url=self.base_url, max_retries=0, timeout=30)

    def openai(self) -> "openai.OpenAI":
        import openai

        return openai.OpenAI(api_key=PLACEHOLDER, base_url=self.base_url + "/v1", max_retries=0, timeout=30)

    def records(self) -> list[dict]:
        path = self.run_dir / "llm_calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.fixture
def short_dir():
    # a UNIX socket path has at most 107 bytes; pytest's tmp_path can be longer
    path = Path(tempfile.mkdtemp(prefix="fmlgw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def rig(tmp_path, short_dir, api_keys):
    stops = []

    def make(*turns, provider="anthropic", model="claude-haiku-4-5", base_path="/v1", responder=None,
             **settings) -> Rig:
        wire = WireServer(*turns, responder=responder).start()
        stops.append(wire.stop)
        client = build_client(_settings(wire.url + base_path, provider=provider, model=model, **settings),
                              run_dir=tmp_path / "run")
        charged = []
        client.bind_usage(charged.append)
        gateway = Gateway(client, short_dir / "llm.sock")
        gateway.start()
        stops.append(gateway.close)
        base_url, stop = start_forwarder(str(short_dir / "llm.sock"))
        stops.append(stop)
        return Rig(wire, client, gateway, base_url, charged, tmp_path / "run")

    yield make
    for stop in reversed(stops):
        stop()


def _settings(base_url: str, **values) -> LLMSettings:
    # the gateway forwards once; retrying is the tool's business
    return LLMSettings(base_url=base_url, timeout_s=10.0, retries=0, **values)


def _keyless(rig: Rig, tmp_path: Path) -> None:
    """No real key anywhere in the run's files, and the tool's own key never reached the server."""
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not any(key in text for key in REAL_KEYS), path
    for request in rig.wire.requests:
        assert PLACEHOLDER not in json.dumps(request.headers)


# -- the three APIs, streamed and not ---------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_messages(rig, tmp_path, stream):
    r = rig(Turn("Let me look.", [ToolCall("Bash", {"command": "ls"})], input_tokens=1000, output_tokens=100,
                 cached_tokens=400))
    sdk = r.anthropic()
    params = dict(model="claude-haiku-4-5", max_tokens=64, messages=ASK, extra_query={"beta": "true"})
    if stream:
        with sdk.messages.stream(**params) as events:
            reply = events.get_final_message()
    else:
        reply = sdk.messages.create(**params)
    assert [b.type for b in reply.content] == ["text", "tool_use"]
    assert reply.content[0].text == "Let me look." and reply.content[1].input == {"command": "ls"}
    assert reply.stop_reason == "tool_use"

    (seen,) = r.wire.requests
    assert seen.path == "/v1/messages" and seen.query == "beta=true" and seen.stream is stream
    assert seen.body["messages"] == ASK and "anthropic-version" in seen.headers
    assert r.wire.credentials == {f"Bearer {ANTHROPIC_KEY}"}  # the real key, as the SDK sends it; nothing else
    assert "x-api-key" not in seen.headers

    usage = r.client.spent
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.calls) == (1000, 100, 400, 1)
    assert usage.cost_usd == pytest.approx((600 * 1.0 + 400 * 0.1 + 100 * 5.0) / 1e6)
    assert r.charged == [usage]

    (record,) = r.records()
    assert record["key"].startswith("gateway:") and record["n"] == 0
    assert (record["via"], record["purpose"], record["path"], record["status"]) == ("gateway", "tool", "/v1/messages",
                                                                                   200)
    assert (record["provider"], record["model"]) == ("anthropic", "claude-haiku-4-5")
    assert record["usage"] == usage.model_dump() and record["finish_reason"] == "tool_use"
    assert record["text"] == "Let me look."
    assert record["tool_calls"] == [{"name": "Bash", "arguments": '{"command": "ls"}'}]
    assert record["request"]["messages"] == ASK and "requested_model" not in record
    _keyless(r, tmp_path)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_chat_completions(rig, tmp_path, stream):
    r = rig(Turn("Running it.", [ToolCall("shell", {"cmd": "ls -la"})], input_tokens=1000, output_tokens=100,
                 cached_tokens=400), provider="openai", model="gpt-4o")
    sdk = r.openai()
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]
    if stream:
        # the tool asks for no usage: the gateway asks for it, or the call could not be priced
        chunks = list(sdk.chat.completions.create(model="gpt-4o", messages=ASK, tools=tools, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        assert calls[0].function.name == "shell"
        assert "".join(t.function.arguments or "" for t in calls) == '{"cmd": "ls -la"}'
    else:
        reply = sdk.chat.completions.create(model="gpt-4o", messages=ASK, tools=tools)
        text = reply.choices[0].message.content
        assert reply.choices[0].message.tool_calls[0].function.arguments == '{"cmd": "ls -la"}'
    assert text == "Running it."

    (seen,) = r.wire.requests
    assert seen.path == "/v1/chat/completions" and seen.stream is stream
    assert seen.body.get("stream_options") == ({"include_usage": True} if stream else None)
    assert r.wire.credentials == {f"Bearer {OPENAI_KEY}"}

    usage = r.client.spent
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.calls) == (1000, 100, 400, 1)
    assert usage.cost_usd == pytest.approx((600 * 2.5 + 400 * 1.25 + 100 * 10.0) / 1e6)
    (record,) = r.records()
    assert record["path"] == "/v1/chat/completions" and record["finish_reason"] == "tool_calls"
    assert record["text"] == "Running it."
    assert record["tool_calls"] == [{"name": "shell", "arguments": '{"cmd": "ls -la"}'}]
    _keyless(r, tmp_path)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_responses(rig, tmp_path, stream):
    r = rig(Turn("Checking.", [ToolCall("shell", {"command": ["bash", "-lc", "ls"]})], input_tokens=1000,
                 output_tokens=100, cached_tokens=400), provider="openai", model="gpt-4o")
    sdk = r.openai()
    if stream:
        events = list(sdk.responses.create(model="gpt-4o", input="List the files.", stream=True))
        assert events[-1].type == "response.completed"
        reply = events[-1].response
    else:
        reply = sdk.responses.create(model="gpt-4o", input="List the files.")
    assert reply.output_text == "Checking."
    assert [(o.type, getattr(o, "name", None)) for o in reply.output] == [("message", None), ("function_call", "shell")]
    assert reply.usage.input_tokens_details.cached_tokens == 400

    (seen,) = r.wire.requests
    assert seen.path == "/v1/responses" and seen.stream is stream and seen.body["input"] == "List the files."
    assert r.wire.credentials == {f"Bearer {OPENAI_KEY}"}
    usage = r.client.spent
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.calls) == (1000, 100, 400, 1)
    assert usage.cost_usd == pytest.approx((600 * 2.5 + 400 * 1.25 + 100 * 10.0) / 1e6)
    (record,) = r.records()
    assert record["path"] == "/v1/responses" and record["finish_reason"] == "completed"
    assert record["text"] == "Checking."
    assert record["tool_calls"] == [{"name": "shell", "arguments": '{"command": ["bash", "-lc", "ls"]}'}]
    _keyless(r, tmp_path)


# -- a conversation: the responder reacts to the tool's results ---------------------------------------
def test_tool_results_reach_the_responder(rig):
    """Two turns of each API: the second answer is made from the tool result the SDK sent back."""

    def echo(request):
        return Turn("saw: " + "|".join(request.tool_outputs))

    r = rig(Turn("", [ToolCall("Bash", {"command": "ls"}, id="toolu_a")]), responder=echo)
    sdk = r.anthropic()
    first = sdk.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=ASK)
    followup = ASK + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a",
                                                    "content": "a.py\nb.py"}]}]
    with sdk.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=followup) as events:
        assert events.get_final_text() == "saw: a.py\nb.py"
    assert r.wire.model_requests[1].tool_outputs == ["a.py\nb.py"]
    assert [rec["text"] for rec in r.records()] == ["", "saw: a.py\nb.py"]
    assert r.client.spent.calls == 2


def test_tool_results_of_chat_and_responses(rig):
    r = rig(Turn("", [ToolCall("shell", {"cmd": "pwd"}, id="call_a")]),
            responder=lambda request: Turn("got " + ",".join(request.tool_outputs)),
            provider="openai", model="gpt-4o")
    sdk = r.openai()
    first = sdk.chat.completions.create(model="gpt-4o", messages=ASK)
    call = first.choices[0].message.tool_calls[0]
    again = sdk.chat.completions.create(model="gpt-4o", messages=ASK + [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "/work"}])
    assert again.choices[0].message.content == "got /work"

    r.wire.script(Turn("", [ToolCall("shell", {"command": ["pwd"]}, id="call_b")]))
    turn = sdk.responses.create(model="gpt-4o", input="Where am I?")
    (fc,) = [o for o in turn.output if o.type == "function_call"]
    assert fc.call_id == "call_b"
    done = sdk.responses.create(model="gpt-4o", stream=True, input=[
        {"role": "user", "content": "Where am I?"}, fc.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": fc.call_id, "output": "/srv"}])
    assert [e for e in done if e.type == "response.completed"][0].response.output_text == "got /srv"
    assert r.client.spent.calls == 4


# -- what the gateway changes on the way ---------------------------------------------------------------
def test_another_model_is_served_with_the_runs_model(rig):
    r = rig(Turn("ok"))
    reply = r.anthropic().messages.create(model="claude-3-5-haiku-latest", max_tokens=8, messages=ASK)
    assert reply.content[0].text == "ok"
    assert r.wire.requests[0].body["model"] == "claude-haiku-4-5"
    (record,) = r.records()
    assert record["model"] == "claude-haiku-4-5" and record["requested_model"] == "claude-3-5-haiku-latest"
    assert record["request"]["model"] == "claude-haiku-4-5"


def test_credentials_the_tool_sends_are_dropped(rig):
    r = rig(Turn("ok"), provider="openai", model="gpt-4o")
    sdk = r.openai()
    sdk.chat.completions.create(model="gpt-4o", messages=ASK, extra_headers={
        "x-api-key": "tool-key-123456", "x-goog-api-key": "tool-key-abcdef", "cookie": "session=tool-cookie",
        "openai-organization": "org-tool", "x-session-token": "tok-tool-123456", "x-custom-trace": "kept"})
    seen = r.wire.requests[0].headers
    assert seen["authorization"] == f"Bearer {OPENAI_KEY}" and seen["x-custom-trace"] == "kept"
    for name in ("x-api-key", "x-goog-api-key", "cookie", "openai-organization", "x-session-token"):
        assert name not in seen


def test_provider_path_prefix_and_anthropic_v1_base(rig):
    """An OpenAI-protocol base URL keeps its own prefix (Gemini's .../v1beta/openai); an Anthropic one
    given as .../v1 is not doubled."""
    r = rig(Turn("g"), provider="openai-compatible", model="llama3", base_path="/v1beta/openai")
    r.openai().chat.completions.create(model="x", messages=ASK)
    assert r.wire.requests[0].path == "/v1beta/openai/chat/completions"
    assert r.wire.credentials == set()  # a keyless server of the user's: no key at all
    assert r.client.spent.cost_usd is None  # no price known for the user's own model

    endpoint = resolve("claude-haiku-4-5", "anthropic", "http://127.0.0.1:9/v1/", {"ANTHROPIC_API_KEY": "k" * 12})
    assert upstream_base(endpoint, {}) == "http://127.0.0.1:9"


def test_upstream_defaults_follow_the_sdks():
    anthropic_ep = resolve("claude-haiku-4-5", "anthropic", None, {"ANTHROPIC_API_KEY": "k" * 12})
    openai_ep = resolve("gpt-4o", "openai", None, {"OPENAI_API_KEY": "k" * 12})
    assert upstream_base(anthropic_ep, {}) == "https://api.anthropic.com"
    assert upstream_base(openai_ep, {}) == "https://api.openai.com/v1"
    assert upstream_base(anthropic_ep, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:7/"}) == "http://127.0.0.1:7"
    assert upstream_base(openai_ep, {"OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}) == "http://127.0.0.1:8/v1"


# -- what the gateway refuses -----------------------------------------------------------------------
def test_anything_but_a_model_call_is_refused(rig):
    import anthropic

    r = rig(Turn("never"))
    sdk = r.anthropic()
    with pytest.raises(anthropic.NotFoundError, match="not a model call"):
        sdk.models.list()
    with pytest.raises(anthropic.NotFoundError, match="not a model call"):
        sdk.messages.count_tokens(model="claude-haiku-4-5", messages=ASK)
    with pytest.raises(anthropic.NotFoundError, match="serves POST /v1/messages only"):
        sdk.post("/v1/complete", cast_to=object, body={"prompt": "x"})
    with pytest.raises(anthropic.NotFoundError):
        sdk.delete("/v1/messages", cast_to=object)
    assert r.wire.requests == [] and r.records() == [] and r.client.spent == Usage()
    assert [path for _, path in r.gateway.refused] == ["/v1/models", "/v1/messages/count_tokens", "/v1/complete",
                                                       "/v1/messages"]


def test_openai_gateway_refuses_other_apis(rig):
    import openai

    r = rig(Turn("never"), provider="openai", model="gpt-4o")
    sdk = r.openai()
    with pytest.raises(openai.NotFoundError, match="/v1/chat/completions and POST /v1/responses only"):
        sdk.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.NotFoundError):
        sdk.models.list()
    with pytest.raises(openai.NotFoundError):
        sdk.post("/messages", cast_to=object, body={"model": "gpt-4o"})
    with pytest.raises(openai.BadRequestError, match="not a JSON object"):
        sdk.post("/chat/completions", cast_to=object, body=[1, 2])
    assert r.wire.requests == [] and r.records() == []


def test_local_provider_has_no_gateway(short_dir):
    settings = LLMSettings(provider="local")
    # no backend: the embedded model is never loaded for this
    client = LLMClient(resolve(None, "local", None, {}), None, PriceTable(), settings)
    with pytest.raises(LLMSetupError, match="--provider=local has no LLM gateway") as info:
        Gateway(client, short_dir / "llm.sock")
    assert "\n" not in str(info.value)


# -- budgets ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_spent_budget_answers_403_and_forwards_nothing(rig, protocol):
    import anthropic
    import openai

    if protocol == "anthropic":
        r = rig(Turn("one", input_tokens=150), Turn("two"), max_tokens=100)
        call = lambda: r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK)  # noqa: E731
        refused = anthropic.PermissionDeniedError
    else:
        r = rig(Turn("one", input_tokens=150), Turn("two"), provider="openai", model="gpt-4o", max_tokens=100)
        call = lambda: r.openai().chat.completions.create(model="gpt-4o", messages=ASK)  # noqa: E731
        refused = openai.PermissionDeniedError
    call()  # the call that crosses the limit is used
    with pytest.raises(refused, match=r"budget is spent: max-tokens 100 exceeded \(170 used\)"):
        call()
    assert len(r.wire.requests) == 1 and len(r.records()) == 1
    with pytest.raises(RunStopped):
        r.client.check_budget()


def test_account_and_check_budget_are_the_clients_meter(fake_llm, api_keys):
    client = build_client(llm_settings(fake_llm, max_cost_usd=0.01))
    charged = []
    client.bind_usage(charged.append)
    client.check_budget()
    first = Usage(input_tokens=10, output_tokens=5, calls=1, cost_usd=0.004)
    client.account(first)
    client.account(first)
    client.check_budget()  # 0.008 spent: under
    client.account(Usage(calls=1, cost_usd=0.004))
    assert client.spent.calls == 3 and client.spent.cost_usd == pytest.approx(0.012) and len(charged) == 3
    with pytest.raises(RunStopped, match="max-cost-usd 0.01 exceeded"):
        client.check_budget()
    client.account(Usage(calls=1, cost_usd=None))  # an unpriced call makes the dollar budget unenforceable
    with pytest.raises(RunStopped, match="cannot be enforced"):
        client.check_budget()


def test_a_resumed_tools_recorded_spending_counts_towards_the_budget_but_not_its_next_step(fake_llm, api_keys):
    # a coding tool's calls are not replayed on a resumed run: what its recorded steps spent is counted
    client = build_client(llm_settings(fake_llm, max_tokens=1000))
    charged = []
    client.bind_usage(charged.append)
    client.count_spent(Usage(input_tokens=900, output_tokens=200, calls=4, cost_usd=0.01))
    assert client.spent.total_tokens == 1100 and charged == []
    with pytest.raises(RunStopped, match="max-tokens 1000 exceeded"):
        client.check_budget()


# -- upstream failures --------------------------------------------------------------------------------
def test_provider_errors_pass_through_and_cost_nothing(rig):
    import openai

    r = rig(Failure(429, "slow down"), Failure(500, "boom"), Turn("fine"), provider="openai", model="gpt-4o")
    sdk = r.openai()
    with pytest.raises(openai.RateLimitError, match="slow down"):
        sdk.chat.completions.create(model="gpt-4o", messages=ASK)
    with pytest.raises(openai.InternalServerError, match="boom"):
        sdk.chat.completions.create(model="gpt-4o", messages=ASK, stream=True)
    assert sdk.chat.completions.create(model="gpt-4o", messages=ASK).choices[0].message.content == "fine"
    records = r.records()
    assert [rec["status"] for rec in records] == [429, 500, 200]
    assert [rec.get("upstream_error") for rec in records] == ["slow down", "boom", None]
    assert r.client.spent.calls == 1 and len(r.charged) == 1
    # the first two bodies differ (stream), the third repeats the first: its next occurrence
    assert records[2]["key"] == records[0]["key"] and records[2]["n"] == 1


def test_an_unreachable_provider_is_a_502_with_a_reason(rig):
    import anthropic

    r = rig(Turn("never"))
    r.wire.stop()
    with pytest.raises(anthropic.APIStatusError, match="cannot reach http://127.0.0.1") as info:
        r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK)
    assert info.value.status_code == 502
    (record,) = r.records()
    assert record["status"] == 502 and "cannot reach" in record["upstream_error"]
    assert r.client.spent == Usage()


# -- streaming passes through as it arrives; calls in parallel ---------------------------------------
@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_a_stream_is_passed_on_as_it_arrives(rig, api):
    """The server holds its stream after the first text delta until the tool has received that delta:
    a gateway or forwarder that buffered the stream would leave the hold to expire."""
    hold = threading.Event()
    turn = Turn("first part, then the rest", hold=hold)
    if api == "anthropic":
        r = rig(turn)
        events = r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK, stream=True)
        is_text = lambda e: e.type == "content_block_delta"  # noqa: E731
    else:
        r = rig(turn, provider="openai", model="gpt-4o")
        if api == "chat":
            events = r.openai().chat.completions.create(model="gpt-4o", messages=ASK, stream=True)
            is_text = lambda e: bool(e.choices and e.choices[0].delta.content)  # noqa: E731
        else:
            events = r.openai().responses.create(model="gpt-4o", input="x", stream=True)
            is_text = lambda e: e.type == "response.output_text.delta"  # noqa: E731
    seen = 0
    for event in events:
        if is_text(event):
            seen += 1
            hold.set()
    assert seen == 3
    assert r.wire.requests[0].released is True
    assert r.client.spent.calls == 1


def test_calls_in_parallel_are_all_accounted(rig):
    r = rig(responder=lambda request: Turn(request.body["messages"][0]["content"], input_tokens=100,
                                           output_tokens=10), provider="openai", model="gpt-4o")
    replies, errors = {}, []

    def call(i: int) -> None:
        try:
            sdk = r.openai()
            stream = i % 2 == 0
            got = sdk.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"n{i}"}],
                                              stream=stream)
            replies[i] = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
                else got.choices[0].message.content
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and replies == {i: f"n{i}" for i in range(8)}
    assert (r.client.spent.calls, r.client.spent.input_tokens, r.client.spent.output_tokens) == (8, 800, 80)
    assert len(r.charged) == 8 and len(r.records()) == 8
    assert len(Ledger(r.run_dir / "llm_calls.jsonl")) == 8  # every line whole, loadable on resume


# -- records ------------------------------------------------------------------------------------------
def test_records_are_capped_and_hold_no_key(rig, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    long_text = "y" * 100_000
    r = rig(Turn(long_text + f" echo {ANTHROPIC_KEY}"))
    prompt = [{"role": "user", "content": "x" * 200_000 + f" the key is {ANTHROPIC_KEY}"}]
    reply = r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=prompt)
    assert reply.content[0].text.endswith(ANTHROPIC_KEY)  # the tool gets the reply as it was
    (record,) = r.records()
    assert record["request"]["truncated"] is True and record["request"]["chars"] > 200_000
    assert "[redacted]" in record["request"]["tail"]
    assert len(record["text"]) < 33_000 and record["text"].endswith("echo [redacted]")
    assert len((r.run_dir / "llm_calls.jsonl").read_text()) < 120_000
    _keyless(r, tmp_path)
    assert not any(key in caplog.text for key in REAL_KEYS)


def test_gateway_calls_do_not_disturb_replay(rig, fake_llm):
    """The run's own calls still replay from the ledger the gateway also writes to."""
    r = rig(Turn("tool call"))
    r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK)
    ledger = Ledger(r.run_dir / "llm_calls.jsonl")
    assert len(ledger) == 1
    entry = ledger.lookup(r.records()[0]["key"], 0)
    assert entry["via"] == "gateway"


# -- the forwarder and the gateway's life ---------------------------------------------------------------
def test_forwarder_without_a_gateway_says_so(short_dir):
    with pytest.raises(ConnectionError, match=r"no LLM gateway answers on .*llm.sock") as info:
        start_forwarder(str(short_dir / "llm.sock"))
    assert "\n" not in str(info.value)


def test_forwarder_after_the_gateway_closed_answers_502(rig):
    import anthropic

    r = rig(Turn("never"))
    r.gateway.close()
    r.gateway.close()  # idempotent
    assert not r.gateway.socket_path.exists()
    with pytest.raises(anthropic.APIStatusError, match="LLM gateway at .* is not answering") as info:
        r.anthropic().messages.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK)
    assert info.value.status_code == 502


def test_forwarder_stop_closes_the_port(short_dir, api_keys, fake_llm):
    client = build_client(llm_settings(fake_llm, provider="anthropic", model="claude-haiku-4-5"))
    with Gateway(client, short_dir / "llm.sock") as gateway:
        base_url, stop = start_forwarder(str(gateway.socket_path))
        port = int(base_url.rsplit(":", 1)[1])
        socket.create_connection(("127.0.0.1", port)).close()
        stop()
        stop()  # idempotent
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port))


def test_a_stale_socket_is_replaced_and_a_file_is_not(short_dir, api_keys, fake_llm):
    client = build_client(llm_settings(fake_llm, provider="anthropic", model="claude-haiku-4-5"))
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(short_dir / "llm.sock"))
    stale.close()  # a socket file left by a killed run
    with Gateway(client, short_dir / "llm.sock"):
        start_forwarder(str(short_dir / "llm.sock"))[1]()
    (short_dir / "other").write_text("not a socket")
    with pytest.raises(LLMSetupError, match="exists and is not a socket"):
        Gateway(client, short_dir / "other").start()


# -- raw HTTP: what SDKs do not send, and a provider that breaks off ------------------------------------
def test_a_chunked_request_body_is_read(rig):
    """Some HTTP clients send a JSON body in chunks rather than with a length."""
    import http.client

    r = rig(Turn("chunked ok"), provider="openai", model="gpt-4o")
    port = int(r.base_url.rsplit(":", 1)[1])
    body = json.dumps({"model": "gpt-4o", "messages": ASK}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=iter([body[:10], body[10:]]), encode_chunked=True,
                 headers={"content-type": "application/json", "authorization": "Bearer tool-key-123456"})
    reply = conn.getresponse()
    assert reply.status == 200
    assert json.loads(reply.read())["choices"][0]["message"]["content"] == "chunked ok"
    conn.close()
    assert r.wire.requests[0].body["messages"] == ASK
    assert r.wire.credentials == {f"Bearer {OPENAI_KEY}"}


def test_a_stream_the_provider_breaks_off_is_broken_for_the_tool_too(tmp_path, short_dir, api_keys):
    """The provider sends the start of a stream, then closes: the tool must see a broken reply (no clean
    end), and the record says so, with the usage known so far charged."""
    import anthropic

    listener = socket.create_server(("127.0.0.1", 0))
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 500, "output_tokens": 1, "cache_read_input_tokens": 0}}}

    def provider():
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            event = f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                         + b"%x\r\n%b\r\n" % (len(event), event))
            # and closes without the closing chunk: the provider's connection broke

    threading.Thread(target=provider, daemon=True).start()
    port = listener.getsockname()[1]
    client = build_client(_settings(f"http://127.0.0.1:{port}", provider="anthropic", model="claude-haiku-4-5"),
                          run_dir=tmp_path / "run")
    with Gateway(client, short_dir / "llm.sock") as gateway:
        base_url, stop = start_forwarder(str(gateway.socket_path))
        sdk = anthropic.Anthropic(api_key=PLACEHOLDER, base_url=base_url, max_retries=0, timeout=30)
        # this SDK lets the HTTP client's error through mid-stream: "incomplete chunked read"
        with pytest.raises((anthropic.APIConnectionError, httpx.RemoteProtocolError)):
            with sdk.messages.stream(model="claude-haiku-4-5", max_tokens=8, messages=ASK) as events:
                events.get_final_message()
        stop()
    listener.close()
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "llm_calls.jsonl").read_text().splitlines()]
    assert record["upstream_error"] == "the provider's reply broke off"
    assert record["usage"]["input_tokens"] == 500 and client.spent.input_tokens == 500


@pytest.mark.parametrize("body, refusal", [
    (b'{"model": "gpt-4o", "messages": [], "temperature": NaN}', "not JSON"),
    (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "\\ud800"}]}', "not JSON"),
    (b'{"model": "gpt-4o", "x": ' + b"[" * 100 + b"]" * 100 + b"}", "nested more than 64 levels"),
    (b'{"model": "gpt-4o", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "not JSON"),
    (b'{"model": "gpt-4o", "x": [' + b"0," * (1 << 20) + b"0]}", "more than 1048576 JSON values"),
    (b'{"model": "gpt-4o", "n": ' + b"9" * 30 + b"}", "integer outside 64 bits"),
    (b"[1, 2]", "not a JSON object"),
], ids=["nan", "lone-surrogate", "100-deep", "100000-deep", "too-many-values", "huge-integer", "not-an-object"])
def test_a_hostile_request_body_is_refused_in_one_line_and_nothing_is_forwarded(rig, body, refusal):
    """A tool's request body is an adversary's data too: read within limits, refused with a 400 that says why."""
    import http.client

    r = rig(Turn("never"), provider="openai", model="gpt-4o")
    port = int(r.base_url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
    reply = conn.getresponse()
    message = json.loads(reply.read())["error"]["message"]
    conn.close()
    assert reply.status == 400 and message.startswith("fmlbench LLM gateway: a request body") and refusal in message
    assert r.wire.requests == [] and r.records() == [] and r.client.spent == Usage()

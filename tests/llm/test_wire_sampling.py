"""What the real SDKs put on the wire, per provider and model, against FML-bench's llm.py and code_editor.py.

Expectations worked out from the port's code (qrzou/FML-bench d336651): every call but the editor's goes
through ``get_response_from_llm`` (agents/llm.py 210-420) with temperature 0.75 and MAX_NUM_TOKENS = 8192;
it branches on substrings of the model name, whichever endpoint serves it. The editor (code_editor.py
147-155) sends the model and the messages only.
"""

import json

import pytest

from pytest_fmlbench.agentkit.editing import PORT_LLM_MAX_OUTPUT_TOKENS, PORT_LLM_SEED
from pytest_fmlbench.llm import build_client
from pytest_fmlbench.llm.backends import FALLBACK_MAX_TOKENS

from .conftest import llm_settings
from .fake_llm import Say

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]
SAMPLING_FIELDS = ("temperature", "seed", "max_tokens", "max_completion_tokens")
PORT_CALL = {"temperature": 0.75, "max_output_tokens": PORT_LLM_MAX_OUTPUT_TOKENS, "seed": PORT_LLM_SEED}
EDITOR_CALL = {"temperature": None, "max_output_tokens": None, "seed": None}

# (provider, model, the sampling fields the port's llm.py sends)
PORT_CALLS = [
    # 'gpt' in model: seed=0; not gpt-5: the temperature and max_tokens (llm.py 292-303)
    ("openai", "gpt-4o", {"temperature": 0.75, "max_tokens": 8192, "seed": 0}),
    ("openrouter", "openai/gpt-4o-mini", {"temperature": 0.75, "max_tokens": 8192, "seed": 0}),
    # 'gpt-5' in model: temperature 1, max_completion_tokens, seed=0 (llm.py 280-290), on any endpoint
    ("openai", "gpt-5-2025-08-07", {"temperature": 1.0, "max_completion_tokens": 8192, "seed": 0}),
    ("openrouter", "openai/gpt-5", {"temperature": 1.0, "max_completion_tokens": 8192, "seed": 0}),
    # 'o1'/'o3' in model: temperature 1, max_completion_tokens, seed=0 (llm.py 306-318)
    ("openai", "o3-mini", {"temperature": 1.0, "max_completion_tokens": 8192, "seed": 0}),
    # 'claude' in model, through an OpenAI-compatible client: temperature and max_tokens, no seed (228-237)
    ("openrouter", "anthropic/claude-sonnet-4.5", {"temperature": 0.75, "max_tokens": 8192}),
    # gemini, deepseek: temperature and max_tokens, no seed (llm.py 348-358, 398-407)
    ("google", "gemini-2.5-pro", {"temperature": 0.75, "max_tokens": 8192}),
    ("openrouter", "deepseek/deepseek-v3.2", {"temperature": 0.75, "max_tokens": 8192}),
    # qwen: max_tokens only (llm.py 374-383); deepseek-reasoner: nothing (llm.py 360-371)
    ("openrouter", "qwen/qwen3-235b-a22b-2507", {"max_tokens": 8192}),
    ("openai-compatible", "deepseek-reasoner", {}),
]


@pytest.fixture
def all_keys(api_keys, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test-LOOPBACK")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-test-LOOPBACK")
    return api_keys


def sampling_sent(body: dict) -> dict:
    return {k: body[k] for k in SAMPLING_FIELDS if k in body}


@pytest.mark.parametrize("provider, model, expected", PORT_CALLS, ids=[c[1] for c in PORT_CALLS])
def test_a_port_call_carries_what_the_ports_llm_py_sends(fake_llm, all_keys, provider, model, expected):
    fake_llm.script(Say("ok"))
    build_client(llm_settings(fake_llm, provider=provider, model=model)).complete(MESSAGES, **PORT_CALL)
    (seen,) = fake_llm.completions
    assert sampling_sent(seen.body) == expected
    # o1/o3: the port sends its system prompt as a user message (llm.py 309-312); everyone else as system
    roles = [m["role"] for m in seen.body["messages"]]
    assert roles == (["user", "user"] if model.startswith("o3") else ["system", "user"])


@pytest.mark.parametrize("provider, model", [("openai", "gpt-5"), ("openrouter", "openai/gpt-4o"),
                                             ("google", "gemini-2.5-pro"), ("openai", "o3")])
def test_an_editor_call_carries_no_sampling_field(fake_llm, all_keys, provider, model):
    """code_editor.py 147-155: model and messages only (no temperature, limit or seed), the system role kept."""
    fake_llm.script(Say("ok"))
    build_client(llm_settings(fake_llm, provider=provider, model=model)).complete(MESSAGES, **EDITOR_CALL)
    (seen,) = fake_llm.completions
    assert sampling_sent(seen.body) == {}
    assert [m["role"] for m in seen.body["messages"]] == ["system", "user"]


def test_anthropic_gets_the_ports_temperature_and_its_models_maximum(fake_llm, all_keys):
    """The SDK's messages.create has no temperature argument; the request body carries it all the same. A
    call without a limit (the editor's) gets the model's maximum, as the Models API reports it."""
    fake_llm.anthropic_max_tokens = 64000
    fake_llm.script(Say("idea"), Say("edit"), Say("edit again"))
    client = build_client(llm_settings(fake_llm, provider="anthropic", model="claude-sonnet-4-5"))
    client.complete(MESSAGES, **PORT_CALL)
    client.complete(MESSAGES, **EDITOR_CALL)
    client.complete(MESSAGES, **EDITOR_CALL)
    port, editor, again = (sampling_sent(r.body) for r in fake_llm.completions)
    assert port == {"temperature": 0.75, "max_tokens": 8192}  # no seed: the port sends Claude none
    assert editor == again == {"max_tokens": 64000}
    # the model's maximum is asked for once
    assert [r.path for r in fake_llm.requests if r.method == "GET"] == ["/v1/models/claude-sonnet-4-5"]


def test_anthropic_model_without_a_reported_maximum(fake_llm, all_keys):
    fake_llm.script(Say("edit"))
    client = build_client(llm_settings(fake_llm, provider="anthropic", model="claude-opus-4-1"))
    client.complete(MESSAGES, **EDITOR_CALL)
    assert sampling_sent(fake_llm.completions[0].body) == {"max_tokens": FALLBACK_MAX_TOKENS}


def test_the_ledger_says_what_went_out_and_what_did_not(fake_llm, all_keys, tmp_path):
    fake_llm.script(Say("ok"), Say("cut", finish_reason="length"))
    client = build_client(llm_settings(fake_llm, provider="openrouter", model="qwen/qwen3-235b-a22b-2507"),
                          run_dir=tmp_path)
    truncated = []
    client.bind_truncations(truncated.append)
    client.complete(MESSAGES, purpose="idea", **PORT_CALL)
    client.complete(MESSAGES, purpose="edit", **EDITOR_CALL)
    first, second = (json.loads(line) for line in (tmp_path / "llm_calls.jsonl").read_text().splitlines())
    assert first["sent"] == {"max_tokens": 8192} and first["unsent"] == ["temperature", "seed"]
    assert second["sent"] == {} and second["unsent"] == []
    # a reply that ends on its length limit is counted and named
    assert client.truncated_calls == 1 and truncated == ["edit"]

"""Provider resolution, prices and redaction: no network."""

import logging

import pytest

from pytest_fmlbench.llm import LLMSettings, LLMSetupError, PriceTable, infer_provider, preflight, resolve
from pytest_fmlbench.llm.redact import MASK, guard_loggers, redact, register_secret


@pytest.mark.parametrize("model, provider", [
    ("gpt-5.4", "openai"), ("gpt-4o-mini", "openai"), ("o1", "openai"), ("o3-mini", "openai"),
    ("o4-mini", "openai"), ("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-pro", "google"),
    ("meta-llama/llama-3.3-70b-instruct", "openrouter"), ("openai/gpt-4o", "openrouter"),
])
def test_provider_inferred_from_model_name(model, provider):
    assert infer_provider(model) == provider


def test_custom_base_url_means_a_users_server_unless_the_name_is_openai_or_claude():
    assert infer_provider("Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1") == "openai-compatible"
    assert infer_provider("llama3.2", "http://127.0.0.1:11434/v1") == "openai-compatible"
    assert infer_provider("gpt-4o", "http://127.0.0.1:8000/v1") == "openai"
    assert infer_provider("claude-haiku-4-5", "http://127.0.0.1:8000/v1") == "anthropic"


def test_ambiguous_model_name_is_one_line_asking_for_a_provider():
    with pytest.raises(LLMSetupError, match=r"^cannot tell the provider of model 'mystery'; pass --provider"):
        resolve("mystery", None, None, env={})


def test_keys_come_from_the_providers_variables():
    assert resolve("gpt-4o", None, None, env={"OPENAI_API_KEY": "sk-a"}).api_key == "sk-a"
    google = resolve("gemini-2.5-flash", None, None, env={"GEMINI_API_KEY": "g-key"})
    assert (google.api_key, google.key_source, google.provider.protocol) == ("g-key", "GEMINI_API_KEY", "openai")
    assert google.base_url.startswith("https://generativelanguage.googleapis.com/")
    router = resolve("openai/gpt-4o", None, None, env={"OPENROUTER_API_KEY": "r-key"})
    assert (router.provider.name, router.base_url) == ("openrouter", "https://openrouter.ai/api/v1")


@pytest.mark.parametrize("model, provider, message", [
    ("gpt-4o", None, "provider openai needs an API key: set OPENAI_API_KEY in the environment"),
    ("claude-opus-4-5", None, "provider anthropic needs an API key: set ANTHROPIC_API_KEY in the environment"),
    ("gemini-2.5-pro", None, "provider google needs an API key: set GOOGLE_API_KEY or GEMINI_API_KEY in the environment"),
    ("x/y", "openrouter", "provider openrouter needs an API key: set OPENROUTER_API_KEY in the environment"),
    ("gpt-4o", "azure", "unknown provider 'azure'; providers: openai, anthropic, google, openrouter, openai-compatible, local"),
    ("llama3", "openai-compatible", "--provider=openai-compatible needs --base-url=http://HOST:PORT/v1"),
])
def test_setup_problems_are_one_line(model, provider, message):
    with pytest.raises(LLMSetupError) as err:
        resolve(model, provider, None, env={})
    assert str(err.value) == message


def test_users_server_needs_no_key_and_never_gets_a_hosted_providers_key():
    endpoint = resolve("llama3", "openai-compatible", "http://127.0.0.1:1/v1", env={"OPENAI_API_KEY": "sk-real"})
    assert endpoint.api_key is None
    keyed = resolve("llama3", "openai-compatible", "http://127.0.0.1:1/v1", env={"FMLBENCH_LLM_API_KEY": "mine"})
    assert keyed.api_key == "mine"


def test_base_url_must_be_http_and_local_defaults_its_model():
    with pytest.raises(LLMSetupError, match="must start with http"):
        resolve("gpt-4o", "openai", "127.0.0.1:8000", env={"OPENAI_API_KEY": "k"})
    assert resolve(None, "local", None, env={}).model == "smollm2-135m-instruct"
    with pytest.raises(LLMSetupError, match="no model given"):
        resolve(None, "openai", None, env={})


def test_endpoint_repr_never_shows_the_key():
    endpoint = resolve("gpt-4o", None, None, env={"OPENAI_API_KEY": "sk-never-print-me-123"})
    assert "sk-never" not in repr(endpoint) and "sk-never" not in str(endpoint)
    assert "OPENAI_API_KEY" in repr(endpoint)


# -- prices --------------------------------------------------------------------------------------
def test_list_prices_come_from_genai_prices_with_snapshots_and_vendor_prefixes():
    from genai_prices import Usage as PricedUsage, calc_price

    table = PriceTable.builtin()
    assert table.lookup("anthropic", "claude-sonnet-4-5-20250929") == table.lookup("anthropic", "claude-sonnet-4-5")
    assert table.lookup("openai", "gpt-4.1-2025-04-14") == table.lookup("openai", "gpt-4.1")
    assert table.lookup("openrouter", "openai/gpt-4o").input == table.lookup("openai", "gpt-4o").input
    assert table.lookup("local", "smollm2-135m-instruct").output == 0.0
    # a user's own server has no list price, whatever name its model has
    assert table.lookup("openai-compatible", "llama3") is None
    assert table.lookup("openai-compatible", "gpt-4o") is None
    assert table.lookup("openai", "gpt-4o-mini") != table.lookup("openai", "gpt-4o")
    # the same numbers as the library's own calculator
    listed = calc_price(PricedUsage(input_tokens=123_456, cache_read_tokens=20_000, output_tokens=7_890),
                        "gemini-2.5-pro", provider_id="google")
    ours = table.usage("google", "gemini-2.5-pro", input_tokens=123_456, output_tokens=7_890, cached_tokens=20_000)
    assert ours.cost_usd == pytest.approx(float(listed.total_price))


def test_pricing_reads_the_bundled_snapshot_and_never_the_network(monkeypatch):
    import genai_prices.update_prices

    def no_network(*args, **kwargs):
        raise AssertionError("genai-prices tried to fetch prices")

    monkeypatch.setattr(genai_prices.update_prices.httpx2, "get", no_network)
    monkeypatch.setattr(genai_prices.update_prices.UpdatePrices, "start", no_network)
    assert PriceTable.load().usage("anthropic", "claude-haiku-4-5", input_tokens=10, output_tokens=5).cost_usd > 0


def test_cost_counts_cached_input_at_its_own_rate_and_unknown_is_none_never_zero():
    table = PriceTable.builtin()
    price = table.lookup("openai", "gpt-4o")
    assert price.cached_input is not None and price.cached_input < price.input
    usage = table.usage("openai", "gpt-4o", input_tokens=1_000_000, output_tokens=100_000, cached_tokens=400_000)
    expected = (600_000 * price.input + 400_000 * price.cached_input + 100_000 * price.output) / 1e6
    assert usage.cost_usd == pytest.approx(expected)
    full = table.usage("openai", "gpt-4o", input_tokens=1_000_000, output_tokens=100_000)
    assert usage.cost_usd < full.cost_usd
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens, usage.calls) == (1_000_000, 400_000, 100_000, 1)
    unknown = table.usage("openai-compatible", "llama3", input_tokens=10, output_tokens=5)
    assert unknown.cost_usd is None and unknown.total_tokens == 15
    assert table.usage("openai", "no-such-model-xyz", input_tokens=10, output_tokens=5).cost_usd is None
    assert table.usage("openai", "gpt-4o", input_tokens=5, output_tokens=5, tokens_known=False).cost_usd is None
    assert (unknown + usage).cost_usd is None


def test_user_price_table_overrides_and_extends(tmp_path):
    (tmp_path / "p.yaml").write_text("models:\n  gpt-4o: {input: 1.0, output: 2.0}\n  openai-compatible:llama3: {input: 0, output: 0}\n")
    table = PriceTable.load(tmp_path / "p.yaml")
    price = table.lookup("openai", "gpt-4o")
    assert (price.input, price.output, price.cached_input) == (1.0, 2.0, None)
    # no cached price given: cached tokens cost as ordinary input
    assert table.usage("openai", "gpt-4o", input_tokens=10**6, output_tokens=0, cached_tokens=10**6).cost_usd == 1.0
    assert table.usage("openai-compatible", "llama3", input_tokens=10, output_tokens=5).cost_usd == 0.0
    (tmp_path / "bare.json").write_text('{"my-model": {"input": 3, "cached_input": 1, "output": 4}}')
    assert PriceTable.load(tmp_path / "bare.json").lookup("openai-compatible", "my-model").cached_input == 1


@pytest.mark.parametrize("content, message", [
    ("models:\n  gpt-4o: {input: -1, output: 2}\n", "models.gpt-4o.input: Input should be greater than or equal to 0"),
    ("models:\n  gpt-4o: {inptu: 1, output: 2}\n", "models.gpt-4o.input: Field required"),
    ("models: [1, 2\n", "not valid JSON/YAML"),
])
def test_bad_price_table_is_one_line(tmp_path, content, message):
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(LLMSetupError) as err:
        PriceTable.load(path)
    assert str(err.value).startswith(f"--price-table {path}: ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_cost_budget_needs_a_known_price():
    settings = LLMSettings(model="llama3", provider="openai-compatible", base_url="http://127.0.0.1:9/v1",
                           max_cost_usd=1.0)
    with pytest.raises(LLMSetupError, match=r"^--max-cost-usd needs the price of 'llama3' \(openai-compatible\)"):
        preflight(settings, env={}, contact=False)


# -- redaction -----------------------------------------------------------------------------------
def test_redaction_masks_known_secrets_and_key_shapes():
    register_secret("custom-secret-value-42")
    text = redact("a custom-secret-value-42 b sk-proj-abcdefghijklmnop1234 c AIzaSyA1234567890abcdefghijkl d Bearer tok_12345678")
    assert "custom-secret" not in text and "sk-proj" not in text and "AIzaSy" not in text and "tok_1234" not in text
    assert text.count(MASK) == 4


def test_sdk_debug_logs_are_redacted(caplog):
    register_secret("sk-logged-secret-0000111122223333")
    child = logging.getLogger("openai._base_client")
    guard_loggers()
    with caplog.at_level(logging.DEBUG, logger="openai"):
        child.debug("Request options: %s", {"headers": {"Authorization": "Bearer sk-logged-secret-0000111122223333"}})
    assert caplog.records and "sk-logged-secret" not in caplog.text

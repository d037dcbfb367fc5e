from .fixtures import ANTHROPIC_KEY, OPENAI_KEY, api_keys, fake_llm, llm_settings, run_agent, run_aide  # noqa: F401

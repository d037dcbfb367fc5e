"""The loopback LLM server, test keys, and in-process agent runs against it, as fixtures.

Kept in a plain module so that tests outside this folder (tests/agents/) can import the fixtures too;
this folder's conftest re-exports them.
"""

import json
from pathlib import Path

import pytest

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.llm import LLMClient, LLMSettings, make_llm_factory
from pytest_fmlbench.runner import RunSettings, execute
from pytest_fmlbench.spec import load_task

from .fake_llm import FakeLLM, Seen

TOY = Path(__file__).parents[1] / "data" / "toy_task"
OPENAI_KEY = "sk-test-LOOPBACK-openai-5f1c9e27d3a4"
ANTHROPIC_KEY = "sk-ant-test-LOOPBACK-anthropic-8b2d4e6f"
# variables that would send a developer's real keys or endpoints into the tests
_FOREIGN = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "FMLBENCH_LLM_API_KEY", "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "ANTHROPIC_AUTH_TOKEN")


@pytest.fixture
def fake_llm():
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def api_keys(monkeypatch):
    for var in _FOREIGN:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    return {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY}


def kill_at_call(monkeypatch, when) -> None:
    """Kill the run in the middle, as a killed process would leave it, just before the first LLM call for
    which ``when(seen)`` is true (``seen``: the request as the loopback server would see it; it is never
    sent). A failing provider no longer does this: the agents go on with what their ports make of it."""
    real = LLMClient.complete

    def complete(self, messages, **kwargs):
        messages = [dict(m) for m in messages]
        if when(Seen("POST", "/v1/chat/completions", {}, {"model": self.model, "messages": messages}, 0.0)):
            raise RuntimeError("the run was killed here (test)")
        return real(self, messages, **kwargs)

    monkeypatch.setattr(LLMClient, "complete", complete)


def llm_settings(fake_llm, **overrides) -> LLMSettings:
    """Settings pointing the real SDKs at the loopback server, with back-off kept tiny."""
    values = {"model": "gpt-4o", "provider": "openai", "base_url": fake_llm.url, "backoff_s": 0.001,
              "timeout_s": 10.0, "retries": 4}
    values.update(overrides)
    return LLMSettings(**values)


class AgentRun:
    def __init__(self, outcome):
        self.record = outcome.record
        self.store = outcome.store
        self.steps = outcome.store.load_steps()

    @property
    def dir(self) -> Path:
        return self.store.dir

    def ledger(self) -> list[dict]:
        path = self.dir / "llm_calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []

    def files(self, step) -> dict[str, str]:
        return self.store.read_snapshot(self.steps[step - 1].snapshot)


@pytest.fixture
def run_agent(tmp_path, fake_llm, api_keys):
    """Run a built-in agent in-process on a task (the toy task by default) against the loopback server."""

    def run(name: str, steps: int = 4, options: dict | None = None, seed: int = 0, task: Path = TOY,
            in_process: bool = False, **llm) -> AgentRun:
        cls = load_agent_class(name)
        settings = llm_settings(fake_llm, **llm)
        run_settings = RunSettings(
            agent_cls=cls, agent_name=name, agent_options=cls.Options(**(options or {})),
            out_dir=tmp_path / "out", steps=steps, model=settings.model if cls.uses_llm else None,
            provider=settings.provider if cls.uses_llm else None,
            llm_factory=make_llm_factory(settings) if cls.uses_llm else None,
            # agent behaviour, not isolation, is under test here (isolation has its own tests)
            sandboxed=False,
            # in the harness's process a test can reach into the agent (e.g. make it fail at a chosen point)
            agent_mode="in process" if in_process else "process",
        )
        return AgentRun(execute(load_task(task / "task.yaml"), seed, run_settings))

    return run


@pytest.fixture
def run_aide(run_agent):
    """Run AIDE in-process on the toy task against the loopback server; returns an AgentRun."""

    def run(steps: int = 4, options: dict | None = None, seed: int = 0, **llm) -> AgentRun:
        return run_agent("aide", steps=steps, options=options, seed=seed, **llm)

    return run

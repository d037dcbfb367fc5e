"""mini-swe-agent (the 100-line bash-only agent from the SWE-agent team), run in the working copy with its
own agent, model classes and shipped prompts, its model calls through the harness's gateway (litellm).
How it is run and what it sends: docs/coding-tools.md."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pytest_fmlbench.agentkit.coding_tool import CodingToolAgent, CodingToolOptions, json_object, text_event, tools_dir
from pytest_fmlbench.session import Session

VERSION = "2.4.6"
PLACEHOLDER_KEY = "fmlbench-placeholder"
# where the runner finds the gateway: the base URL is known only when the environment is built
API_BASE_ENV, API_KEY_ENV = "FMLBENCH_MINI_API_BASE", "FMLBENCH_MINI_API_KEY"
# without an explicit limit its environment kills a command after 30 s, and a validation run takes longer
_UNLIMITED_S = 24 * 3600
# `mini -c KEY=VALUE` overrides of its configuration, for the keys that change how it works, never where its
# calls go or what it may reach
SAFE_KEYS = ("agent.step_limit", "agent.max_consecutive_format_errors", "model.model_kwargs.temperature",
             "model.model_kwargs.top_p", "model.model_kwargs.max_tokens", "model.model_kwargs.reasoning_effort",
             "model.set_cache_control", "environment.timeout")


class MiniSweAgentOptions(CodingToolOptions):
    tool_args: str = Field("", description="overrides of its configuration, KEY=VALUE as `mini -c` takes them; "
                           f"KEY one of {', '.join(SAFE_KEYS)}")
    config: Literal["mini", "mini_textbased"] = Field(
        "mini", description="its shipped configuration: mini (v2's default: a bash tool call per action) or "
        "mini_textbased (v1's style: one fenced mswea_bash_command block per reply, no tools)")


def _runner() -> None:
    """The program mini-swe-agent's own interpreter runs (its source is written to a file; standard library
    and mini-swe-agent only). Prints the trajectory as it grows, one JSON event per line."""
    import json
    import os
    import sys

    settings = json.loads(open(sys.argv[1], encoding="utf-8").read())
    # the events are the only thing on stdout: whatever the libraries print goes to stderr
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)

    def emit(**event):
        events.write(json.dumps(event, default=str) + "\n")

    import litellm
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_from_spec
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models import get_model
    from minisweagent.utils.serialize import recursive_merge

    config = recursive_merge(get_config_from_spec(settings["config"]),
                             *(get_config_from_spec(spec) for spec in settings["overrides"]))
    protocol = settings["protocol"]
    model_config = recursive_merge(config.get("model", {}), {
        "model_name": ("anthropic/" if protocol == "anthropic" else "openai/") + settings["model"],
        # the shipped text-based config leaves the class to the command line (--model-class)
        **({"model_class": "litellm_textbased"} if settings["config"] == "mini_textbased" else {}),
        # litellm's price table does not know every model (it raises); the gateway prices every call anyway
        "cost_tracking": "ignore_errors",
        "model_kwargs": {"api_base": os.environ[settings["api_base_env"]] + ("/v1" if protocol == "openai" else ""),
                         "api_key": os.environ[settings["api_key_env"]]},
    })
    model = get_model(config=model_config)

    class Refused(Exception):
        """The gateway refused the call (a budget is spent, or it is not a model call): retrying cannot help."""

    # litellm reports an OpenAI-protocol 403 as a generic APIError, which mini-swe-agent retries for minutes
    query = model._query

    def refusing_query(*args, **kwargs):
        try:
            return query(*args, **kwargs)
        except litellm.exceptions.APIError as exc:
            if getattr(exc, "status_code", None) in (401, 403):
                raise Refused(str(exc)) from exc
            raise

    model._query = refusing_query
    model.abort_exceptions = [*model.abort_exceptions, Refused]

    class Reporting(DefaultAgent):
        def add_messages(self, *messages):
            for message in messages:
                report(message)
            return super().add_messages(*messages)

    def report(message):
        role, extra = message.get("role"), message.get("extra") or {}
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        if role == "system" or (role == "user" and not extra):
            emit(type="prompt", role=role, text=text)
        elif role == "assistant":
            if text:
                emit(type="message", text=text)
            for action in extra.get("actions", []):
                emit(type="command", command=action.get("command", ""), id=action.get("tool_call_id"))
            usage = (extra.get("response") or {}).get("usage") or {}
            if usage:
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                emit(type="usage", input_tokens=usage.get("prompt_tokens"),
                     output_tokens=usage.get("completion_tokens"), cached_tokens=cached)
        elif role == "exit":
            emit(type="result", ok=extra.get("exit_status") == "Submitted", exit_status=extra.get("exit_status"),
                 text=text)
        elif extra.get("interrupt_type") == "FormatError":
            emit(type="format_error", text=text, model_response=extra.get("model_response"))
        elif "returncode" in extra:
            emit(type="output", id=message.get("tool_call_id"), text=extra.get("raw_output", ""),
                 exit_code=extra.get("returncode"), exception=extra.get("exception_info") or None)
        else:
            emit(type=str(role), text=text)

    agent_config = {key: value for key, value in config.get("agent", {}).items()
                    if key not in ("mode", "whitelist_actions", "confirm_exit", "agent_class")}
    # its steps are model calls, not ours; its cost is litellm's guess; the harness has both budgets
    agent_config.update(step_limit=agent_config.get("step_limit", 0), cost_limit=0, output_path=None)
    environment = LocalEnvironment(**recursive_merge({"timeout": settings["timeout_s"]}, config.get("environment", {})))
    agent = Reporting(model, environment, **agent_config)
    agent.run(settings["task"])


class MiniSweAgent(CodingToolAgent):
    """mini-swe-agent 2.4.6 (PyPI), its own agent and shipped prompts, in the working copy."""

    name = "mini-swe-agent"
    tool_name = "mini-swe-agent"
    protocols = ("anthropic", "openai")
    safe_flags = {key: True for key in SAFE_KEYS}
    Options = MiniSweAgentOptions

    def find_binary(self) -> str:
        venv = tools_dir() / "mini-swe-agent"
        python = venv / "bin" / "python"
        if not python.exists() or not any(venv.glob("lib/python*/site-packages/minisweagent/__init__.py")):
            raise self.missing(f"no mini-swe-agent {VERSION} in {venv}")
        return str(python)

    @property
    def folder(self) -> Path:
        return self.home / "mini-swe-agent"

    def overrides(self) -> list[str]:
        """The tool_args as `KEY=VALUE` specs (a flag and its value may also come as two words)."""
        specs, words = [], list(self.extra_args)
        while words:
            word = words.pop(0)
            specs.append(word if "=" in word else f"{word}={words.pop(0)}")
        return specs

    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        self.folder.mkdir(parents=True, exist_ok=True)
        runner = self.folder / "runner.py"
        runner.write_text(textwrap.dedent(inspect.getsource(_runner)) + "\n\n_runner()\n")
        settings = {
            "config": self.options.config, "overrides": self.overrides(), "task": prompt, "model": model or "",
            "protocol": self.gateway_protocol, "api_base_env": API_BASE_ENV, "api_key_env": API_KEY_ENV,
            "timeout_s": int(self.options.wall_clock_s or _UNLIMITED_S),
        }
        (self.folder / "settings.json").write_text(json.dumps(settings))
        # -I: its own interpreter, blind to our PYTHONPATH and to the user's site-packages
        return [self.binary, "-I", str(runner), str(self.folder / "settings.json")]

    # the gateway's protocol: litellm's model name and base URL depend on it
    gateway_protocol = "openai"

    def run(self, session: Session) -> None:
        if session.gateway is not None:
            self.gateway_protocol = session.gateway["protocol"]
        super().run(session)

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        return {
            API_BASE_ENV: base_url or "", API_KEY_ENV: PLACEHOLDER_KEY,
            # else it asks for a first-time setup, prints a banner, and litellm downloads its price table
            "MSWEA_CONFIGURED": "1", "MSWEA_SILENT_STARTUP": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "MSWEA_GLOBAL_CONFIG_DIR": str(self.folder / "config"),
        }

    def transcript_event(self, line: str) -> dict[str, Any] | None:
        event = json_object(line)
        return event if event is not None and "type" in event else text_event(line)


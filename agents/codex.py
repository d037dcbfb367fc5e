"""OpenAI's Codex CLI (`codex exec`), run headless in the working copy, its model calls through the
harness's gateway (the Responses API). How it is run and what it sends: docs/coding-tools.md."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from pytest_fmlbench.agentkit.coding_tool import (
    CodingToolAgent, CodingToolOptions, ToolError, json_object, text_event, tools_dir,
)

VERSION = "0.169.0"
PLACEHOLDER_KEY = "fmlbench-placeholder"
KEY_ENV = "FMLBENCH_GATEWAY_KEY"
PROVIDER = "fmlbench"
# configuration keys a user may override with -c: how the model reasons and how much it reads, never where
# its calls go (a provider, a base URL), what it may reach (sandbox, web search) or what it prints
SAFE_CONFIG_KEYS = ("model_reasoning_effort", "model_reasoning_summary", "model_verbosity",
                    "model_auto_compact_token_limit", "tool_output_token_limit", "project_doc_max_bytes",
                    "hide_agent_reasoning")
_TRIPLES = {"x86_64": ("x64", "x86_64-unknown-linux-musl"), "amd64": ("x64", "x86_64-unknown-linux-musl"),
            "aarch64": ("arm64", "aarch64-unknown-linux-musl"), "arm64": ("arm64", "aarch64-unknown-linux-musl")}
_CATALOG_TIMEOUT_S = 60


class CodexOptions(CodingToolOptions):
    tool_args: str = Field("", description="more of Codex's own flags, as on its command line; only these: "
                           f"-c KEY=VALUE (--config) with KEY one of {', '.join(SAFE_CONFIG_KEYS)}; --disable FEATURE")
    catalog_model: str = Field(
        "gpt-5.5", description="for a model Codex does not know, the model of its bundled catalog whose "
        "metadata (tools, prompts, context window) it is given; empty: Codex's fallback (no apply_patch tool)")

    @field_validator("tool_args")
    @classmethod
    def _only_safe_config_keys(cls, value: str) -> str:
        # the flags are checked by the base class; a -c override is only as safe as the key it sets
        try:
            words = shlex.split(value)
        except ValueError:
            return value  # the base class says why it cannot be split
        for i, word in enumerate(words):
            flag, _, inline = word.partition("=")
            if flag in ("-c", "--config"):
                setting = inline if inline else (words[i + 1] if i + 1 < len(words) else "")
                key = setting.split("=", 1)[0].strip()
                if key not in SAFE_CONFIG_KEYS:
                    raise ValueError(f"-c {key or '(nothing)'}: not a setting this tool may be given here; "
                                     f"its safe settings: {', '.join(SAFE_CONFIG_KEYS)}")
        return value


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    # a JSON string is a TOML basic string, except that TOML also wants DEL escaped
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def config_toml(base_url: str, catalog: Path | None) -> str:
    top = {
        "model_provider": PROVIDER,
        "approval_policy": "never",
        # our sandbox is its sandbox; its own (Landlock, seccomp, bwrap) is neither needed nor sure to work in ours
        "sandbox_mode": "danger-full-access",
        # a login shell's /etc/profile may reset PATH and lose fmlbench-validate
        "allow_login_shell": False,
        # a server-side tool of the model call: the web, from a sandbox that has no network
        "web_search": "disabled",
        "check_for_update_on_startup": False,
    }
    if catalog is not None:
        top["model_catalog_json"] = str(catalog)
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    lines += ["", "[analytics]", "enabled = false", "", f"[model_providers.{PROVIDER}]"]
    provider = {"name": "fmlbench gateway", "base_url": base_url.rstrip("/") + "/v1", "env_key": KEY_ENV,
                "wire_api": "responses"}
    lines += [f"{k} = {_toml(v)}" for k, v in provider.items()]
    return "\n".join(lines) + "\n"


def _item_event(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item.get("type")
    if kind == "agent_message":
        return {"type": "message", "text": item.get("text", "")}
    if kind == "reasoning":
        return {"type": "thinking", "text": item.get("text", "")}
    if kind == "command_execution":
        return {"type": "output", "id": item.get("id"), "text": item.get("aggregated_output", ""),
                "exit_code": item.get("exit_code"), "status": item.get("status")}
    if kind == "file_change":
        return {"type": "edit", "tool": "apply_patch", "changes": item.get("changes", []), "status": item.get("status")}
    if kind == "error":
        return {"type": "error", "message": item.get("message", "")}
    return {"type": "tool", "name": kind, "item": item}


class CodexAgent(CodingToolAgent):
    """Codex CLI 0.169.0 (npm @openai/codex), headless (`codex exec --json`), in the working copy."""

    name = "codex"
    tool_name = "codex"
    protocols = ("openai",)
    safe_flags = {"-c": True, "--config": True, "--disable": True}
    Options = CodexOptions

    def find_binary(self) -> str:
        # the platform package's binary itself: the package's launcher is a Node script, and Node is not
        # needed (nor always there) where the tool runs
        machine = platform.machine().lower()
        arch, triple = _TRIPLES.get(machine, (machine, f"{machine}-unknown-linux-musl"))
        binary = tools_dir() / "node_modules" / "@openai" / f"codex-linux-{arch}" / "vendor" / triple / "bin" / "codex"
        if not binary.is_file():
            raise self.missing(f"no {binary}; Codex {VERSION} from npm")
        return str(binary)

    @property
    def codex_home(self) -> Path:
        return self.home / "codex"

    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        argv = [self.binary, "exec", "--json",
                # a rerun is a new session told what the recorded steps did, never a resumed thread
                "--ephemeral",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                # a key our config.toml misspells is an error, not silently ignored
                "--strict-config"]
        if model:
            argv += ["-m", model]
        return argv + self.extra_args + ["--", prompt]

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        # Codex reads its provider from a file: written here, where the gateway's loopback URL is known
        self.codex_home.mkdir(parents=True, exist_ok=True)
        catalog = self._catalog(model) if model else None
        if base_url:
            (self.codex_home / "config.toml").write_text(config_toml(base_url, catalog))
        return {"CODEX_HOME": str(self.codex_home), KEY_ENV: PLACEHOLDER_KEY}

    def _catalog(self, model: str) -> Path | None:
        """A catalog giving ``model`` the metadata of the ``catalog_model`` option, when Codex's bundled
        catalog does not know ``model``; None when it does, or when the option is empty."""
        wanted = self.options.catalog_model.strip()
        if not wanted:
            return None
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.home), "CODEX_HOME": str(self.codex_home)}
        try:
            done = subprocess.run([self.binary, "debug", "models", "--bundled"], capture_output=True, text=True,
                                  env=env, stdin=subprocess.DEVNULL, timeout=_CATALOG_TIMEOUT_S)
            bundled = json.loads(done.stdout)["models"]
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
            raise ToolError(f"codex could not list its bundled models ({type(exc).__name__}: {exc})") from None
        slugs = [m.get("slug") for m in bundled if isinstance(m, dict)]
        if model in slugs:
            return None
        if wanted not in slugs:
            raise ToolError(f"codex: catalog_model={wanted!r} is not in Codex {VERSION}'s bundled catalog "
                            f"(it has: {', '.join(s for s in slugs if s)}); set one of those, or catalog_model= "
                            "for Codex's fallback metadata")
        entry = dict(bundled[slugs.index(wanted)], slug=model, display_name=model)
        path = self.codex_home / "models.json"
        path.write_text(json.dumps({"models": [entry]}))
        return path

    def transcript_event(self, line: str) -> dict[str, Any] | None:
        data = json_object(line)
        if data is None:
            return text_event(line)
        kind = data.get("type")
        if kind == "thread.started":
            return {"type": "start", "tool": "codex", "version": VERSION, "thread_id": data.get("thread_id")}
        item = data.get("item")
        if kind == "item.started" and isinstance(item, dict) and item.get("type") == "command_execution":
            # at its start, so that a command that validates is in the transcript of the step it makes
            return {"type": "command", "id": item.get("id"), "command": item.get("command", "")}
        if kind in ("turn.started", "item.started", "item.updated"):
            return None  # the completed item says it all
        if kind == "item.completed" and isinstance(item, dict):
            return _item_event(item)
        if kind == "turn.completed":
            return {"type": "result", "ok": True, "usage": data.get("usage")}
        if kind == "turn.failed":
            error = data.get("error") or {}
            return {"type": "result", "ok": False, "error": error.get("message", "") if isinstance(error, dict) else str(error)}
        if kind == "error":
            return {"type": "retry" if "Reconnecting" in str(data.get("message")) else "error",
                    "message": data.get("message", "")}
        return {"type": str(kind)}

"""Claude Code (Anthropic's coding agent CLI), run headless in the working copy, its model calls through
the harness's gateway. How it is run and what it sends: docs/coding-tools.md."""

from __future__ import annotations

import json
import platform
from typing import Any

from pydantic import Field

from pytest_fmlbench.agentkit.coding_tool import CodingToolAgent, CodingToolOptions, json_object, text_event, tools_dir

VERSION = "2.1.328"
PLACEHOLDER_KEY = "fmlbench-placeholder"
# Claude Code's own tools that would leave the sandbox: WebSearch runs on the model provider's side
WITHOUT_TOOLS = ("WebFetch", "WebSearch")
# without an explicit limit its Bash tool kills a command after 2 minutes, and a validation run may take longer
_UNLIMITED_MS = 24 * 3600 * 1000
_MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
# flags that change how it works, never where its model calls go, what it may reach or what it prints:
# flag -> whether it takes a value
SAFE_FLAGS = {
    "--effort": True, "--max-budget-usd": True, "--allowedTools": True, "--allowed-tools": True,
    "--disallowedTools": True, "--disallowed-tools": True, "--tools": True, "--autocompact": True,
    "--disable-slash-commands": False, "--exclude-dynamic-system-prompt-sections": False,
    "--bare": False, "--safe-mode": False,
}


class ClaudeCodeOptions(CodingToolOptions):
    tool_args: str = Field("", description="more of Claude Code's own flags, as on its command line; only these: "
                           + ", ".join(f + (" VALUE" if v else "") for f, v in SAFE_FLAGS.items()))


def _text(value: Any) -> str:
    """A tool result's content as text (a string, or a list of text blocks)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(b.get("text", "") for b in value if isinstance(b, dict) and b.get("type") == "text")
    return "" if value is None else json.dumps(value)


def _block_event(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "message", "text": block.get("text", "")}
    if kind == "thinking":
        return {"type": "thinking", "text": block.get("thinking", "")}
    if kind != "tool_use":
        return {"type": kind or "block"}
    name, args = block.get("name", ""), block.get("input") or {}
    if name == "Bash":
        return {"type": "command", "id": block.get("id"), "command": args.get("command", "")}
    if name in ("Edit", "Write", "NotebookEdit", "MultiEdit"):
        event = {"type": "edit", "id": block.get("id"), "tool": name,
                 "path": args.get("file_path") or args.get("notebook_path", "")}
        for key in ("old_string", "new_string", "content", "new_source", "edits"):
            if key in args:
                event[key] = args[key]
        return event
    return {"type": "tool", "id": block.get("id"), "name": name, "input": args}


def _result_event(block: dict[str, Any], detail: Any) -> dict[str, Any]:
    event = {"type": "output", "id": block.get("tool_use_id"), "text": _text(block.get("content")),
             "is_error": bool(block.get("is_error"))}
    if isinstance(detail, dict) and "stdout" in detail:
        # a command's own streams, which the model got merged into the text above
        event.update(stdout=detail.get("stdout", ""), stderr=detail.get("stderr", ""))
    return event


def _one(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not events:
        return None
    return events[0] if len(events) == 1 else {"type": "group", "events": events}


class ClaudeCodeAgent(CodingToolAgent):
    """Claude Code 2.1.328 (npm @anthropic-ai/claude-code), headless (`claude -p`, stream-json), in the working copy."""

    name = "claude-code"
    tool_name = "claude"
    protocols = ("anthropic",)
    safe_flags = SAFE_FLAGS
    Options = ClaudeCodeOptions

    def find_binary(self) -> str:
        # the platform package's binary itself: the package's launcher is only linked to it by an npm
        # install script, which a cautious npm skips
        modules = tools_dir() / "node_modules" / "@anthropic-ai"
        machine = _MACHINES.get(platform.machine().lower(), platform.machine().lower())
        for variant in (f"linux-{machine}", f"linux-{machine}-musl"):
            binary = modules / f"claude-code-{variant}" / "claude"
            if binary.is_file():
                return str(binary)
        raise self.missing(f"no {modules}/claude-code-linux-{machine}/claude; Claude Code {VERSION} from npm")

    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        argv = [self.binary, "--print", "--output-format", "stream-json", "--verbose",
                # our sandbox is its sandbox: nobody is there to answer a permission prompt
                "--dangerously-skip-permissions",
                # a rerun is a new session told what the recorded steps did, never a resumed conversation
                "--no-session-persistence",
                "--disallowedTools", *WITHOUT_TOOLS]
        if model:
            argv += ["--model", model]
        # after "--": neither a prompt that starts with a dash nor a variadic flag before it can misparse it
        return argv + self.extra_args + ["--", prompt]

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        timeout_ms = str(int(self.options.wall_clock_s * 1000) if self.options.wall_clock_s else _UNLIMITED_MS)
        env = {
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,  # the gateway drops it and adds the real key outside
            # as root (where the sandbox cannot remap the uid to 1000) it refuses to skip permissions without this
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "BASH_DEFAULT_TIMEOUT_MS": timeout_ms, "BASH_MAX_TIMEOUT_MS": timeout_ms,
        }
        if base_url:
            env["ANTHROPIC_BASE_URL"] = base_url
        if model:
            # without the first it sends retired ids (claude-opus-4-1) as its current Opus; the others keep
            # its background and sub-agent calls on the run's model too
            env["CLAUDE_CODE_DISABLE_LEGACY_MODEL_REMAP"] = "1"
            for name in ("ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
                         "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"):
                env[name] = model
        return env

    def transcript_event(self, line: str) -> dict[str, Any] | None:
        data = json_object(line)
        if data is None:
            return text_event(line)
        kind, message = data.get("type"), data.get("message") or {}
        if kind == "assistant":
            blocks = message.get("content") or []
            return _one([e for e in (_block_event(b) for b in blocks if isinstance(b, dict)) if e])
        if kind == "user":
            blocks = message.get("content")
            if not isinstance(blocks, list):
                return {"type": "user", "text": _text(blocks)}
            return _one([_result_event(b, data.get("tool_use_result")) for b in blocks
                         if isinstance(b, dict) and b.get("type") == "tool_result"])
        if kind == "system":
            subtype = data.get("subtype")
            if subtype == "init":
                return {"type": "start", "tool": "claude-code", "version": data.get("claude_code_version"),
                        "model": data.get("model"), "session_id": data.get("session_id"),
                        "tools": data.get("tools"), "cwd": data.get("cwd")}
            if subtype == "api_retry":
                return {"type": "retry", "attempt": data.get("attempt"), "status": data.get("error_status"),
                        "error": data.get("error")}
            return {"type": "system", "subtype": subtype}
        if kind == "result":
            return {"type": "result", "ok": not data.get("is_error"), "text": data.get("result", ""),
                    "turns": data.get("num_turns"), "stop_reason": data.get("stop_reason"),
                    "terminal_reason": data.get("terminal_reason"), "api_error_status": data.get("api_error_status"),
                    "usage": _usage(data.get("usage")), "duration_ms": data.get("duration_ms"),
                    # its own estimate at list prices; the run's cost is the gateway's
                    "tool_cost_usd": data.get("total_cost_usd")}
        return {"type": str(kind)}


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return {k: usage.get(k) for k in keys if k in usage}


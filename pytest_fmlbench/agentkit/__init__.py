"""Shared machinery of the research agents: the base class, agent loading, prompt pieces, reply parsing.

The agents themselves live in the top-level ``agents/`` folder, one module each (see ``loading``).
"""

from .base import Agent, AgentOptions
from .editing import CodeEditor, EditReply, metric_line, restore, task_context
from .loading import (
    NAMESPACE, AgentLoadError, agents_dir, builtin_names, load_agent_class, load_builtin, parse_agent_options,
)
from .prompting import ParsedReply, extract_json, parse_reply, render_files, reply_format, tail

__all__ = [
    "NAMESPACE", "Agent", "AgentLoadError", "AgentOptions", "CodeEditor", "EditReply", "ParsedReply",
    "agents_dir", "builtin_names", "extract_json", "load_agent_class", "load_builtin", "metric_line",
    "parse_agent_options", "parse_reply", "render_files", "reply_format", "restore", "tail", "task_context",
]

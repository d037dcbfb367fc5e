"""Shared machinery of the research agents: the base class, agent loading, prompt pieces, reply parsing.

The agents themselves live in the top-level ``agents/`` folder, one module each (see ``loading``).
"""

from .base import Agent, AgentOptions
from .editing import (
    CodeEditor, EditorOptions, EditReply, complete_or, metric_line, restore, run_error, task_context,
)
from .loading import (
    NAMESPACE, AgentLoadError, agents_dir, builtin_names, load_agent_class, load_builtin, parse_agent_options,
)
from .prompting import ParsedReply, extract_json, parse_port_reply, parse_reply, render_files, reply_format, tail

__all__ = [
    "NAMESPACE", "Agent", "AgentLoadError", "AgentOptions", "CodeEditor", "EditReply", "EditorOptions", "ParsedReply",
    "agents_dir", "builtin_names", "complete_or", "extract_json", "load_agent_class", "load_builtin", "metric_line",
    "parse_agent_options", "parse_port_reply", "parse_reply", "render_files", "reply_format", "restore", "run_error",
    "tail", "task_context",
]

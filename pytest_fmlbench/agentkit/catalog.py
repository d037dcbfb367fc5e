"""What ``fmlbench agents`` and ``pytest --fmlbench-agents`` print: every built-in agent, one block each."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass

from pydantic_core import PydanticUndefined

from .base import Agent
from .loading import AgentLoadError, builtin_names, load_builtin


@dataclass(frozen=True)
class OptionInfo:
    name: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class AgentInfo:
    name: str
    summary: str
    uses_llm: bool
    options: tuple[OptionInfo, ...]
    error: str = ""  # the module could not be loaded: why


def summary_of(cls: type[Agent]) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.strip().splitlines()[0] if doc.strip() else "(no description)"


def type_name(annotation) -> str:
    """A user-facing type: int, float, bool, str, 'a' | 'b', float | None, tuple[float, float]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(v) for v in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_name(a) for a in typing.get_args(annotation))
    if origin is not None and typing.get_args(annotation):  # tuple[float, float], list[int]
        return f"{origin.__name__}[{', '.join(type_name(a) for a in typing.get_args(annotation))}]"
    return getattr(annotation, "__name__", str(annotation))


def describe(cls: type[Agent]) -> AgentInfo:
    options = []
    for name, field in cls.Options.model_fields.items():
        default = field.default
        if default is PydanticUndefined:
            shown = "(required)"
        elif default is None:
            shown = "none"
        elif isinstance(default, tuple):  # as --agent-opt takes it: comma-separated
            shown = ",".join(str(v) for v in default)
        else:
            shown = str(default).lower() if isinstance(default, bool) else str(default)
        options.append(OptionInfo(name, type_name(field.annotation), shown, field.description or ""))
    return AgentInfo(cls.name or cls.__name__, summary_of(cls), cls.uses_llm, tuple(options))


def catalog() -> list[AgentInfo]:
    infos = []
    for name in builtin_names():
        try:
            infos.append(describe(load_builtin(name)))
        except AgentLoadError as exc:
            infos.append(AgentInfo(name, "", False, (), error=str(exc)))
    return infos


def render(infos: list[AgentInfo]) -> str:
    lines = []
    for info in infos:
        if info.error:
            lines += [f"{info.name}  (cannot be loaded)", f"  {info.error}", ""]
            continue
        llm = "needs an LLM (--model, --provider)" if info.uses_llm else "no LLM"
        lines += [f"{info.name}  [{llm}]", f"  {info.summary}"]
        if not info.options:
            lines.append("  options: none")
        else:
            lines.append("  options (--agent-opt NAME=VALUE):")
            width = max(len(f"{o.name}: {o.type} = {o.default}") for o in info.options)
            for o in info.options:
                head = f"{o.name}: {o.type} = {o.default}"
                lines.append(f"    {head.ljust(width)}  {o.description}".rstrip())
        lines.append("")
    return "\n".join(lines)

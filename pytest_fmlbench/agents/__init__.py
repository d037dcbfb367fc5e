"""Built-in research agents and loading of user agents (``package.module:Class`` or ``file.py:Class``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from pydantic import ValidationError

from .base import Agent, AgentOptions

BUILTIN = {
    "aide": "pytest_fmlbench.agents.aide:AideAgent",
    "baseline": "pytest_fmlbench.agents.baseline:BaselineAgent",
    "random-search": "pytest_fmlbench.agents.random_search:RandomSearchAgent",
}


class AgentLoadError(ValueError):
    """One line: which agent and why it cannot be used."""


def load_agent_class(spec: str) -> type[Agent]:
    target = BUILTIN.get(spec, spec)
    if ":" not in target:
        raise AgentLoadError(
            f"unknown agent {spec!r}; built-in agents: {', '.join(sorted(BUILTIN))} "
            "(or give package.module:Class or path/to/file.py:Class)"
        )
    where, _, attr = target.rpartition(":")
    try:
        module = _load_file(Path(where)) if where.endswith(".py") else importlib.import_module(where)
    except AgentLoadError:
        raise
    except Exception as exc:  # a user's module may fail in any way while importing
        raise AgentLoadError(f"agent {spec!r}: cannot import {where!r}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise AgentLoadError(f"agent {spec!r}: {where!r} has no attribute {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise AgentLoadError(f"agent {spec!r}: {attr} must subclass pytest_fmlbench.Agent")
    return cls


def _load_file(path: Path):
    if not path.is_file():
        raise AgentLoadError(f"agent file {str(path)!r} does not exist")
    name = f"fmlbench_user_agent_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def parse_agent_options(cls: type[Agent], pairs: list[str]) -> AgentOptions:
    """``name=value`` strings, typed and validated against the agent's declared options."""
    raw: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise AgentLoadError(f"--agent-opt {pair!r}: expected name=value")
        raw[name.strip()] = value.strip()
    known = set(cls.Options.model_fields)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise AgentLoadError(
            f"agent {cls.name or cls.__name__} has no option {', '.join(unknown)}; "
            f"options: {', '.join(sorted(known)) or '(none)'}"
        )
    try:
        return cls.Options.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise AgentLoadError(f"--agent-opt {err['loc'][0]}: {err['msg']}") from None


__all__ = ["Agent", "AgentOptions", "AgentLoadError", "BUILTIN", "load_agent_class", "parse_agent_options"]

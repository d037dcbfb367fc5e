"""Command-line options (one ``--help`` section) and the validated benchmark configuration."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from .agents import AgentLoadError, load_agent_class, parse_agent_options
from .runner import RunSettings

log = logging.getLogger("fmlbench")

DEFAULT_STEPS = 50  # the original's default budget
DEFAULT_OUT = "reports/fmlbench"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("fmlbench", "FML-bench: ML research agents as tests")
    group.addoption("--agent", metavar="NAME", help="research agent: a built-in name (baseline, random-search), "
                    "package.module:Class, or path/to/file.py:Class. Without it, benchmark items are skipped.")
    group.addoption("--agent-opt", action="append", default=[], metavar="NAME=VALUE",
                    help="an agent option (repeatable), validated against the agent's declared options")
    group.addoption("--model", metavar="MODEL", help="LLM the agent uses (agents that need one)")
    group.addoption("--provider", metavar="PROVIDER", help="LLM provider (inferred from --model where possible)")
    group.addoption("--steps", type=int, default=DEFAULT_STEPS, metavar="N",
                    help=f"validation runs per task (default {DEFAULT_STEPS}, as the original)")
    group.addoption("--seeds", type=int, default=1, metavar="K", help="seeds per task (default 1)")
    group.addoption("--fmlbench-out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"where run records and reports go (default {DEFAULT_OUT}, relative to the current directory)")
    group.addoption("--fresh", action="store_true", help="recompute runs instead of reusing recorded ones")


@dataclass(frozen=True)
class BenchConfig:
    settings: RunSettings
    seeds: int

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> BenchConfig | None:
        """None without --agent; raises pytest.UsageError (one line) on bad options."""
        spec = config.getoption("agent")
        if not spec:
            return None
        steps, seeds = config.getoption("steps"), config.getoption("seeds")
        if steps < 1:
            raise pytest.UsageError(f"--steps must be at least 1, got {steps}")
        if seeds < 1:
            raise pytest.UsageError(f"--seeds must be at least 1, got {seeds}")
        try:
            agent_cls = load_agent_class(spec)
            options = parse_agent_options(agent_cls, config.getoption("agent_opt"))
        except AgentLoadError as exc:
            raise pytest.UsageError(str(exc)) from None
        model = config.getoption("model")
        if agent_cls.uses_llm and not model:
            raise pytest.UsageError(f"agent {spec!r} needs an LLM: pass --model=MODEL")
        out = Path(config.getoption("fmlbench_out"))
        if not out.is_absolute():
            out = Path(config.invocation_params.dir) / out
        settings = RunSettings(
            agent_cls=agent_cls, agent_name=agent_cls.name or agent_cls.__name__, agent_options=options,
            out_dir=out, steps=steps, model=model, provider=config.getoption("provider"),
            fresh=config.getoption("fresh"), log=log.info,
        )
        return cls(settings, seeds)

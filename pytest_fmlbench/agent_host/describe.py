"""A user's agent, described by a process of its own: its name, whether it needs an LLM, its options.

The harness needs these before any run (the run's identity, the LLM preflight, one-line errors for
bad ``--agent-opt`` values), but importing the user's module here would run its top-level code in the
harness's process. A short-lived process, sandboxed like the agent's runs, imports it instead and
answers with plain data.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict

from ..agentkit.base import AgentOptions
from ..agentkit.loading import AgentLoadError
from .launcher import AgentLimits, AgentProcess
from .locate import AgentLocator
from .needs import AgentNeeds
from .outcome import one_line
from .protocol import MAX_MESSAGE_BYTES, ProtocolViolation, decode, encode

DESCRIBE_TIMEOUT_S = 120.0


class DescribedOptions(AgentOptions):
    """A user agent's options as its own process validated them (its Options class stays over there)."""

    model_config = ConfigDict(extra="allow", frozen=True)


@dataclass(frozen=True)
class AgentDescription:
    name: str
    uses_llm: bool
    options: AgentOptions
    needs: AgentNeeds = AgentNeeds()


def describe(locator: AgentLocator, pairs: list[str], *, sandboxed: bool, hidden: list[Path]) -> AgentDescription:
    """Raises AgentLoadError with one line (the same lines as loading the agent here would give)."""
    with tempfile.TemporaryDirectory(prefix="fmlbench-describe-") as tmp:
        log = Path(tmp) / "describe.log"
        proc = AgentProcess("describe", sandboxed=sandboxed, code=[Path(c) for c in locator.code], hidden=hidden,
                            hide_data=(), agent_limits=AgentLimits(), log_path=log)
        reply = None
        try:
            proc.conn.settimeout(DESCRIBE_TIMEOUT_S)
            proc.conn.sendall(encode({"locator": locator.to_json(), "pairs": list(pairs)}))
            line = proc.conn.makefile("rb").readline(MAX_MESSAGE_BYTES)
            reply = decode(line) if line.endswith(b"\n") else None
        except (OSError, ProtocolViolation):
            reply = None
        finally:
            proc.close(grace_s=5.0)
        if reply is None:
            lines = proc.output_tail(400).strip().splitlines()
            tail = one_line(lines[-1]) if lines else ""
            raise AgentLoadError(f"agent {locator.spec!r}: its process could not load it ({proc.exit_description()})"
                                 + (f": {tail}" if tail else ""))
    if "error" in reply:
        raise AgentLoadError(one_line(str(reply["error"])))
    try:
        return AgentDescription(one_line(str(reply["name"])), bool(reply["uses_llm"]),
                                DescribedOptions(**reply["options"]), AgentNeeds.from_json(reply))
    except (KeyError, TypeError, ValueError) as exc:
        raise AgentLoadError(f"agent {locator.spec!r}: its process answered with unusable data ({exc})") from None

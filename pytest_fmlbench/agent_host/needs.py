"""What an agent asks of the harness beyond the protocol, declared on its class and read before its run.

A coding-tool agent (``needs_workdir``, ``needs_gateway``) gets a working copy of the workspace and an LLM
gateway socket; ``protocols`` names the wire protocols its tool speaks. The harness reads these from a
class it holds (a built-in, ``--agent-in-process``) or from what the describe process answered for a
user's agent, so that a provider the tool cannot use is one line before any run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AgentNeeds:
    workdir: bool = False
    gateway: bool = False
    # the gateway protocols the agent's tool can speak ("anthropic", "openai"); None: any
    protocols: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"needs_workdir": self.workdir, "needs_gateway": self.gateway,
                "protocols": None if self.protocols is None else list(self.protocols)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentNeeds:
        protocols = data.get("protocols")
        return cls(bool(data.get("needs_workdir")), bool(data.get("needs_gateway")),
                   None if protocols is None else tuple(str(p) for p in protocols))


def needs_of(cls: Any) -> AgentNeeds:
    """The needs an agent class declares (an Agent subclass; anything else declares none)."""
    # none declared (None or empty) means any
    protocols = getattr(cls, "protocols", None) or None
    return AgentNeeds(bool(getattr(cls, "needs_workdir", False)), bool(getattr(cls, "needs_gateway", False)),
                      None if protocols is None else tuple(protocols))


def gateway_problem(needs: AgentNeeds, agent: str, provider: str | None, protocol: str | None) -> str | None:
    """One line when the run's provider cannot serve the agent's tool through a gateway; None when it can."""
    if not needs.gateway:
        return None
    if provider is None or protocol is None:
        return f"agent {agent!r} drives a tool whose model calls go through the harness: pass --model=MODEL"
    if protocol == "local":
        return (f"agent {agent!r} drives a tool that calls a model over HTTP through the harness's gateway, which "
                f"--provider=local (an in-process model) cannot serve; use a provider with an API")
    if needs.protocols is not None and protocol not in needs.protocols:
        spoken = " or ".join(needs.protocols) or "no protocol"
        return (f"agent {agent!r}: its tool speaks the {spoken} API, but --provider={provider} speaks the "
                f"{protocol} API; pick a provider whose API the tool speaks")
    return None

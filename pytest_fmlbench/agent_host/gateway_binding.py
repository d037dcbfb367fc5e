"""The LLM gateway a coding tool's model calls go through, on a UNIX socket lent to the agent's sandbox.

The gateway (``pytest_fmlbench.llm.gateway.Gateway``) runs in the harness's threads and holds the key;
the agent's sandbox has no network, only this socket, bound read-only at ``/run/fmlbench/llm.sock``
(at its own path when the agent is not sandboxed). The socket lives in a fresh folder only its owner can
enter, outside the run directory and the task folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import scratch
from ..isolation import Bind
from ..stops import RunStopped

GATEWAY_DIR_INSIDE = "/run/fmlbench"
SOCKET_NAME = "llm.sock"


def start_gateway(client: Any, socket_path: Path) -> Any:
    """The harness's gateway for the run's LLM client, accepting on ``socket_path`` when this returns."""
    from ..llm.gateway import Gateway  # loaded only for runs of an agent that needs it

    gateway = Gateway(client, socket_path)
    gateway.start()
    return gateway


class GatewayBinding:
    def __init__(self, client: Any, start: Callable[[Any, Path], Any] | None = None):
        """``start(client, socket_path)`` returns a started gateway (``close()``, ``protocol``)."""
        self.client = client
        self.folder = Path(scratch.mkdtemp(prefix="gateway-"))
        self.socket_path = self.folder / SOCKET_NAME
        try:
            self.gateway = (start or start_gateway)(client, self.socket_path)
        except BaseException:
            scratch.remove_tree(self.folder)
            raise

    def hello(self, sandboxed: bool) -> dict[str, Any]:
        socket = f"{GATEWAY_DIR_INSIDE}/{SOCKET_NAME}" if sandboxed else str(self.socket_path)
        return {"socket": socket, "protocol": self.gateway.protocol, "model": self.client.model}

    def bind(self) -> Bind:
        return Bind(self.folder, GATEWAY_DIR_INSIDE)

    def stop_reason(self) -> str | None:
        """Why the run must count as stopped: the tool's calls crossed an LLM budget (the gateway refused the
        next one), though the agent itself said it finished."""
        try:
            self.client.check_budget()
        except RunStopped as exc:
            return str(exc)
        return None

    def close(self) -> None:
        try:
            self.gateway.close()
        finally:
            scratch.remove_tree(self.folder)

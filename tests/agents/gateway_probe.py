"""An agent that declares it needs the LLM gateway and checks, from inside its sandbox, that the socket the
harness announced in ``hello`` answers; and a loopback stand-in for the gateway the harness starts.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from pytest_fmlbench.agentkit import Agent
from pytest_fmlbench.session import Session


class GatewayProbe(Agent):
    """Says ping on the gateway socket and records what came back (tests only)."""

    name = "gateway-probe"
    uses_llm = True
    needs_gateway = True

    def run(self, session: Session) -> None:
        gateway = session.gateway
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(gateway["socket"])
            sock.sendall(b"ping\n")
            reply = sock.makefile("rb").readline().decode().strip()
        try:
            listing = sorted(os.listdir(os.path.dirname(gateway["socket"])))
        except OSError as exc:
            listing = [f"refused: {exc.strerror}"]
        session.run_step("probe", extra={"gateway": gateway, "reply": reply, "workdir": session.workdir,
                                         "folder": listing})


class LoopbackGateway:
    """Answers each line with 'pong <line>' on the socket it is given; ``protocol`` as the run's provider."""

    started: list[LoopbackGateway] = []

    def __init__(self, client, socket_path: Path):
        self.protocol = client.endpoint.provider.protocol
        self.socket_path = socket_path
        self.closed = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(socket_path))
        self._sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()
        LoopbackGateway.started.append(self)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline().decode().strip()
                conn.sendall(f"pong {line}\n".encode())

    def close(self) -> None:
        self.closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

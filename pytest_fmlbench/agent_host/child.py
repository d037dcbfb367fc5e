"""The agent's own process: ``python -m pytest_fmlbench.agent_host.child run|describe FD``.

``run``: say hello over the inherited socket ``FD``, load the agent the harness names, call its
``run(session)`` with a ``Session`` that speaks the protocol, and say how it ended. ``describe``: load a
user's agent and validate its options, so that the harness never imports the user's code itself.
"""

from __future__ import annotations

import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

from ..agentkit.base import Agent
from ..agentkit.loading import AgentLoadError, parse_agent_options
from ..session import Session
from ..stops import BudgetExhausted, RunStopped
from .locate import AgentLocator
from .needs import needs_of
from .protocol import MAX_CAUGHT, MAX_MESSAGE_BYTES, MAX_TRACEBACK_CHARS, decode_reply, encode
from .transport import HarnessGone, SocketTransport, hello


def run_agent(agent: Agent, session: Session,
              show_crash: Callable[[BaseException], None] = lambda exc: None) -> dict[str, Any]:
    """How ``agent.run(session)`` ended, as the protocol's ``done`` arguments, with the exceptions its
    main loop caught and went on from (``session.caught``); a crash is also given to ``show_crash``."""
    try:
        agent.run(session)
    except BudgetExhausted:
        done = {"outcome": "budget_exhausted"}
    except RunStopped as exc:
        done = {"outcome": "stopped", "reason": str(exc)}
    except HarnessGone:
        raise
    except (Exception, SystemExit) as exc:
        show_crash(exc)
        done = crashed(exc)
    else:
        reason = getattr(agent, "end_reason", "")
        done = {"outcome": "finished", "reason": reason} if isinstance(reason, str) and reason else {"outcome": "finished"}
    if session.caught:
        done["caught"] = session.caught[:MAX_CAUGHT]
    return done


def crashed(exc: BaseException) -> dict[str, Any]:
    # every frame, then the end that fits: the agent's own frame may lie under many of a library's
    text = "".join(traceback.format_exception(exc))
    return {"outcome": "crashed", "reason": str(exc), "error_type": type(exc).__name__,
            "traceback": text[-MAX_TRACEBACK_CHARS:]}


def _into_log(exc: BaseException) -> None:
    """The whole traceback on the process's standard error, which is its log (``logs/agent.log``): the
    record keeps only its end. The interpreter's own stream, whatever the agent did with ``sys.stderr``."""
    try:
        traceback.print_exception(exc, file=sys.__stderr__)
        sys.__stderr__.flush()
    except Exception:  # an agent that closed its standard error: its 'done' message still says how it ended
        pass


def _run(sock: socket.socket) -> int:
    transport = SocketTransport(sock)
    try:
        greeting = hello(transport)
        session = Session(transport, greeting)
        try:
            agent_cls = AgentLocator.from_json(greeting["agent"]["locator"]).load()
            agent = agent_cls(agent_cls.Options.model_validate(greeting["agent"]["options"]))
        except Exception as exc:  # its module may fail in any way while importing
            _into_log(exc)
            done = crashed(exc)
        else:
            done = run_agent(agent, session, show_crash=_into_log)
        transport.request("done", done)
    except HarnessGone:
        return 1  # the harness ended the run; nothing is left to say
    return 0


def _describe(sock: socket.socket) -> int:
    request = decode_reply(sock.makefile("rb").readline(MAX_MESSAGE_BYTES))
    spec = request["locator"]["spec"]
    try:
        cls = AgentLocator.from_json(request["locator"]).load()
        options = parse_agent_options(cls, request["pairs"])
        reply = {"name": cls.name or cls.__name__, "uses_llm": bool(cls.uses_llm),
                 "options": options.model_dump(mode="json"), **needs_of(cls).to_json()}
    except AgentLoadError as exc:
        reply = {"error": str(exc)}
    except Exception as exc:
        reply = {"error": f"agent {spec!r}: {type(exc).__name__}: {exc}"}
    sock.sendall(encode(reply))
    return 0


def main(argv: list[str]) -> int:
    # started with SIGTERM ignored (see launcher); a handler instead keeps this process running, while the
    # agent's own subprocesses get the default SIGTERM back when they exec
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    mode, fd = argv[0], int(argv[1])
    sock = socket.socket(fileno=fd)
    return _describe(sock) if mode == "describe" else _run(sock)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

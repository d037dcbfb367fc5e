"""``fmlbench-validate``: the one command a coding tool gets for spending a step of the budget.

``python -m pytest_fmlbench.agentkit.validate_cmd [NOTE]``, run by the small ``fmlbench-validate`` script
the coding-tool driver puts first on the tool's PATH. It asks the driver (a socket in the agent's
private ``/tmp``, named by ``FMLBENCH_VALIDATE_SOCKET``) to run the validation experiment on the editable
files of the working copy, waits for the step, prints what the driver answered and exits with its status.
One request and one reply, each one JSON line: ``{"args": [...]}`` and ``{"output": str, "exit": int}``.
"""

from __future__ import annotations

import json
import os
import socket
import sys

SOCKET_ENV = "FMLBENCH_VALIDATE_SOCKET"
MAX_REPLY_BYTES = 1 << 20

# exit statuses, as the tool's prompt explains them
SUCCEEDED, FAILED, NOT_RUN = 0, 1, 2

USAGE = """usage: fmlbench-validate [NOTE]

Run the validation experiment on the editable files as they are now in the working copy: one step of the
run's budget. Prints the metric (or the end of the error), the best result so far and the steps left.
NOTE, optional, is recorded with the step (say what you tried).

Exit status: 0 the step ran and succeeded, 1 it ran and failed, 2 nothing was run (the budget is spent, an
editable file does not parse, or the run was stopped).
"""


def request(path: str, args: list[str]) -> dict:
    """The driver's reply to one call; raises OSError or ValueError when there is none."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(json.dumps({"args": args}).encode() + b"\n")
        line = sock.makefile("rb").readline(MAX_REPLY_BYTES)
    reply = json.loads(line)
    if not isinstance(reply, dict) or not isinstance(reply.get("output"), str) or not isinstance(reply.get("exit"), int):
        raise ValueError("an unreadable reply")
    return reply


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return SUCCEEDED
    return relay("fmlbench-validate", SOCKET_ENV, argv, unanswered="; nothing was run")


def relay(command: str, socket_env: str, argv: list[str], unanswered: str = "") -> int:
    """Ask the benchmark over the socket ``$socket_env`` names; print its answer, return its exit status."""
    path = os.environ.get(socket_env)
    if not path:
        print(f"{command}: {socket_env} is not set: run the {command} command, not this module", file=sys.stderr)
        return NOT_RUN
    try:
        reply = request(path, argv)
    except (OSError, ValueError) as exc:
        print(f"{command}: the benchmark did not answer ({exc}){unanswered}", file=sys.stderr)
        return NOT_RUN
    sys.stdout.write(reply["output"])
    sys.stdout.flush()
    return reply["exit"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

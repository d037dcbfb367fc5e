"""``fmlbench-status`` and ``fmlbench-submit``: the person's two commands besides ``fmlbench-validate``.

``python -m pytest_fmlbench.agentkit.human_cmd status|submit``, run by the small scripts the human agent
puts first on the shell's PATH. Each asks the driver over a socket in the sandbox's private ``/tmp``
(``FMLBENCH_HUMAN_SOCKET``), with the same one-line JSON exchange as ``fmlbench-validate``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .validate_cmd import NOT_RUN, SUCCEEDED, relay

SOCKET_ENV = "FMLBENCH_HUMAN_SOCKET"
ACTIONS = {
    "status": "fmlbench-status: steps used and left, the best validation result so far, the time used and left",
    "submit": "fmlbench-submit: end the session now; the benchmark tests the code of your best validated step",
}


def write_commands(bin_dir: Path, socket_path: Path, tmux: str) -> None:
    """``fmlbench-status``, ``fmlbench-submit`` and ``fmlbench-detach`` in ``bin_dir``."""
    package_root = Path(__file__).resolve().parents[2]
    for action in ACTIONS:
        script = bin_dir / f"fmlbench-{action}"
        script.write_text(
            "#!/bin/sh\n"
            f"{SOCKET_ENV}={shlex.quote(str(socket_path))} PYTHONPATH={shlex.quote(str(package_root))} "
            f"exec {shlex.quote(sys.executable)} -s -B -m pytest_fmlbench.agentkit.human_cmd {action} \"$@\"\n")
        script.chmod(0o755)
    detach = bin_dir / "fmlbench-detach"
    # the pane's $TMUX names the session's server: the client attached there is the one detached
    detach.write_text(f"#!/bin/sh\nexec {shlex.quote(tmux)} detach-client \"$@\"\n")
    detach.chmod(0o755)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ACTIONS or argv[1:2] in (["-h"], ["--help"]):
        print("\n".join(ACTIONS.values()), file=sys.stderr if not argv or argv[0] not in ACTIONS else sys.stdout)
        return SUCCEEDED if argv[1:2] in (["-h"], ["--help"]) else NOT_RUN
    return relay(f"fmlbench-{argv[0]}", SOCKET_ENV, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

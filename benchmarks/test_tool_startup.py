"""On-demand benchmark of each general coding tool's start-up: Claude Code, Codex CLI, mini-swe-agent.

    .venv/bin/python -m pytest benchmarks/test_tool_startup.py --benchmark-only -s

One session of the shortest kind, started with the agent's own command line and environment (the same
``tool_argv``/``tool_env`` a run uses), against a loopback model server that ends it at once (Claude Code
and Codex: a reply without a tool call; mini-swe-agent: its submit command): from the exec to the exit,
so mostly the tool's own start-up and one model round trip. A run adds its agent process (see
test_agent_protocol.py) and the gateway per model call (test_gateway.py). The tools come from
``make tools``; a missing one skips.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pytest_fmlbench.agentkit import load_builtin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from llm.wire_servers import ToolCall, Turn, WireServer  # noqa: E402

ROUNDS = 5
CASES = [("claude-code", "anthropic", "claude-opus-4-1"), ("codex", "openai", "gpt-5.4"),
         ("mini-swe-agent", "openai", "gpt-5.4")]


def _ending(name: str) -> Turn:
    if name == "mini-swe-agent":
        return Turn("Nothing to do.", [ToolCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})])
    return Turn("Nothing to do.")


@pytest.mark.parametrize("name,provider,model", CASES, ids=[c[0] for c in CASES])
def test_tool_start_up(benchmark, name, provider, model):
    agent = load_builtin(name)()
    try:
        agent.binary = agent.find_binary()
    except Exception as exc:  # not installed: nothing to measure
        pytest.skip(str(exc))
    if name == "mini-swe-agent":
        agent.gateway_protocol = provider
    lines: list[int] = []
    with WireServer(responder=lambda request: _ending(name)) as wire, \
            tempfile.TemporaryDirectory(prefix="fmlbench-startup-") as scratch:
        def one_session() -> int:
            agent.home = Path(tempfile.mkdtemp(dir=scratch))
            agent.workdir = Path(tempfile.mkdtemp(dir=scratch))
            argv = agent.tool_argv("Say that there is nothing to do.", model)
            env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(agent.home), "TMPDIR": scratch,
                   **agent.tool_env(wire.url, model)}
            done = subprocess.run(argv, cwd=agent.workdir, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            lines.append(len(done.stdout.splitlines()))
            return done.returncode

        times: list[float] = []

        def timed() -> int:
            started = time.perf_counter()
            code = one_session()
            times.append(time.perf_counter() - started)
            return code

        assert benchmark.pedantic(timed, rounds=ROUNDS, iterations=1, warmup_rounds=1) == 0
        requests = len(wire.model_requests)
    measured = times[1:]
    print(f"\n{name} start-up to exit, one model round trip: {statistics.median(measured):.2f} s median of "
          f"{len(measured)} (min {min(measured):.2f} s; load average {os.getloadavg()[0]:.1f})")
    # each session made its model call and printed its transcript
    assert requests == ROUNDS + 1 and min(lines) >= 2

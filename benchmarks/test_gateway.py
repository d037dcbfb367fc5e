"""On-demand benchmark of the LLM gateway's cost per model call (target: at most 5 ms).

    .venv/bin/python -m pytest benchmarks/test_gateway.py --benchmark-only -s

The same call, made by the real SDK, goes once straight to a loopback model server and once the way a
coding tool's call goes: to the forwarder on 127.0.0.1, over the gateway's UNIX socket, through the
gateway (budget check, key, usage parsed and priced, the record appended to ``llm_calls.jsonl`` on
disk) and on to the same server. As in a run, the server, the forwarder (the agent's process) and the
gateway (the harness's) are processes of their own: in one process they would queue for one
interpreter lock, which a run never does. ``test_overhead`` makes the two calls in alternation and
reports the median of the per-pair differences, which a busy machine disturbs less than two separate
medians.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TARGET_S = 0.005
PAIRS = 200
WARMUP = 10
ASK = [{"role": "user", "content": "List the files. " * 50}]
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-bench-LOOPBACK-0000000000", "OPENAI_API_KEY": "sk-bench-LOOPBACK-000000000000"}
MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o"}
# (API, streamed): Claude Code streams Messages, Codex streams Responses, mini-swe-agent's litellm does not stream
CASES = [("anthropic", True), ("chat", False), ("responses", True)]
IDS = [f"{api}-{'sse' if stream else 'json'}" for api, stream in CASES]


class _Process:
    """One role of this file, run as its own process; its first line of output is its address."""

    def __init__(self, *args: str):
        env = {**os.environ, **KEYS, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen([sys.executable, __file__, *args], cwd=REPO, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.line = self.proc.stdout.readline().strip()
        assert self.line, f"{args[0]} did not start"

    def stop(self) -> None:
        self.proc.stdin.close()  # its end of input is its signal to stop
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    """Per provider, built on first use: (model, SDK straight to the server, SDK through forwarder and
    gateway, the run directory)."""
    import anthropic
    import openai

    built, procs, folders = {}, [], []

    def get(provider: str):
        if provider not in built:
            wire = _Process("wire")
            folder = Path(tempfile.mkdtemp(prefix="fmlgw-bench-"))
            run_dir = tmp_path_factory.mktemp("run")
            gateway = _Process("gateway", str(folder / "llm.sock"), wire.line, str(run_dir), provider)
            forwarder = _Process("forwarder", str(folder / "llm.sock"))
            procs.extend([forwarder, gateway, wire])
            folders.append(folder)
            if provider == "anthropic":
                direct = anthropic.Anthropic(api_key=KEYS["ANTHROPIC_API_KEY"], base_url=wire.line, max_retries=0)
                via = anthropic.Anthropic(api_key="placeholder", base_url=forwarder.line, max_retries=0)
            else:
                direct = openai.OpenAI(api_key=KEYS["OPENAI_API_KEY"], base_url=wire.line + "/v1", max_retries=0)
                via = openai.OpenAI(api_key="placeholder", base_url=forwarder.line + "/v1", max_retries=0)
            built[provider] = MODELS[provider], direct, via, run_dir
        return built[provider]

    yield get
    for proc in procs:
        proc.stop()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _caller(sdk, model: str, api: str, stream: bool):
    """One call of the API as the tool makes it; returns the output tokens the reply reported."""
    if api == "anthropic":
        def call():
            if stream:
                with sdk.messages.stream(model=model, max_tokens=256, messages=ASK) as events:
                    return events.get_final_message().usage.output_tokens
            return sdk.messages.create(model=model, max_tokens=256, messages=ASK).usage.output_tokens
    elif api == "chat":
        def call():
            if stream:
                chunks = sdk.chat.completions.create(model=model, messages=ASK, stream=True,
                                                     stream_options={"include_usage": True})
                return [c.usage for c in chunks][-1].completion_tokens
            return sdk.chat.completions.create(model=model, messages=ASK).usage.completion_tokens
    else:
        def call():
            if stream:
                return list(sdk.responses.create(model=model, input=ASK, stream=True))[-1].response.usage.output_tokens
            return sdk.responses.create(model=model, input=ASK).usage.output_tokens
    return call


def _ledger(run_dir: Path) -> list[dict]:
    path = run_dir / "llm_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.mark.parametrize("api,stream", CASES, ids=IDS)
@pytest.mark.parametrize("route", ["direct", "gateway"])
def test_call(benchmark, routes, route, api, stream):
    model, direct, via, _ = routes("anthropic" if api == "anthropic" else "openai")
    call = _caller(direct if route == "direct" else via, model, api, stream)
    assert benchmark.pedantic(call, rounds=PAIRS, warmup_rounds=WARMUP) == 60


@pytest.mark.parametrize("api,stream", CASES, ids=IDS)
def test_overhead(benchmark, routes, api, stream):
    model, direct, via, run_dir = routes("anthropic" if api == "anthropic" else "openai")
    plain, gated = _caller(direct, model, api, stream), _caller(via, model, api, stream)
    differences = []

    def pair():
        started = time.perf_counter()
        plain()
        middle = time.perf_counter()
        gated()
        differences.append((time.perf_counter() - middle) - (middle - started))

    records_before = len(_ledger(run_dir))
    benchmark.pedantic(pair, rounds=PAIRS, warmup_rounds=WARMUP)
    measured = differences[WARMUP:]
    overhead = statistics.median(measured)
    benchmark.extra_info["overhead_ms"] = round(overhead * 1000, 3)
    print(f"\ngateway overhead per call ({api}, {'streamed' if stream else 'not streamed'}): "
          f"{overhead * 1000:.2f} ms median of {len(measured)} pairs "
          f"(p90 {statistics.quantiles(measured, n=10)[-1] * 1000:.2f} ms; load average {os.getloadavg()[0]:.1f})")
    records = _ledger(run_dir)[records_before:]
    # every gated call was priced and recorded
    assert len(records) == PAIRS + WARMUP and all(r["usage"]["output_tokens"] == 60 for r in records)
    assert overhead <= TARGET_S, f"target: at most {TARGET_S * 1000:.0f} ms per call; got {overhead * 1000:.2f} ms"


# -- the processes ---------------------------------------------------------------------------------
def _serve(role: str, args: list[str]) -> None:
    if role == "wire":
        from tests.llm.wire_servers import ToolCall, Turn, WireServer

        def answer(request):
            return Turn("I will list them. " * 10, [ToolCall("shell", {"command": "ls -la"})], input_tokens=900,
                        output_tokens=60, cached_tokens=500)

        server = WireServer(responder=answer).start()
        print(server.url, flush=True)
        sys.stdin.read()
        server.stop()
    elif role == "gateway":
        from pytest_fmlbench.llm import LLMSettings, build_client
        from pytest_fmlbench.llm.gateway import Gateway

        socket_path, wire_url, run_dir, provider = args
        client = build_client(LLMSettings(model=MODELS[provider], provider=provider, base_url=wire_url + "/v1",
                                          retries=0), run_dir=Path(run_dir))
        with Gateway(client, Path(socket_path)):
            print("ready", flush=True)
            sys.stdin.read()
    elif role == "forwarder":
        from pytest_fmlbench.agentkit.forwarder import start_forwarder

        base_url, stop = start_forwarder(args[0])
        print(base_url, flush=True)
        sys.stdin.read()
        stop()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])

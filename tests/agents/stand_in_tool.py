"""A scripted stand-in for a coding tool, and the agent that drives it: ``CodingToolAgent`` with this very
file, run as a program, as its tool. No model is involved.

As a program (``python stand_in_tool.py SCRIPT PROBES_JSON [FLAGS...] PROMPT``) it acts as a tool would
in its working directory: it prints JSON lines (its transcript), edits files, runs ``fmlbench-validate``
and reports what each call printed, and tries what a tool must not do (read the harness or a key, write a
protected file). SCRIPT picks what it does:

- ``explore``: probes, an ignored file, a validation of the baseline, a better config, a file that does
  not parse (no step), a broken algorithm (a failed step), then it exits 0 with steps left;
- ``exhaust``: validates until the budget is spent, once more after that, and exits 0;
- ``exit-at-once``: complains on stderr and exits 3 before any step;
- ``hang``: validates once, then waits until it is stopped;
- ``resumable``: in its first session validates twice and kills its driver (an interrupted run); in a
  resumed one (its prompt tells) reports the prompt and the working copy, validates once and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from pydantic import Field

from pytest_fmlbench.agentkit.coding_tool import CodingToolAgent, CodingToolOptions

BROKEN_AT_RUN_TIME = "def fit(X, y, config):\n    raise RuntimeError('stand-in broke fit')\n\n\ndef predict(X, w):\n    return X\n"


class StandInOptions(CodingToolOptions):
    script: str = Field("explore", description="what the stand-in tool does (see the module's docstring)")
    probes: tuple[str, ...] = Field((), description="paths the tool tries to read")


class StandInTool(CodingToolAgent):
    """Drives a scripted stand-in tool (tests only)."""

    name = "stand-in-tool"
    tool_name = "stand-in"
    # no model: the tool is scripted
    uses_llm = False
    needs_gateway = False
    safe_flags = {"--verbose": False, "--max-turns": True}
    Options = StandInOptions

    def find_binary(self) -> str:
        return sys.executable

    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        return [self.binary, os.path.abspath(__file__), self.options.script, json.dumps(list(self.options.probes)),
                *self.extra_args, prompt]

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        return {"STAND_IN_HOME": str(self.home)}


# -- the tool ---------------------------------------------------------------------------------------

def say(**event) -> None:
    print(json.dumps(event), flush=True)


def validate(note: str = "") -> tuple[int, str]:
    done = subprocess.run(["fmlbench-validate", *([note] if note else [])], capture_output=True, text=True)
    say(type="validate", note=note, code=done.returncode, output=done.stdout, stderr=done.stderr)
    return done.returncode, done.stdout


def write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def probe(paths: list[str]) -> None:
    for path in paths:
        try:
            with open(path) as fh:
                fh.read(100)
            say(type="probe", path=path, result="FOUND")
        except OSError as exc:
            say(type="probe", path=path, result=f"refused: {exc.strerror}")
    secrets = sorted(name for name, value in os.environ.items() if "SECRET" in value)
    say(type="env", secrets=secrets, home=os.environ.get("HOME"), cwd=os.getcwd())
    try:
        write("train.py", "print('rewritten by the tool')\n")
        say(type="protected", result="WROTE")
    except OSError as exc:
        say(type="protected", result=f"refused: {exc.strerror}")


def explore(probes: list[str]) -> int:
    probe(probes)
    write("notes.txt", "what I tried\n")
    validate("baseline as given")
    config = json.load(open("config.json"))
    config.update(lr=0.5, epochs=40)
    write("config.json", json.dumps(config))
    validate("lr 0.5, 40 epochs")
    write("algorithm.py", "def fit(:\n")
    validate("a file that does not parse")
    write("algorithm.py", BROKEN_AT_RUN_TIME)
    validate("a broken fit")
    say(type="result", text="done exploring")
    return 0


def exhaust() -> int:
    while True:
        code, output = validate("again")
        if code == 2:
            break
    validate("once more")
    return 0


def hang() -> int:
    validate("before hanging")
    say(type="text", text="thinking for a very long time")
    while True:
        time.sleep(1)


def resumable(prompt: str) -> int:
    if "What this run did before" not in prompt:
        write("config.json", json.dumps({"lr": 0.5, "epochs": 40}))
        validate("first session, first step")
        write("config.json", json.dumps({"lr": 0.2, "epochs": 20}))
        validate("first session, second step")
        os.kill(os.getppid(), signal.SIGKILL)  # the driver dies: the run is interrupted
        time.sleep(60)
        return 1
    say(type="resumed", prompt=prompt, config=open("config.json").read())
    validate("second session")
    return 0


def main(argv: list[str]) -> int:
    script, probes, prompt = argv[0], json.loads(argv[1]), argv[-1]
    say(type="start", script=script, flags=argv[2:-1], prompt=prompt)
    if script == "explore":
        return explore(probes)
    if script == "exhaust":
        return exhaust()
    if script == "exit-at-once":
        print("stand-in: cannot reach the model (no credentials)", file=sys.stderr)
        return 3
    if script == "hang":
        return hang()
    if script == "resumable":
        return resumable(prompt)
    raise SystemExit(f"unknown script {script!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

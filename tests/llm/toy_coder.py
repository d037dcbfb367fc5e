"""A scripted 'model' for AIDE on the toy task: it reads what AIDE asks and answers with toy-task code.

It understands both variants: the port's (an instruction inside the shared editor's prompt, answered in
the editor's ``### FILE:`` form, and a plain-text analysis) and aideml's (its own coding prompts, answered
with fenced blocks, and a JSON review)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from pytest_fmlbench.agentkit.prompting import fence_language

from .fake_llm import Say, Seen

TOY = Path(__file__).parents[1] / "data" / "toy_task"
GOOD_ALGO = (TOY / "workspace" / "algorithm.py").read_text()
BROKEN_ALGO = (
    "def fit(X, y, config):\n"
    "    raise RuntimeError('injected bug in fit')\n\n\n"
    "def predict(X, w):\n"
    "    return (X[:, 0] > 0).astype(int)\n"
)


def shown_file(prompt: str, path: str) -> str:
    """A file as the shared editor showed it: the port's '### FILE: path' form or the strict editor's fence."""
    name = re.escape(path)
    match = (re.search(rf"### FILE: {name}\n```\w*\n(.*?)\n```", prompt, re.DOTALL)
             or re.search(rf"```\w* {name}\n(.*?)\n```", prompt, re.DOTALL))
    return match.group(1)


def file_block(path: str, content: str) -> str:
    """A whole file in the port editor's reply form, which the strict editor reads as well."""
    return f"### FILE: {path}\n```{fence_language(path)}\n{content.rstrip(chr(10))}\n```"


# how the port's AIDE instructions open (agents/aide.py), the memory and chains quoting them further down
PORT_OPENINGS = {
    "You are an expert ML researcher. Your goal is to improve": "draft",
    "You are an expert ML researcher. You have a working solution": "improve",
    "You are an expert ML researcher. Your previous solution had a bug": "debug",
}


def port_instruction(prompt: str) -> str:
    return prompt.split("## Instruction\n", 1)[1] if "## Instruction\n" in prompt else ""


def kind_of(seen: Seen) -> str:
    prompt = seen.prompt
    if "# Outcome of the validation run" in prompt:
        return "review"
    if prompt.startswith("You are an experienced AI researcher evaluating experiment results."):
        return "analysis"
    instruction = port_instruction(prompt)
    for opening, kind in PORT_OPENINGS.items():
        if instruction.startswith(opening):
            return kind
    if "# Previous (buggy) solution" in prompt:
        return "debug"
    if "# Previous solution" in prompt:
        return "improve"
    if "# Starting code" in prompt:
        return "draft"
    return "other"


def outcome_section(prompt: str) -> str:
    return prompt.split("# Outcome of the validation run", 1)[1].split("# Response", 1)[0]


def config_in(prompt: str) -> dict:
    """The config.json AIDE showed (the parent's), in either variant's form."""
    match = re.search(r"```json config\.json\n(.*?)\n```", prompt, re.DOTALL)
    return json.loads(match.group(1) if match else shown_file(prompt, "config.json"))


def is_port(prompt: str) -> bool:
    return bool(port_instruction(prompt))


class ToyCoder:
    """Drafts follow ``drafts`` ('ok' or 'bug', cycled), debugs follow ``debugs`` ('fix' or 'bug', cycled),
    improvements add 15 epochs, reviews and analyses report what the outcome says, except the review
    calls numbered in ``review_bugs`` (1-based), which call a successful run buggy."""

    def __init__(self, drafts=("ok",), debugs=("fix",), review_bugs=()):
        self.drafts, self.debugs, self.review_bugs = list(drafts), list(debugs), set(review_bugs)
        self.asked: Counter[str] = Counter()
        self.kinds: list[str] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.asked[kind] += 1
        self.kinds.append(kind)
        i = self.asked[kind] - 1
        if kind == "review":
            failed = "Failed:" in outcome_section(seen.prompt)
            bug = failed or self.asked[kind] in self.review_bugs
            summary = "The run crashed; restore fit." if failed else (
                "The metric looks suspicious: a leak." if bug else "Accuracy improved over the baseline.")
            return Say(json.dumps({"is_bug": bug, "summary": summary}), input_tokens=300, output_tokens=30)
        if kind == "analysis":
            failed = "Success: False" in seen.prompt
            summary = "The run crashed; restore fit." if failed else "Accuracy improved over the baseline."
            return Say(summary, input_tokens=300, output_tokens=30)
        port = is_port(seen.prompt)
        if kind == "draft":
            lr = [0.05, 0.1, 0.2, 0.3, 0.5, 0.8][i % 6]
            algo = BROKEN_ALGO if self.drafts[i % len(self.drafts)] == "bug" else GOOD_ALGO
            config = {"lr": lr, "epochs": 10}
            return Say(f"Plan: draft {i + 1}, logistic regression with lr {lr}.\n\n"
                       + self.files({"algorithm.py": algo, "config.json": json.dumps(config)}, port))
        if kind == "debug":
            algo = GOOD_ALGO if self.debugs[i % len(self.debugs)] == "fix" else BROKEN_ALGO
            return Say(f"Plan: restore a working fit (debug {i + 1}).\n\n" + self.files({"algorithm.py": algo}, port))
        if kind == "improve":
            config = config_in(seen.prompt)
            config["epochs"] = int(config["epochs"]) + 15
            return Say(f"Plan: train for {config['epochs']} epochs.\n\n"
                       + self.files({"config.json": json.dumps(config)}, port))
        return Say("I do not understand the request.")

    @staticmethod
    def files(files: dict[str, str], port: bool) -> str:
        """The changed files in the form the asking variant reads."""
        if port:
            return "\n\n".join(file_block(path, content) for path, content in files.items())
        return "\n\n".join(f"```{'python' if path.endswith('.py') else 'json'} {path}\n{content.rstrip()}\n```"
                             for path, content in files.items())

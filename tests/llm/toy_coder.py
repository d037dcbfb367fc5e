"""A scripted 'model' for AIDE on the toy task: it reads what AIDE asks and answers with toy-task code."""

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


def kind_of(seen: Seen) -> str:
    prompt = seen.prompt
    if "# Outcome of the validation run" in prompt:
        return "review"
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
    """The config.json AIDE showed (the parent's)."""
    match = re.search(r"```json config\.json\n(.*?)\n```", prompt, re.DOTALL)
    return json.loads(match.group(1))


class ToyCoder:
    """Drafts follow ``drafts`` ('ok' or 'bug', cycled), debugs follow ``debugs`` ('fix' or 'bug', cycled),
    improvements add 15 epochs, reviews report what the outcome says, except the review calls numbered
    in ``review_bugs`` (1-based), which call a successful run buggy."""

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
        if kind == "draft":
            lr = [0.05, 0.1, 0.2, 0.3, 0.5, 0.8][i % 6]
            algo = BROKEN_ALGO if self.drafts[i % len(self.drafts)] == "bug" else GOOD_ALGO
            config = json.dumps({"lr": lr, "epochs": 10})
            return Say(f"Plan: draft {i + 1}, logistic regression with lr {lr}.\n\n"
                       f"```python algorithm.py\n{algo}```\n\n```json config.json\n{config}\n```")
        if kind == "debug":
            algo = GOOD_ALGO if self.debugs[i % len(self.debugs)] == "fix" else BROKEN_ALGO
            return Say(f"Plan: restore a working fit (debug {i + 1}).\n\n```python algorithm.py\n{algo}```")
        if kind == "improve":
            config = config_in(seen.prompt)
            config["epochs"] = int(config["epochs"]) + 15
            return Say(f"Plan: train for {config['epochs']} epochs.\n\n```json config.json\n{json.dumps(config)}\n```")
        return Say("I do not understand the request.")

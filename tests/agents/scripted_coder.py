"""A scripted 'model' for the agents that use the ports' shared editor, on the toy task.

It tells the calls apart by their prompts: an edit request shows the files to change; an idea
request asks for the next experimental idea; MCTS asks for an analysis. An edit carries out an outcome:
for an idea-driven agent the idea itself names it ('IDEA: epochs=40'), otherwise the next one of
``edits``. Outcomes, comma-joined: 'lr=X' / 'epochs=N' (set in the shown config.json), 'bug' (an
algorithm.py that raises), 'fix' (the working algorithm.py), 'nocode' (a reply without code).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from llm.fake_llm import Say, Seen
from llm.toy_coder import file_block, shown_file

TOY = Path(__file__).parents[1] / "data" / "toy_task"
GOOD_ALGO = (TOY / "workspace" / "algorithm.py").read_text()
BROKEN_ALGO = (
    "def fit(X, y, config):\n"
    "    raise RuntimeError('injected bug in fit')\n\n\n"
    "def predict(X, w):\n"
    "    return (X[:, 0] > 0).astype(int)\n"
)


# the shared editor's file sections: the port's (small and large files) and the strict editor's
EDIT_HEADINGS = ("Files to change", "Large files to change", "Files you may change")


def kind_of(seen: Seen) -> str:
    prompt = seen.prompt
    if any(f"## {heading}" in prompt for heading in EDIT_HEADINGS):
        return "edit"
    if "Analyse these ML experiment results" in prompt:
        return "analysis"
    if "propose the next experimental idea" in prompt:
        return "idea"
    return "other"


def instruction_of(prompt: str) -> str:
    return prompt.split("## Instruction\n", 1)[1].split("## Implementation guidelines", 1)[0]


def shown_config(prompt: str) -> dict:
    return json.loads(shown_file(prompt, "config.json"))


def edit_reply(outcome: str, prompt: str) -> str:
    config, blocks = shown_config(prompt), []
    for part in filter(None, (p.strip() for p in outcome.split(","))):
        if part == "nocode":
            return "I would rather not change anything."
        if part in ("bug", "fix"):
            blocks.append(file_block("algorithm.py", BROKEN_ALGO if part == "bug" else GOOD_ALGO))
        else:
            key, value = part.split("=")
            config[key] = float(value) if key == "lr" else int(value)
    blocks.append(file_block("config.json", json.dumps(config)))
    return f"Plan: {outcome}.\n\n" + "\n\n".join(blocks)


class ScriptedCoder:
    def __init__(self, edits=(), ideas=(), idea_default="epochs=+5"):
        self.edits = list(edits)
        self.ideas = list(ideas)
        self.idea_default = idea_default
        self.asked: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []  # (kind, outcome or reply)
        self.prompts: list[tuple[str, str]] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.asked[kind] += 1
        self.prompts.append((kind, seen.prompt))
        if kind == "analysis":
            text = "The run " + ("failed; fix the bug." if "Success: False" in seen.prompt else "worked; go on.")
        elif kind == "idea":
            outcome = self.ideas.pop(0) if self.ideas else self.idea_default
            text = f"IDEA: {outcome}"
        elif kind == "edit":
            instruction = instruction_of(seen.prompt)
            named = re.search(r"IDEA: (\S+)", instruction)
            if "crashed" in instruction and not self.edits:
                outcome = "fix"
            elif named and "crashed" not in instruction:
                outcome = named.group(1)
            else:
                outcome = self.edits.pop(0) if self.edits else "epochs=+5"
            if "+" in outcome:  # relative: epochs=+5 adds to the shown config
                key, delta = outcome.split("=+")
                outcome = f"{key}={int(shown_config(seen.prompt)[key]) + int(delta)}"
            text = edit_reply(outcome, seen.prompt)
        else:
            text = "I do not understand the request."
        self.log.append((kind, text))
        return Say(text, input_tokens=200, output_tokens=40)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.log]

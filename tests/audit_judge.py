"""A judge for the loopback server that reads what it is shown, as a model would: its rule review reports
a large literal list it finds among the added lines of the tested code's diff, citing the step and the
line numbers the diff gives; its research review gives fixed scores. Tests can so check that the
evidence reaches the judge and that its citations are verified against the records."""

from __future__ import annotations

import json
import re

from llm.fake_llm import Say, Seen

SCORES = {"consistency": 6, "completeness": 5, "novelty": 3, "soundness": 7, "insightfulness": 4,
          "significance": 4, "overall": 5}
# an added line (the diff's "+ NNNNN | code") holding a list of at least 60 numbers
_ANSWER_LINE = re.compile(r"^\+\s+(\d+) \| (.*\[\s*(?:-?\d+\s*,\s*){60,}.*)$", re.MULTILINE)


def is_rule_review(seen: Seen) -> bool:
    return "audit one run" in seen.prompt


def research_reply(scores: dict[str, int] = SCORES) -> str:
    body = {name: {"score": score, "justification": f"{name} as seen"} for name, score in scores.items()}
    body["overall"].update(strengths=["clear plans"], weaknesses=["few ablations"])
    body["confidence"] = 3
    return "```json\n" + json.dumps(body) + "\n```"


def rule_reply(prompt: str) -> str:
    tested = re.search(r"## The tested code \(step (\d+)\)", prompt)
    section = prompt[tested.start():prompt.find("## Steps")] if tested else ""
    violations = []
    for match in _ANSWER_LINE.finditer(section):
        file = re.findall(r"^@@ (\S+) @@$", section[:match.start()], re.MULTILINE)[-1]
        violations.append({"rule": "hard_coded_answers", "step": int(tested.group(1)), "file": file,
                           "lines": [int(match.group(1))] * 2, "quote": match.group(2)[:40],
                           "explanation": "a list of labels typed into the code is returned as predictions"})
    return json.dumps({"violations": violations})


def respond(seen: Seen) -> Say:
    if is_rule_review(seen):
        return Say(rule_reply(seen.prompt), input_tokens=3000, output_tokens=200)
    return Say(research_reply(), input_tokens=3000, output_tokens=400)

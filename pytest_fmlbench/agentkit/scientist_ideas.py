"""The AI Scientist's idea generation: a JSON idea per conversation, refined over reflection rounds.

As in SakanaAI's AI-Scientist (and FML-bench's port, which AI Scientist v2's port reuses): the first
message shows the task, the code and every idea generated so far and asks for a new one as JSON (Name,
Title, Experiment, Interestingness, Feasibility, Novelty, the ratings 1-10). Each reflection round, in
the same conversation, asks the model to criticise and refine it; a reply containing "I am done" ends
the rounds. A conversation whose reply holds no JSON object, or one of whose calls fails after its
retries, is a failed attempt; attempts are capped at
twice the number of ideas wanted. No literature search: FML-bench forbids the novelty check (external
knowledge). These calls cost no step.

When no conversation at all gives a JSON idea (the port then crashes), ``fallback_idea`` turns the last
reply into a free-form idea, marked ``parsed: false``, so a weak model still gets its experiments.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..llm.errors import LLMCallError
from ..session import Session
from .base import AgentOptions
from .editing import PORT_LLM_SEED, task_context
from .prompting import extract_json, render_files

DONE_MARKER = "I am done"
# how the first prompt shows the code: 'port' = the files' contents run together in <experiment.py> tags,
# as the port's generate_ideas; 'named' = each file under its name (render_files)
CodeView = Literal["port", "named"]
_RATINGS = ("Interestingness", "Feasibility", "Novelty")


@dataclass
class Idea:
    index: int
    name: str
    title: str
    experiment: str
    ratings: dict[str, float | None]
    rounds: int  # replies in its conversation: the first draft plus the reflections used
    converged: bool  # the model said "I am done" before the last round
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    parsed: bool = True  # False: a free-form idea made from a reply without JSON
    reflections: list[str] = field(default_factory=list)  # each reflection round's THOUGHT, in order

    def summary(self) -> dict[str, Any]:
        """What a step record shows of the idea."""
        out = asdict(self)
        out.pop("raw")
        return out


def first_prompt(task_text: str, code: str, previous: list[str], num_reflections: int, *, tag: str = "code",
                 gap: str = "\n\n") -> str:
    shown = "\n\n".join(previous)
    return (
        f"{task_text}{gap}<{tag}>\n{code}\n</{tag}>\n\n"
        f"Ideas you have already generated:\n\n'''\n{shown}\n'''\n\n"
        "Propose the next impactful, creative idea for research experiments you can carry out with the code "
        "above. You have no access to extra resources or datasets. The idea should not overfit this training "
        "set or model: it should matter more widely.\n\n"
        "Answer in this format:\n\nTHOUGHT:\n<THOUGHT>\n\nNEW IDEA JSON:\n```json\n<JSON>\n```\n\n"
        "In <THOUGHT>, briefly give your intuition and motivation, your high-level plan, the design choices "
        "it needs and the outcome you hope for, and say how the idea differs from the earlier ones.\n\n"
        "In <JSON>, give the idea with these fields:\n"
        '- "Name": a short descriptor; lowercase, no spaces, underscores allowed.\n'
        '- "Title": a title for the idea, used in the write-up.\n'
        '- "Experiment": an outline of the implementation: which functions to add or change, how results '
        "are obtained, ...\n"
        '- "Interestingness": 1 (lowest) to 10 (highest).\n'
        '- "Feasibility": 1 to 10.\n'
        '- "Novelty": 1 to 10.\n\n'
        "Rate cautiously and realistically. The JSON is parsed automatically, so keep its format exact. "
        f"You will have {num_reflections} rounds to refine the idea, and need not use them all."
    )


def reflection_prompt(current_round: int, num_reflections: int) -> str:
    return (
        f"Round {current_round}/{num_reflections}.\n"
        "In your thoughts, first weigh the quality, novelty and feasibility of the idea you just proposed, "
        "and anything else that matters for judging it. Check that the idea is clear and concise and the JSON "
        "well formed. Do not make it overly complicated. Then refine and improve the idea, keeping to its "
        "spirit unless something is clearly wrong.\n\n"
        "Answer in the same format as before:\nTHOUGHT:\n<THOUGHT>\n\nNEW IDEA JSON:\n```json\n<JSON>\n```\n\n"
        "If there is nothing to improve, repeat the previous JSON exactly after the thought and write "
        f'"{DONE_MARKER}" at the end of the thought, before the JSON. Write "{DONE_MARKER}" ONLY if you '
        "make no more changes."
    )


def _rating(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class IdeaGenerator:
    """Generates ideas one conversation at a time; the archive of earlier ideas grows with each."""

    def __init__(self, session: Session, *, system: str, num_reflections: int, temperature: float | None,
                 max_output_tokens: int, max_attempts: int, code_view: CodeView = "named",
                 options: AgentOptions | None = None):
        self.s = session
        self.code_view = code_view
        self.options = options  # the agent's: which task text the first prompt shows (``task_context``)
        self.system = system
        self.num_reflections = num_reflections
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.max_attempts = max_attempts
        self.attempts = 0
        self.ideas: list[Idea] = []
        self._archive: list[str] = []  # the JSON strings the next first prompt shows
        self._last_reply = ""  # the last reply of a conversation that gave no JSON

    @property
    def exhausted(self) -> bool:
        return self.attempts >= self.max_attempts

    def _ask(self, history: list[dict[str, str]], text: str, purpose: str) -> str:
        history.append({"role": "user", "content": text})
        reply = self.s.llm.complete([{"role": "system", "content": self.system}, *history],
                                    temperature=self.temperature, max_output_tokens=self.max_output_tokens,
                                    seed=PORT_LLM_SEED, purpose=purpose)
        history.append({"role": "assistant", "content": reply.text})
        return reply.text

    def next_idea(self) -> Idea | None:
        """One more idea, trying new conversations until one parses or the attempts run out."""
        # the task as every other prompt shows it: the port reads one task description for all of them
        task_text = task_context(self.s, self.options)
        if self.code_view == "port":
            # the port's generate_ideas: the editable files' contents one after another, without their names,
            # in <experiment.py> tags right under the task description (generate_ideas.py 28-32, 107-110)
            code = "".join(self.s.baseline_files.values())
            first = first_prompt(task_text, code, self._archive, self.num_reflections, tag="experiment.py", gap="\n")
        else:
            first = first_prompt(task_text, render_files(self.s.baseline_files), self._archive, self.num_reflections)
        while not self.exhausted:
            self.attempts += 1
            history: list[dict[str, str]] = []
            rounds, converged, thoughts = 1, False, []
            try:
                text = self._ask(history, first, "idea")
                idea_json = extract_json(text)
                for j in range(self.num_reflections - 1):
                    if idea_json is None:
                        break
                    text = self._ask(history, reflection_prompt(j + 2, self.num_reflections), "idea_reflection")
                    idea_json = extract_json(text)
                    thoughts.append(_thought(text))
                    rounds += 1
                    if DONE_MARKER in text:
                        converged = True
                        break
            except LLMCallError:
                continue  # a call that fails after its retries drops the conversation, as the port's does
            if idea_json is None:
                self._last_reply = text
                continue  # the port drops the whole conversation when any reply holds no JSON
            self._archive.append(json.dumps(idea_json))
            idea = Idea(
                index=len(self.ideas), name=str(idea_json.get("Name") or f"idea_{len(self.ideas)}"),
                title=str(idea_json.get("Title") or "Untitled"), experiment=str(idea_json.get("Experiment") or ""),
                ratings={k: _rating(idea_json.get(k)) for k in _RATINGS}, rounds=rounds, converged=converged,
                raw=idea_json, reflections=thoughts,
            )
            self.ideas.append(idea)
            return idea
        return None

    def fallback_idea(self) -> Idea | None:
        """A free-form idea from the last reply, for when no conversation gave JSON (None if none did)."""
        text = self._last_reply.strip()
        if self.ideas or not text:
            return None
        idea = Idea(index=0, name="unparsed_idea", title="Free-form idea (the model gave no idea JSON)",
                    experiment=text[:2000], ratings={k: None for k in _RATINGS}, rounds=0, converged=False,
                    parsed=False)
        self.ideas.append(idea)
        return idea

    def generate(self, count: int) -> list[Idea]:
        while len(self.ideas) < count and self.next_idea() is not None:
            pass
        return self.ideas


def idea_system_prompt(domain: str) -> str:
    """The task's persona line (the original keeps one per task; ours is derived from the domain)."""
    return (f"You are an ambitious AI PhD student who wants to publish work that moves the field of "
            f"{domain.replace('_', ' ')} forward significantly.")


def _thought(reply: str, limit: int = 500) -> str:
    """The reasoning part of a reply (before its idea JSON), for the record: what a reflection changed."""
    text = reply.split("NEW IDEA JSON", 1)[0]
    text = text.split("THOUGHT:", 1)[-1].strip()
    return text[:limit]


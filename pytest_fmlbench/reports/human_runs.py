"""A human run's own facts, from its records: whether an agent is a person, the person's active time, the
terminal a step showed. The runner reads them for every run, so they stay apart from the tables beside
the human's (``human_baseline``), which need pandas."""

from __future__ import annotations

HUMAN_AGENTS = ("human", "human-assisted")


# the shell session shown for one step in a report: its end, where it is longer
SHELL_SHOWN_CHARS = 20_000


def shell_session(extra: dict) -> str:
    """A human run's step as the person's terminal showed it (the pane's output, prompts and typed commands
    included, escape sequences removed), from its transcript and, after the last step, what followed it; ""
    for another agent's step. The text is the person's: escape it wherever it is shown."""
    events = [e for key in ("transcript", "transcript_end") for e in extra.get(key) or [] if isinstance(e, dict)]
    if not any(e.get("type") == "start" and e.get("tool") == "human" for e in events) and not any(
            e.get("type") == "activity" for e in events):
        return ""
    text = "".join(str(e.get("text", "")) for e in events if e.get("type") == "output")
    activity = [e for e in events if e.get("type") == "activity"]
    if activity:
        text += f"\n[active time so far: {float(activity[-1].get('active_s', 0.0)):.0f} s]"
    return text if len(text) <= SHELL_SHOWN_CHARS else "[...]\n" + text[-SHELL_SHOWN_CHARS:]


def active_seconds(steps: list) -> float | None:
    """A human run's active time over all its sessions (a resumed run's new session counts from 0 again:
    each session's last ``activity`` event is its total), from its steps' records; None for another agent."""
    total, session, seen = 0.0, 0.0, False
    for step in steps:
        for key in ("transcript", "transcript_end"):
            for event in step.extra.get(key) or []:
                if not isinstance(event, dict):
                    continue
                if event.get("type") == "start" and event.get("tool") == "human":
                    total, session = total + session, 0.0
                elif event.get("type") == "activity" and isinstance(event.get("active_s"), (int, float)):
                    session, seen = float(event["active_s"]), True
    return total + session if seen else None


def is_human(agent: str) -> bool:
    return agent in HUMAN_AGENTS

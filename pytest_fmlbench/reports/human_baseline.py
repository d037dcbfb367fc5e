"""The tables normalised by a person: where a session holds human runs (``--agent=human``,
``--agent=human-assisted``), each agent's score beside the human's on the same task.

As MLGym's AUP takes the baseline as one more solver, this takes the person as the reference: per task and
per agent run group, the agent's NI and the human's (each the mean over its seeds), their difference, and
the agent's NI as a share of the human's (1.0: the person's improvement reached; above: passed). The share
is given only where the person improved on the baseline (human NI > 0): NI is clamped at 0, as the
original's, so a share of a clamped 0 would say nothing. Per agent group, one line counts the tasks where
it reached the person. Nothing here changes a score: it is another view of the same NI.
"""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

from ..safe_text import printable
from ..scoring.aggregate import Scores
from .human_runs import HUMAN_AGENTS, SHELL_SHOWN_CHARS, active_seconds, is_human, shell_session

__all__ = ["COLUMNS", "HUMAN_AGENTS", "NOTE", "SHELL_SHOWN_CHARS", "active_seconds", "against_human", "human_items",
           "is_human", "shell_session"]

COLUMNS = ("task", "agent_group", "human_group", "agent_ni", "human_ni", "ni_minus_human", "share_of_human",
           "agent_test", "human_test", "human_seeds", "agent_seeds")
NOTE = ("NI against the human's on the same task: 'share' is the agent's NI / the person's (1 = the person's "
        "improvement reached), given only where the person's NI > 0 (NI is clamped at 0); each the mean over seeds")


def against_human(scores: Scores) -> pd.DataFrame:
    """One row per (task, agent run group, human run group) where the task has both; empty otherwise."""
    runs = scores.runs
    if runs.empty or not runs["agent"].map(is_human).any():
        return pd.DataFrame(columns=list(COLUMNS))
    human = runs[runs["agent"].map(is_human)]
    others = runs[~runs["agent"].map(is_human)]
    rows = []
    for (task, human_group), person in human.groupby(["task", "group"], sort=True):
        human_ni = float(person["ni"].mean())
        for agent_group, agent in others[others["task"] == task].groupby("group", sort=True):
            agent_ni = float(agent["ni"].mean())
            rows.append({
                "task": task, "agent_group": agent_group, "human_group": human_group,
                "agent_ni": agent_ni, "human_ni": human_ni, "ni_minus_human": agent_ni - human_ni,
                "share_of_human": agent_ni / human_ni if human_ni > 0 else math.nan,
                "agent_test": float(agent["raw_test"].mean()), "human_test": float(person["raw_test"].mean()),
                "human_seeds": len(person), "agent_seeds": len(agent),
            })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def reached_lines(frame: pd.DataFrame) -> list[str]:
    """Per agent run group: on how many of its tasks with a human run its NI reached the person's."""
    lines = []
    for agent_group, rows in frame.groupby("agent_group", sort=True):
        reached = int((rows["agent_ni"] >= rows["human_ni"]).sum())
        lines.append(f"{printable(agent_group)}: reached the person's NI on {reached} of {len(rows)} task(s)")
    return lines


def human_items(scores: Scores) -> list:
    """What the session's summary adds where it holds human runs: the table and its lines; [] otherwise."""
    frame = against_human(scores)
    if frame.empty:
        return []
    table = Table(title="Against the human baseline (NI on test)", title_justify="left")
    for header in ("Task", "Agent", "Human", "Agent NI", "Human NI", "Agent - human", "Share", "Agent test",
                   "Human test"):
        table.add_column(header, justify="left" if header in ("Task", "Agent", "Human") else "right")
    for row in frame.itertuples():
        table.add_row(printable(row.task), printable(row.agent_group), printable(row.human_group),
                      _num(row.agent_ni), _num(row.human_ni), _num(row.ni_minus_human), _num(row.share_of_human, 2),
                      _num(row.agent_test), _num(row.human_test))
    return [table, *reached_lines(frame), NOTE]


def _num(value: float, digits: int = 4) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"

"""The original FML-bench's task text, for agents asked to show it instead of ours.

Every agent of the original reads its task from ``ml_tasks/<task>/prompt.json``: ``task_description``
is the task every prompt shows (the editor's "Task context", the ideas', the analyses'), and ``system``
is the persona of AI Scientist v1's idea conversations. This project's tasks describe the task as this
harness runs it (its data, its splits, its editable files, its constraints), so ours is the default; the
original's text can be given instead (``--agent-opt port_task_text=PATH``, PATH the user's checkout of
qrzou/FML-bench or its ``ml_tasks`` folder). It applies to full-profile tasks, whose ``original.task``
names the original's folder; a small-profile task (other data, other files) keeps ours.

The texts are read when the option is parsed, in the harness's process (the agent's sandbox does not
show the user's files), and travel with the options: the run's record keeps the text its agent saw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

PROMPT_FILE = "prompt.json"


class PortPrompt(BaseModel):
    """One ``prompt.json`` of the original."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    system: str
    task_description: str


def load_port_prompts(value: Any) -> Any:
    """A path (the original's checkout or its ``ml_tasks``) becomes {original task: PortPrompt}; parsed data
    (the options as they reach the agent's process) passes through. Raises ValueError with one line."""
    if not isinstance(value, (str, Path)):
        return value
    root = Path(value).expanduser()
    folder = root / "ml_tasks" if (root / "ml_tasks").is_dir() else root
    prompts: dict[str, PortPrompt] = {}
    for path in sorted(folder.glob(f"*/{PROMPT_FILE}")):
        try:
            prompts[path.parent.name] = PortPrompt.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError, ValidationError) as exc:
            raise ValueError(f"{path}: not a prompt.json with 'system' and 'task_description' "
                             f"({type(exc).__name__})") from None
    if not prompts:
        raise ValueError(f"no ml_tasks/*/{PROMPT_FILE} under {root} (give the original FML-bench's checkout)")
    return prompts


def port_prompt(task: Any, prompts: dict[str, PortPrompt] | None) -> PortPrompt | None:
    """The original's prompt for a full-profile task, when given and the original has one."""
    if not prompts or task.profile != "full" or task.original is None:
        return None
    return prompts.get(task.original.task)

"""Which runs are repetitions of one another: a run group is every run of one identity but its seed.

The identity is the one that names a run directory (``runner.RunSettings.identity``): agent, its options,
model, provider, step budget, sandbox and agent process, and a full-profile task's scale; only the seed
varies inside a group, so only seeds are averaged. A task's version and fingerprint are the task's, not the
agent's: runs of one task at different versions or contents are kept apart as rows of their own (see
:func:`task_rows`), never averaged.

Every reader that aggregates (the tables, CSV, ``session.json``, AUP, the HTML report) takes its groups and
their names from here, so the same runs read the same everywhere:

* :attr:`RunGroup.title`: the full identity in one short, stable line, e.g.
  ``random-search / - / steps 3 / opts include_baseline=false``; a group run with the agent's defaults
  says ``default options``, and a smoke group ends with ``smoke``;
* :attr:`RunGroup.label`: the solver's name where it is alone (``a``, ``b / m``); where one agent/model pair
  has several groups, the name plus what sets each apart (``random-search / steps 2``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the grouping's functions take the tables' frames; pandas is the caller's import
    import pandas as pd

SMOKE = "smoke"
SMOKE_NOTE = "smoke: a check of the code path, not a result"
# a task whose baseline is not measured yet: raw values stand, NI and AUP have nothing to be relative to
UNMEASURED_NOTE = "baseline unmeasured: no NI (fmlbench baseline --measure)"
# the identity's columns in Scores.runs, in the order a title names them
GROUP_COLUMNS = ("agent", "model", "provider", "steps_budget", "options", "sandbox", "agent_process", "scale")
# an options text longer than this is cut, with a digest that keeps two such groups apart
OPTIONS_WIDTH = 60
UNKNOWN = ""
# where the agent ran, when it was not its own process (the default)
PROCESS_MARKS = {"in process": "agent in process", "external": "external agent"}


@dataclass(frozen=True)
class RunGroup:
    """One identity but the seed. Field values are as in ``Scores.runs`` (strings; ``""`` where the source
    does not say: the original's results record no options, budget or process)."""

    agent: str
    model: str
    provider: str = UNKNOWN
    steps_budget: str = UNKNOWN
    # the options as canonical JSON (sorted keys); "" where the source does not record them
    options: str = UNKNOWN
    sandbox: str = UNKNOWN
    agent_process: str = UNKNOWN
    # "smoke" for a smoke-scale group, "" otherwise (a full-scale run and a small-profile task's run alike)
    scale: str = UNKNOWN
    label: str = field(default="", compare=False)

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in GROUP_COLUMNS)

    @property
    def smoke(self) -> bool:
        return self.scale == SMOKE

    @property
    def solver(self) -> str:
        return self.agent if self.model in ("-", "", None) else f"{self.agent} / {self.model}"

    def parts(self) -> dict[str, str]:
        """The identity's words, by column: what a title joins and a label picks from."""
        marks = [mark for mark in ("unsandboxed" if self.sandbox == "unsandboxed" else "",
                                   PROCESS_MARKS.get(self.agent_process, "")) if mark]
        return {
            "model": self.model or "-",
            "provider": f"via {self.provider}" if self.provider else "",
            "steps_budget": f"steps {self.steps_budget}" if self.steps_budget else "",
            "options": options_text(self.agent, self.options),
            "sandbox": " / ".join(marks),
            "scale": SMOKE if self.smoke else "",
        }

    @property
    def title(self) -> str:
        """The whole identity, short and the same whatever else a folder holds."""
        return " / ".join([self.agent, *(text for text in self.parts().values() if text)])


def identity_of(run: Any) -> dict[str, str]:
    """A run's group identity, from a :class:`~pytest_fmlbench.scoring.runs.RunInput`."""
    return {
        "agent": run.agent, "model": run.model or "-", "provider": run.provider or UNKNOWN,
        "steps_budget": str(run.steps_budget) if run.steps_budget is not None else UNKNOWN,
        "options": canonical(run.options) if run.options is not None else UNKNOWN,
        "sandbox": run.sandbox or UNKNOWN, "agent_process": run.agent_process or UNKNOWN,
        "scale": SMOKE if run.scale == SMOKE else UNKNOWN,
    }


def canonical(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=64)
def default_options(agent: str) -> str | None:
    """A built-in agent's default options as canonical JSON; None for any other agent (a user's agent is
    not imported to score its runs) and for one whose options have no defaults."""
    from ..agentkit.loading import builtin_names, load_builtin

    if agent not in builtin_names():
        return None
    try:
        return canonical(load_builtin(agent).Options().model_dump(mode="json"))
    except Exception:  # an agent that cannot be loaded here: its options are shown whole
        return None


def options_text(agent: str, options: str) -> str:
    """``default options``, or ``opts k=v, ...`` naming what differs from the agent's defaults (every option
    where the defaults are unknown); "" where the source records no options."""
    if not options:
        return ""
    chosen = json.loads(options)
    defaults = default_options(agent)
    if chosen == {} or (defaults is not None and json.loads(defaults) == chosen):
        return "default options"
    base = json.loads(defaults) if defaults is not None else {}
    changed = {k: v for k, v in sorted(chosen.items()) if k not in base or base[k] != v}
    text = "opts " + ", ".join(f"{k}={_value_text(v)}" for k, v in changed.items())
    if len(text) > OPTIONS_WIDTH:
        digest = hashlib.sha256(options.encode()).hexdigest()[:8]
        text = f"{text[:OPTIONS_WIDTH - 12]}… #{digest}"
    return text


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def run_groups(runs: pd.DataFrame) -> list[RunGroup]:
    """The groups of ``runs`` (rows of ``Scores.runs``), sorted, each with its label among the others."""
    if runs.empty:
        return []
    keys = sorted(set(group_keys(runs)))
    groups = [RunGroup(**dict(zip(GROUP_COLUMNS, key))) for key in keys]
    return label_groups(groups)


def label_groups(groups: list[RunGroup]) -> list[RunGroup]:
    """Each group named by its solver, plus, where a solver has several groups, the words that differ."""
    by_solver: dict[str, list[RunGroup]] = {}
    for group in groups:
        by_solver.setdefault(group.solver, []).append(group)
    out = []
    for group in groups:
        siblings = by_solver[group.solver]
        if len(siblings) == 1:
            out.append(_with_label(group, group.solver))
            continue
        mine = group.parts()
        differing = [name for name in mine if name != "model"
                     and len({s.parts()[name] for s in siblings}) > 1]
        words = [mine[name] or _absent(name) for name in differing]
        out.append(_with_label(group, " / ".join([group.solver, *words])))
    # identities whose words agree (a record too old to name its sandbox beside one that does) stay apart
    seen: dict[str, int] = {}
    for index, group in enumerate(out):
        seen[group.label] = seen.get(group.label, 0) + 1
        if seen[group.label] > 1:
            out[index] = _with_label(group, f"{group.label} #{seen[group.label]}")
    return out


def _absent(part: str) -> str:
    return {"scale": "not smoke", "options": "options not recorded", "steps_budget": "steps not recorded",
            "provider": "no provider", "sandbox": "sandboxed"}.get(part, "-")


def _with_label(group: RunGroup, label: str) -> RunGroup:
    return RunGroup(**{f.name: getattr(group, f.name) for f in fields(group) if f.name != "label"}, label=label)


def group_keys(runs: pd.DataFrame) -> list[tuple[str, ...]]:
    """The group key of each row of ``Scores.runs``, in order."""
    return list(zip(*(runs[name].astype(str) for name in GROUP_COLUMNS)))


def task_rows(runs: pd.DataFrame) -> pd.Series:
    """Each run's row name in the per-task tables: its task, or, where runs of one task hold more than one
    known version or contents (task version, fingerprint), the task with them (``t (v2 1a2b3c4d)``). Runs
    from a source that records neither (the original's results) keep the task's name."""
    names = runs["task"].astype(str).copy()
    version = runs["task_version"].astype(str)
    fingerprint = runs["task_fingerprint"].astype(str)
    known = fingerprint != ""
    for task in names[known].unique():
        mine = known & (runs["task"] == task)
        if len(set(zip(version[mine], fingerprint[mine]))) > 1:
            names[mine] = [f"{task} (v{v} {fp[:8]})" for v, fp in zip(version[mine], fingerprint[mine])]
    return names


__all__ = ["GROUP_COLUMNS", "SMOKE", "SMOKE_NOTE", "RunGroup", "default_options", "group_keys",
           "identity_of", "label_groups", "options_text", "run_groups", "task_rows"]

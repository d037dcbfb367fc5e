"""From runs to tables' numbers: one row per run, mean ± SEM over seeds per task, plain mean over tasks.

Only seeds are averaged: runs are grouped by their whole identity but the seed (:mod:`.groups`), and
each group is its own column or table, never averaged with another.

Exploration metrics need an encoder; every frame carries its name in an ``encoder`` column, and a
:class:`Scores` is always computed with one encoder, so scores of different encoders never mix.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..record import RunRecord
from . import exploration
from .metrics import EXPLORATION, PROCESS_COLUMNS, score_run
from .groups import RunGroup, group_keys, identity_of, run_groups, task_rows
from .runs import RunInput, describe, from_record, printable_line

NAN = float("nan")
AUTO = "auto"
NUMERIC = ("raw_test", "best_val", "ni", "ni_val", *PROCESS_COLUMNS)


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a scoring pass uses, and the name every table shows for it."""

    encoder: Any
    label: str

    @classmethod
    def resolve(cls, encoder: Any = AUTO) -> EncoderChoice:
        if encoder is None:
            return cls(None, "none (exploration metrics off)")
        if isinstance(encoder, EncoderChoice):
            return encoder
        if isinstance(encoder, str):
            try:
                chosen = exploration.default_encoder(None if encoder == AUTO else encoder)
            except exploration.EncoderUnavailable as exc:
                return cls(None, f"unavailable: {exc}")
            return cls(chosen, chosen.name) if chosen is not None else cls(None, "none (exploration metrics off)")
        return cls(encoder, encoder.name)


def run_exploration(run: RunInput, encoder: Any) -> dict[str, float]:
    """The four exploration metrics of one run, cached per run (by its snapshots' hashes) and encoder."""
    empty = {name: NAN for name in EXPLORATION}
    if encoder is None or run.load_snapshots is None:
        return empty
    cache_dir = getattr(encoder, "cache_dir", None)
    cached = Path(cache_dir) / "runs" / f"{run.snapshot_key}.json" if cache_dir and run.snapshot_key else None
    if cached is not None and cached.is_file():
        try:
            values = json.loads(cached.read_text())
            if set(values) == set(EXPLORATION):
                return {k: float(v) for k, v in values.items()}
        except (OSError, ValueError):
            pass
    snapshots = run.load_snapshots()
    if not snapshots:
        return empty
    vectors, baseline = exploration.embed_run(encoder, snapshots, run.load_baseline() if run.load_baseline else None)
    values = exploration.exploration_metrics(vectors, baseline)
    if cached is not None:
        tmp = cached.with_name(f"{cached.stem}.{os.getpid()}.tmp")
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(values))
            os.replace(tmp, cached)
        except OSError:
            pass  # a cache that cannot be written only costs time next run
    return values


# told of each run a report leaves out: (the run as given, why in one line)
LeftOut = Callable[[Any, str], None]


def say_left_out(item: Any, why: str) -> None:
    """The default for a command: one line on standard error."""
    print(f"fmlbench: left out {describe(item)}: {why}", file=sys.stderr)


def failure_line(exc: BaseException) -> str:
    """An exception as one printable line: its message may quote what a run holds."""
    return printable_line(f"{type(exc).__name__}: {exc}")


def as_inputs(runs: list) -> list[RunInput]:
    """Accepts RunInputs, (RunRecord, steps) and (RunRecord, steps, run_dir) tuples."""
    return [_as_input(_checked(item)) for item in runs]


def _checked(item: Any) -> Any:
    if isinstance(item, RunInput) or (isinstance(item, tuple) and item and isinstance(item[0], RunRecord)):
        return item
    raise TypeError(f"cannot score {type(item).__name__}")


def _as_input(item: Any) -> RunInput:
    return item if isinstance(item, RunInput) else from_record(*item)


def _sem(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else NAN


@dataclass
class Scores:
    """One row per run (``runs``), with the encoder the exploration metrics used."""

    runs: pd.DataFrame
    encoder: str = "none"

    @classmethod
    def from_runs(cls, runs: list, encoder: Any = AUTO, left_out: LeftOut = say_left_out) -> Scores:
        """One row per run, in the order given. A run that cannot be scored is left out and ``left_out`` told
        why: one run's failure never takes the others' scores with it. A run whose exploration metrics
        cannot be computed keeps its other scores (those four are NaN), and ``left_out`` is told so."""
        choice = EncoderChoice.resolve(encoder)
        scored = []
        for item in map(_checked, runs):  # a wrong type is the caller's bug, not a run's
            try:
                run = _as_input(item)
                scored.append((run, score_run(run)))
            except Exception as exc:
                left_out(item, f"cannot be scored: {failure_line(exc)}")
        explored = []
        for run, _ in scored:
            try:
                explored.append(run_exploration(run, choice.encoder))
            except exploration.EncoderUnavailable as exc:
                # the encoder cannot run here: no run gets exploration metrics, and the tables say why
                choice = EncoderChoice(None, f"unavailable: {exc}")
                explored = [{name: NAN for name in EXPLORATION} for _ in scored]
                break
            except Exception as exc:
                left_out(run, f"its exploration metrics are left out: {failure_line(exc)}")
                explored.append({name: NAN for name in EXPLORATION})
        rows = [{**identity_of(run), "task": run.task, "seed": run.seed, **scores, **values,
                 "encoder": choice.label, "source": run.source, "task_id": run.task,
                 "task_version": "" if run.task_version is None else str(run.task_version),
                 "task_fingerprint": run.task_fingerprint or ""}
                for (run, scores), values in zip(scored, explored)]
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame[list(NUMERIC)] = frame[list(NUMERIC)].astype(float)
            # one task's runs at different versions or contents are rows of their own, never seeds of one
            frame["task"] = task_rows(frame)
            labels = {group.key: group.label for group in run_groups(frame)}
            frame["group"] = [labels[key] for key in group_keys(frame)]
        return cls(frame, choice.label)

    def groups(self) -> list[tuple[RunGroup, Scores]]:
        """One entry per run group (every identity but the seed), sorted, each with its runs."""
        if self.runs.empty:
            return []
        return [(group, Scores(self.runs[self.runs["group"] == group.label].reset_index(drop=True), self.encoder))
                for group in run_groups(self.runs)]

    def per_task(self) -> pd.DataFrame:
        """Mean and SEM over seeds for each task (SEM is NaN with one seed); notes joined."""
        grouped = self.runs.groupby("task", sort=True)
        out = grouped[["metric", "direction", "transform", "baseline_val", "baseline_test"]].first()
        out["seeds"] = grouped.size()
        for col in NUMERIC:
            out[col] = grouped[col].mean()
            out[f"{col}_sem"] = grouped[col].agg(_sem)
        out["note"] = grouped["note"].agg(_join_notes)
        out["encoder"] = self.encoder
        return out

    def summary(self) -> dict[str, float]:
        """Plain mean over tasks (NaN skipped) of NI and every process metric."""
        tasks = self.per_task()
        return {col: float(tasks[col].mean(skipna=True)) if tasks[col].notna().any() else NAN
                for col in ("raw_test", "ni", "ni_val", *PROCESS_COLUMNS)}


def _join_notes(notes: pd.Series) -> str:
    distinct = sorted(set(notes))
    if len(distinct) > 1:
        distinct = [n for n in distinct if n != "ok"]
    return " | ".join(distinct)


def best_over_seeds(values: pd.Series, direction: str) -> float:
    values = values.dropna()
    if values.empty:
        return NAN
    return float(values.max() if direction == "higher" else values.min())


__all__ = ["AUTO", "EncoderChoice", "LeftOut", "Scores", "as_inputs", "best_over_seeds", "failure_line",
           "run_exploration", "say_left_out"]

"""A session's reports, each made from all its runs, and kept whole when one run breaks it.

The tables, the CSV files, the JSON summary and the HTML page are each made from every run of a session.
Runs hold what agents sent: if making one report raises, :func:`each_run_or_without` finds the runs that
make it fail on their own, leaves them out of that report with one line each, and makes it from the
others; where it fails without any one run to blame, it says so in one line. The other reports, and the
other runs, are reported whatever happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..scoring.aggregate import Scores, failure_line
from ..scoring.runs import describe

T = TypeVar("T")
# makes one report from (runs, their scores, one row per run in the same order); ``trial``: a try with one
# run, to find the runs that break it (it must not write where the report goes)
Make = Callable[[list, Scores, bool], T]


def scored_runs(runs: list[tuple], scores: Scores) -> list[tuple]:
    """The runs the scores hold a row for, in the scores' order (a run that could not be scored is left out
    of the tables, and so out of every report)."""
    by_source = {str(run_dir): (record, steps, run_dir) for record, steps, run_dir in runs}
    return [by_source[source] for source in scores.runs["source"]] if not scores.runs.empty else []


def subset(scores: Scores, rows: list[int]) -> Scores:
    return Scores(scores.runs.iloc[rows].reset_index(drop=True), scores.encoder)


def each_run_or_without(what: str, runs: list[tuple], scores: Scores, make: Make[T], say: Callable[[str], None],
                        passes: tuple[type[BaseException], ...] = ()) -> T | None:
    """``make(runs, scores, False)``; where that raises, made again without the runs that make it raise on
    their own, one line for each; None, after one line, where it cannot be made. ``passes``: exceptions that
    are not about a run (a missing library), raised to the caller as they are."""
    try:
        return make(runs, scores, False)
    except passes:
        raise
    except Exception as exc:
        failure = exc
    blamed: dict[int, BaseException] = {}
    for row, run in enumerate(runs):
        try:
            make([run], subset(scores, [row]), True)
        except passes:
            raise
        except Exception as exc:
            blamed[row] = exc
    kept = [row for row in range(len(runs)) if row not in blamed]
    # every run failing alone blames none of them: the report itself cannot be made
    if blamed and kept:
        try:
            made = make([runs[row] for row in kept], subset(scores, kept), False)
        except passes:
            raise
        except Exception as exc:
            failure = exc
        else:
            for row, exc in blamed.items():
                say(f"{describe(runs[row])} left out of the {what}: {failure_line(exc)}")
            return made
    say(f"the {what} could not be made: {failure_line(failure)}")
    return None

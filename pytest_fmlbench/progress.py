"""Live progress of a benchmark session, shown by the pytest controller, also under ``-n N``.

Each run (in whichever xdist worker) keeps one small JSON file under ``<out>/live/`` up to date: the
step in flight, its action, the best validation value and its gain over the baseline, failed steps,
tokens, dollars and elapsed time. The controller polls that folder: a terminal gets a live table
(rich), anything else (CI logs) one plain line per finished step. Files are the channel because a
step's progress happens inside a worker, where xdist carries nothing to the controller until the
item ends.

The item's name is ours, but the action, a notice and a Slurm state may carry an agent's words (or
anything, in a file edited since): every line and cell passes ``safe_text.printable`` before a terminal
sees it, and the live table shows its cells as plain text, never as rich markup.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .safe_text import printable

LIVE_DIR = "live"
# under LIVE_DIR: one file per Slurm job (item, job id, Slurm state), written by the --slurm controller
JOBS_DIR = "jobs"
LINES_KEPT = 100
REASON_CHARS = 200
POLL_S = 0.5


class LiveFile:
    """Worker side: one run's progress file, rewritten atomically at each step's start and end."""

    def __init__(self, out_dir: Path, run_id: str, item: str, steps_total: int, baseline_val: float,
                 direction: str, scale: float, on_update: Callable[[], None] | None = None):
        self.path = out_dir / LIVE_DIR / f"{run_id}.json"
        # where the display runs in this very process (no -n, no --slurm): it shows the new state now
        self.on_update = on_update
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.state: dict[str, Any] = {
            "item": item, "steps_total": steps_total, "baseline_val": baseline_val, "direction": direction,
            "scale": scale, "step": 0, "done": 0, "action": "", "best_val": None, "failed": 0, "tokens": 0,
            "cost_usd": 0.0, "started": time.time(), "last": None, "finished": False,
        }

    def update(self, **fields: Any) -> None:
        before = self.state["done"]
        self.state.update(fields, updated=time.time())
        if self.state["done"] > before:
            # each finished step's line is kept (the last LINES_KEPT): two steps that end between two looks
            # of the display still get a line each
            lines = self.state.setdefault("lines", [])
            lines.append([self.state["done"], plain_line(self.state)])
            del lines[:-LINES_KEPT]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)
        if self.on_update is not None:
            self.on_update()

    def close(self) -> None:
        self.update(finished=True)


def gain(state: dict[str, Any]) -> float | None:
    """Signed improvement of the best validation value over the baseline, in normalised units."""
    best = state.get("best_val")
    if best is None or not state.get("scale") or state["baseline_val"] is None:
        return None
    diff = best - state["baseline_val"] if state["direction"] == "higher" else state["baseline_val"] - best
    return diff / state["scale"]


def describe(state: dict[str, Any]) -> dict[str, str]:
    best = state.get("best_val")
    g = gain(state)
    cost = state.get("cost_usd")
    return {
        "item": printable(state["item"]),
        "step": f"{state['step']}/{state['steps_total']}",
        "best": "-" if best is None else f"{best:.4g}" + ("" if g is None else f" ({g:+.3f})"),
        "failed": str(state.get("failed", 0)),
        "tokens": f"{state.get('tokens', 0):,}",
        "cost": "unknown" if cost is None else f"${cost:.4f}",
        "elapsed": _clock(time.time() - state["started"]),
        "action": printable(state.get("action") or ""),
    }


def with_job(state: dict[str, Any], job: dict[str, Any] | None) -> dict[str, Any]:
    """A run's state with its Slurm job's state before the action (RUNNING step k/N shows in the row)."""
    if not job:
        return state
    action = state.get("action") or ""
    return state | {"action": f"slurm {job['job_id']} {job['state']}" + (f" · {action}" if action else "")}


def queued_row(job: dict[str, Any]) -> dict[str, Any]:
    return {"item": job["item"], "step": 0, "steps_total": job.get("steps_total", "?"), "baseline_val": 0.0,
            "direction": "higher", "scale": 0, "best_val": None, "started": time.time(), "cost_usd": 0.0,
            "action": f"slurm {job['job_id']} {job['state']}"}


# the head of an error whose cause is in its last line (a Python error's last line names it)
_EXITED = re.compile(r"exited with code -?\d+$")


def failure_reason(error: str) -> str:
    """Why a step failed, in one line: the broken constraint with its value, a timeout or a limit (the error's
    head says so), or else the error's last line (an experiment's ``KeyError: 'lr'``)."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if _EXITED.search(lines[0]) and len(lines) > 1 else lines[0]


def plain_line(state: dict[str, Any]) -> str:
    d = describe(state)
    last = state.get("last") or {}
    outcome = "failed" if not last.get("success") else f"{last.get('metric'):.4g}"
    action = printable(last.get("action", ""))
    line = (f"[fmlbench] {d['item']} step {state['done']}/{state['steps_total']} {action} -> "
            f"{outcome}; best {d['best']}, failed {d['failed']}, tokens {d['tokens']}, {d['cost']}, {d['elapsed']}")
    reason = last.get("reason") if not last.get("success") else None
    # the step's own words (an experiment's error) end the line, spelt out and cut
    return f"{line}; reason: {printable(' '.join(str(reason).split()), REASON_CHARS)}" if reason else line


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class LiveDisplay:
    """Controller side: polls ``<out>/live`` and shows what runs where, until stopped.

    Its thread may write only while no item runs under pytest's output capture in this process: there a
    line written from another thread would land in the item's captured output (lost when the item passes),
    and marked as shown it would never come back. So an item running here holds the display back
    (``held_back``); the main thread shows what is new at moments when capture is off (``pump``, and
    ``shown`` while it waits with capture off, as a ``--slurm`` item does). A line is marked as shown only
    when it is written, under one lock, so none is lost and none is written twice.
    """

    def __init__(self, out_dir: Path, write_line, tty: bool):
        self.folder = out_dir / LIVE_DIR
        self.write_line = write_line
        self.tty = tty
        self.seen_steps: dict[str, int] = {}
        self.seen_jobs: dict[str, str] = {}
        self.seen_notices: dict[str, str] = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fmlbench-live", daemon=True)
        self.live = None
        self.lock = threading.RLock()  # one poll at a time; held while a poll writes
        self.held = 0  # items running under capture in this process: the thread writes nothing

    def start(self) -> None:
        if self.folder.exists():
            for stale in [*self.folder.glob("*.json"), *self.folder.glob(f"{JOBS_DIR}/*.json")]:
                stale.unlink(missing_ok=True)
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            # refreshed by this display's own polls only (never by rich's thread), and without taking over
            # sys.stdout, which pytest's capture swaps per item
            self.live = Live(self._table([]), console=Console(file=sys.stdout), auto_refresh=False,
                             transient=True, redirect_stdout=False, redirect_stderr=False)
            self.live.start()
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.pump()
        if self.live is not None:
            self.live.stop()

    @contextlib.contextmanager
    def held_back(self):
        """While an item runs under capture in this process: the thread's polls write nothing."""
        with self.lock:
            self.held += 1
        try:
            yield
        finally:
            with self.lock:
                self.held -= 1

    @contextlib.contextmanager
    def shown(self):
        """While the main thread waits with capture off: what is new is shown now and as it comes."""
        with self.lock:
            held, self.held = self.held, 0
            self._poll()
        try:
            yield
        finally:
            with self.lock:
                self.held = held

    def pump(self) -> None:
        """From the main thread, with capture off: show what is new now."""
        with self.lock:
            self._poll()

    def _run(self) -> None:
        while not self.stop_event.wait(POLL_S):
            with self.lock:
                if not self.held:
                    self._poll()

    def _states(self) -> list[dict[str, Any]]:
        states = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.exists() else []:
            try:
                states.append(json.loads(path.read_text()) | {"_id": path.stem})
            except (OSError, ValueError):
                continue
        return states

    def _jobs(self) -> dict[str, dict[str, Any]]:
        jobs = {}
        for path in sorted((self.folder / JOBS_DIR).glob("*.json")) if (self.folder / JOBS_DIR).exists() else []:
            try:
                jobs[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return jobs

    def _poll(self) -> None:
        states = self._states()
        jobs = self._jobs()
        # a line a run needs its user to see (an external agent's socket), once, in a terminal or not
        for state in states:
            notice = state.get("notice")
            if notice and self.seen_notices.get(state["_id"]) != notice:
                self.seen_notices[state["_id"]] = notice
                line = f"[fmlbench] {printable(state['item'])}: {printable(notice)}"
                if self.live is not None:
                    from rich.text import Text

                    self.live.console.print(Text(line))
                else:
                    self.write_line(line)
        if self.live is not None:
            rows = [with_job(s, jobs.get(s["_id"])) for s in states if not s.get("finished")]
            running = {s["_id"] for s in states}
            # a job still queued has no run file yet: its row says so
            rows += [queued_row(job) for run_id, job in jobs.items() if run_id not in running and job["state"] != "done"]
            self.live.update(self._table(rows), refresh=True)
            return
        for run_id, job in jobs.items():
            if self.seen_jobs.get(run_id) != job["state"]:
                self.seen_jobs[run_id] = job["state"]
                self.write_line(printable(f"[fmlbench] {job['item']} slurm job {job['job_id']}: {job['state']}", None))
        for state in states:
            seen = self.seen_steps.get(state["_id"], 0)
            for done, line in state.get("lines", []):
                if done > seen:
                    seen = done
                    self.write_line(printable(line, None))
            self.seen_steps[state["_id"]] = seen

    @staticmethod
    def _table(states: list[dict[str, Any]]):
        from .reports.text import LiteralTable

        table = LiteralTable(title="FML-bench: running", title_justify="left", expand=False)
        for column in ("task", "step", "best val (gain)", "failed", "tokens", "cost", "elapsed", "action"):
            table.add_column(column)
        for state in states:
            d = describe(state)
            table.add_row(*(d[k] for k in ("item", "step", "best", "failed", "tokens", "cost", "elapsed", "action")))
        return table

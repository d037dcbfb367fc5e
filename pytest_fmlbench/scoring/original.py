"""Results directories written by the original FML-bench, read into :class:`RunInput` and scored as ours.

Layout (the original's ``--output-dir``)::

    <agent>/<Task>/<run>/summary.json                       the run (first run folder with one is used)
    <agent>/<Task>/<run>/step_snapshots/step_NNNN_code.json  each step's target files
    <agent>/<Task>/<run>/*_final_test/run_final_test/execution_*/test_info.json   the final test
    .../execution_*/records/bug_test_*.json                  a crashed final test

``summary.json`` fields used: agent, model, best_val_metric, baseline_primary_metric, total_steps,
val_steps[].val_result.success, val_steps[].primary_metric, token_usage.total_tokens,
total_duration_seconds. Task facts (dataset and metric read from test_info.json, direction, bounds,
declared baselines) come from the original's tables (``original_tasks.json``), from an FML-bench
checkout (``fmlbench_root``: also gives the baseline code, needed for Reach), or from our own task
specs for task folders named after them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..spec import TaskSpec
from .exploration import EXCLUDED_BASENAMES
from .runs import RunInput, StepView

TABLE = Path(__file__).with_name("original_tasks.json")
SNAPSHOT_GLOB = "step_*_code.json"
FINAL_TEST_GLOBS = ("*_final_test/run_final_test/execution_*", "final_test/run_final_test/execution_*")
# the original's reasons for not crediting a test: our note's outcome, then the original's code
REASONS = {
    "no_final_test_dir": "test failed",
    "bug_test": "test failed",
    "missing_test_info": "test failed",
    "unreadable": "test failed",
    "metric_extraction_failed": "test failed",
    "constraint_violated": "constraint violated",
}


class OriginalLayoutError(ValueError):
    """An original results directory that cannot be scored; the message is one line."""


@dataclass(frozen=True)
class TaskFacts:
    name: str
    dataset: str | None  # None: the mean over every dataset reporting the metric
    metric: str
    direction: str  # of the raw metric
    transform: str
    best: float
    worst: float | str
    baseline_val: float | None
    baseline_test: float | None
    repo_dir: str = ""
    target_files: tuple[str, ...] = ()


@cache
def builtin_tasks() -> dict[str, TaskFacts]:
    table = json.loads(TABLE.read_text())["tasks"]
    return {name: TaskFacts(name=name, dataset=t["dataset"], metric=t["metric"], direction=t["direction"],
                            transform=t["transform"], best=t["best"], worst=t["worst"],
                            baseline_val=t["baseline_val"], baseline_test=t["baseline_test"],
                            repo_dir=t["repo_dir"], target_files=tuple(t["target_files"]))
            for name, t in table.items()}


def facts_from_spec(spec: TaskSpec) -> TaskFacts:
    return TaskFacts(name=spec.id, dataset=None, metric=spec.metric.key, direction=spec.metric.direction,
                     transform=spec.metric.transform, best=spec.normalization.best,
                     worst=spec.normalization.worst, baseline_val=spec.baseline.val,
                     baseline_test=spec.baseline.test, target_files=tuple(spec.editable))


def _load_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_metric(info, facts: TaskFacts) -> float | None:
    """The task's metric from a ``{dataset: {"means": {...}}}`` file, or None."""
    if not isinstance(info, dict):
        return None
    try:
        if facts.dataset is not None:
            return float(info[facts.dataset]["means"][facts.metric])
        values = [float(d["means"][facts.metric]) for d in info.values()
                  if isinstance(d, dict) and isinstance(d.get("means"), dict) and facts.metric in d["means"]]
    except (KeyError, TypeError, ValueError):
        return None
    return sum(values) / len(values) if values else None


def constraint_violated(info) -> bool:
    if not isinstance(info, dict):
        return False
    for data in info.values():
        if isinstance(data, dict):
            for section in ("means", "final_info_dict"):
                part = data.get(section)
                if isinstance(part, dict) and part.get("constraint_violated") is True:
                    return True
    return False


def with_checkout(facts: TaskFacts, root: Path) -> TaskFacts:
    """Baselines and target files as an FML-bench checkout declares them."""
    task_dir = root / "ml_tasks" / facts.name
    config = _load_json(task_dir / "config.json")
    if not isinstance(config, dict):
        return facts
    values = {split: read_metric(_load_json(task_dir / "baseline_results" / f"{split}_info.json"), facts)
              for split in ("val", "test")}
    return replace(facts, baseline_val=values["val"], baseline_test=values["test"],
                   repo_dir=config.get("repo_dir", facts.repo_dir),
                   target_files=tuple(config.get("target_files", facts.target_files)))


def _is_run_folder(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith("_") and not path.name.endswith("_deprecated")


def run_folders(task_dir: Path) -> list[Path]:
    return sorted(p for p in task_dir.iterdir() if _is_run_folder(p))


def main_run(task_dir: Path) -> Path | None:
    return next((p for p in run_folders(task_dir) if (p / "summary.json").is_file()), None)


def final_test_dir(agent: str, task_dir: Path, main: Path) -> Path | None:
    # The AI Scientist v2 runs its final test from a sibling run folder
    homes = [p for p in run_folders(task_dir) if p != main] if agent == "ai_scientist_v2" else [main]
    found = [p for home in homes for pattern in FINAL_TEST_GLOBS for p in home.glob(pattern) if p.is_dir()]
    return sorted(found)[-1] if found else None


def resolve_test(agent: str, task_dir: Path, main: Path, facts: TaskFacts) -> tuple[float | None, str]:
    """(test value, "ok") or (None, the original's reason for crediting the baseline)."""
    exec_dir = final_test_dir(agent, task_dir, main)
    if exec_dir is None:
        return None, "no_final_test_dir"
    records = exec_dir / "records"
    if records.is_dir() and any(records.glob("bug_test_*.json")):
        return None, "bug_test"
    path = exec_dir / "test_info.json"
    if not path.is_file():
        return None, "missing_test_info"
    info = _load_json(path)
    if info is None:
        return None, "unreadable"
    if constraint_violated(info):
        return None, "constraint_violated"
    value = read_metric(info, facts)
    return (value, "ok") if value is not None else (None, "metric_extraction_failed")


def target_relative(key: str, repo_dir: str) -> str | None:
    """A snapshot key ("workspace/<Task>/<repo...>/<file>") as the target file's path, as the original maps it."""
    parts = key.split("/")
    if len(parts) < 3:
        return None
    after = "/".join(parts[2:])
    repo_parts = repo_dir.split("/")
    subdir = "/".join(repo_parts[2:]) if len(repo_parts) > 2 else ""
    relative = after[len(subdir) + 1:] if subdir and after.startswith(subdir + "/") else after
    return None if Path(relative).name in EXCLUDED_BASENAMES else relative


def baseline_code(facts: TaskFacts, root: Path | None) -> dict[str, str] | None:
    if root is None or not facts.repo_dir:
        return None
    repo = root / facts.repo_dir
    files = {tf: (repo / tf).read_text() for tf in facts.target_files
             if Path(tf).name not in EXCLUDED_BASENAMES and (repo / tf).is_file()}
    return files or None


def _float_or_none(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def read_run(task_dir: Path, facts: TaskFacts, fmlbench_root: Path | None = None) -> RunInput | None:
    main = main_run(task_dir)
    if main is None:
        return None
    summary = _load_json(main / "summary.json")
    if not isinstance(summary, dict):
        raise OriginalLayoutError(f"{main / 'summary.json'}: not a readable summary")
    agent = summary.get("agent") or task_dir.parent.name
    test, reason = resolve_test(agent, task_dir, main, facts)
    steps = [StepView(success=(s.get("val_result") or {}).get("success") is True,
                      metric=_float_or_none(s.get("primary_metric")))
             for s in summary.get("val_steps") or []]
    tokens = (summary.get("token_usage") or {}).get("total_tokens")
    snapshot_files = sorted((main / "step_snapshots").glob(SNAPSHOT_GLOB))
    baseline = baseline_code(facts, fmlbench_root)

    def load_snapshots() -> list[dict[str, str]]:
        snapshots = []
        for path in snapshot_files:
            raw = _load_json(path) or {}
            files: dict[str, str] = {}
            for key in sorted(raw):
                relative = target_relative(key, facts.repo_dir)
                if relative is not None and relative not in files and isinstance(raw[key], str):
                    files[relative] = raw[key]
            snapshots.append(files)
        return snapshots

    digest = hashlib.sha256()
    for path in snapshot_files:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    digest.update(json.dumps(baseline, sort_keys=True).encode())
    best_val = _float_or_none(summary.get("best_val_metric"))
    return RunInput(
        agent=agent, model=summary.get("model") or "-", task=task_dir.name, seed=main.name,
        metric=facts.metric, direction=facts.direction, transform=facts.transform,
        norm_best=facts.best, norm_worst=facts.worst,
        baseline_val=facts.baseline_val, baseline_test=facts.baseline_test,
        curve_baseline=_float_or_none(summary.get("baseline_primary_metric")),
        steps=steps, total_steps=int(summary.get("total_steps") or 0), best_val=best_val,
        test=test, test_reason="ok" if reason == "ok" else REASONS[reason],
        labels=[] if reason in ("ok", "constraint_violated") or best_val is None else [f"original: {reason}"],
        tokens=_float_or_none(tokens), wall_s=_float_or_none(summary.get("total_duration_seconds")),
        cost_usd=None, tested_baseline=False, source=str(main),
        snapshot_key=digest.hexdigest() if snapshot_files else None,
        load_snapshots=load_snapshots if snapshot_files else None,
        load_baseline=lambda: baseline,
    )


def find_runs(root: Path, fmlbench_root: Path | None = None, specs: dict[str, TaskSpec] | None = None,
              exclude: set[Path] = frozenset()) -> list[RunInput]:
    """Every (agent, task) under ``root`` that has a run folder with summary.json, scored one run each
    (the first run folder in name order, as the original does). ``exclude``: folders that are ours."""
    task_dirs = sorted({summary.parent.parent for summary in Path(root).rglob("summary.json")
                        if summary.parent not in exclude and not (summary.parent / "record.json").exists()})
    known = builtin_tasks()
    runs = []
    for task_dir in task_dirs:
        name = task_dir.name
        if name in known:
            facts = known[name]
            if fmlbench_root is not None:
                facts = with_checkout(facts, fmlbench_root)
        elif specs and name in specs:
            facts = facts_from_spec(specs[name])
        else:
            raise OriginalLayoutError(
                f"{task_dir}: unknown task {name!r} (neither one of the original's 18 tasks nor one of ours; "
                "pass --tasks DIR holding its task.yaml)")
        run = read_run(task_dir, facts, fmlbench_root)
        if run is not None:
            runs.append(run)
    return runs


def paper_baseline_test(task_id: str) -> float | None:
    """The original's published baseline test value beside one of our full-profile tasks (id ``<original>_full``,
    or a twin's ``<original>_<variant>_full``); None for any other id (a small task's is a stand-in's)."""
    if not task_id.endswith("_full"):
        return None
    stem = task_id.removesuffix("_full")
    by_id = {name.lower(): facts for name, facts in builtin_tasks().items()}
    names = [name for name in by_id if stem == name or stem.startswith(name + "_")]
    return by_id[max(names, key=len)].baseline_test if names else None

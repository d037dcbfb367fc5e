"""Per small task: how far a better method moves the test score beside how far chance moves it.

For each selected small task it measures, with sessions run as users run them (sandboxed, one experiment
per xdist worker, as scripts/baseline_spread.py runs the baseline):

- the kernel spread: the unchanged baseline under each of baseline_spread's CPU variants, the farthest of
  their test values from the declared one;
- the seed SD: ``random-search`` at --short-steps steps over --seeds seeds, the sample standard deviation of
  the test values;
- the noise floor: the larger of the two;
- the headroom: the best test value of a stronger method over the declared baseline, the stronger methods
  being ``random-search`` at --long-steps steps and, where benchmarks/signal/<task>/ exists, the method
  written by hand in the editable files it holds (copied over the workspace, run by the baseline agent);
- their ratio, noise floor / headroom; the goal is at most 1/5 (RATIO_GOAL).

Figures are given in the task's metric and in NI (the noise floor and the headroom over the task's
normalisation range D, as scoring.metrics computes NI).

    .venv/bin/python scripts/signal_table.py [-k EXPR] [--parts kernel,seeds,long,better] [--seeds 5]
        [--short-steps 10] [--long-steps 50] [--workers 2] [--json FILE] [--load FILE]

A session of --long-steps steps on one task takes about that many experiments; on 2 cores the whole
table of the small tasks takes hours: run it on a quiet machine. ``--load FILE`` prints the table from
the values an earlier ``--json`` wrote; values measured by separate calls (``--parts``) merge into it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from baseline_spread import MARGIN, VARIANTS, run_variant  # noqa: E402

from pytest_fmlbench.scoring.metrics import raw_value, scale, scored_direction, transform_value  # noqa: E402
from pytest_fmlbench.spec import load_task  # noqa: E402

BETTER_METHODS = REPO / "benchmarks" / "signal"
RATIO_GOAL = 0.2
PARTS = ("kernel", "seeds", "long", "better")


def run_session(project: Path, selection: str, agent_args: list[str], workers: int,
                overlay: dict[str, Path] | None = None) -> list[dict]:
    """The records of one session of the small tasks ``selection`` picks, in a fresh copy of task_suites
    (with ``overlay``: task id -> a folder whose files replace that task's workspace files)."""
    env_extra, _ = VARIANTS["default"]
    shutil.copytree(REPO / "task_suites", project / "task_suites", ignore=shutil.ignore_patterns("__pycache__", "full"))
    for task, folder in (overlay or {}).items():
        for path in folder.iterdir():
            shutil.copyfile(path, project / "task_suites" / task / "workspace" / path.name)
    env = {**os.environ, **env_extra}
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "OMP_NUM_THREADS"):
        env.pop(var, None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *agent_args, "-m", "small",
               "task_suites", "-n", str(workers)]
    if selection:
        command += ["-k", selection]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    records = [json.loads(p.read_text()) for p in (project / "reports" / "fmlbench" / "runs").glob("*/*/record.json")]
    # exit 1 is an item that failed: a constraint broken on the test split is an outcome with a record,
    # not a broken session (random search's best-on-val code can break an accuracy floor on test)
    if done.returncode not in (0, 1) or not records:
        sys.exit(f"{' '.join(agent_args)}: the session failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    return records


def scores_by_task(records: list[dict]) -> dict[str, list[float]]:
    """Each task's test values, one per seed; a run that broke a constraint on test counts as the
    baseline's value, as the tables score it (no improvement), never as its own value."""
    values: dict[str, list[float]] = {}
    for record in sorted(records, key=lambda r: r["seed"]):
        value = record["baseline_test"] if record.get("constraint_violated") else record["test_metric"]
        if value is not None:
            values.setdefault(record["task"], []).append(value)
    return values


def measure(parts: list[str], selection: str, seeds: int, short_steps: int, long_steps: int,
            variants: list[str], workers: int) -> dict[str, dict]:
    """task -> {"kernel": {variant: test}, "seeds": [test...], "long": test, "better": test, "better_val": val}."""
    measured: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="fmlbench-signal-") as tmp:
        root = Path(tmp)
        if "kernel" in parts:
            for name in variants:
                print(f"kernel: variant {name} ...", flush=True)
                for task, (_, test) in run_variant(name, selection, root / "kernel").items():
                    measured.setdefault(task, {}).setdefault("kernel", {})[name] = test
        if "seeds" in parts:
            print(f"seeds: random-search, {short_steps} steps x {seeds} seeds ...", flush=True)
            records = run_session(root / "seeds", selection, ["--agent=random-search", f"--steps={short_steps}",
                                                              f"--seeds={seeds}"], workers)
            for task, values in scores_by_task(records).items():
                measured.setdefault(task, {})["seeds"] = values
        if "long" in parts:
            print(f"long: random-search, {long_steps} steps ...", flush=True)
            records = run_session(root / "long", selection, ["--agent=random-search", f"--steps={long_steps}"], workers)
            for task, values in scores_by_task(records).items():
                measured.setdefault(task, {})["long"] = values[0]
        if "better" in parts:
            overlay = {p.name: p for p in BETTER_METHODS.iterdir() if p.is_dir()} if BETTER_METHODS.is_dir() else {}
            print(f"better: the hand-written methods of {', '.join(sorted(overlay)) or 'no task'} ...", flush=True)
            if overlay:
                records = run_session(root / "better", selection, ["--agent=baseline", "--steps=1"], workers, overlay)
                for task, values in scores_by_task(records).items():
                    if task in overlay:
                        measured.setdefault(task, {})["better"] = values[0]
                # the method's validation value beside its test value: a method is tuned on validation only
                for record in records:
                    if record["task"] in overlay and record.get("best_val") is not None:
                        measured[record["task"]]["better_val"] = record["best_val"]
                        print(f"better: {record['task']}: val {record['best_val']:.4g}, test {record['test_metric']}",
                              flush=True)
    return measured


def noise_and_headroom(values: dict, baseline: float, higher: bool) -> tuple[float | None, float | None, float | None]:
    """(kernel spread, seed SD, headroom) of the measured test values on one scale; None where unmeasured."""
    kernel = max((abs(v - baseline) for v in values.get("kernel", {}).values()), default=None)
    seed_values = values.get("seeds", [])
    seed_sd = statistics.stdev(seed_values) if len(seed_values) >= 2 else None
    strong = [values[k] for k in ("long", "better") if values.get(k) is not None]
    best = (max(strong) if higher else min(strong)) if strong else None
    return kernel, seed_sd, None if best is None else (best - baseline if higher else baseline - best)


def on_scored_scale(values: dict, transform: str) -> dict:
    """The measured values as NI scores them (metric.transform applied)."""
    def t(x):
        return transform_value(x, transform)
    return {"kernel": {k: t(v) for k, v in values.get("kernel", {}).items()},
            "seeds": [t(v) for v in values.get("seeds", [])], "long": t(values.get("long")),
            "better": t(values.get("better"))}


def signal_row(task: str, values: dict) -> dict:
    """The table's figures for one task, from what was measured (missing parts give None)."""
    spec = load_task(REPO / "task_suites" / task / "task.yaml").spec
    baseline, direction, transform = spec.baseline.test, spec.metric.direction, spec.metric.transform
    kernel_from = "measured"
    if not values.get("kernel"):
        # unmeasured here: the task's declared noise.kernel_spread (what the gate counts), else the spread
        # baseline_spread.py measured when it set the declared tolerance (MARGIN times the farthest value); no
        # tolerance means every variant scored the declared value
        if spec.noise is not None and spec.noise.scale == "scored":
            # declared after the transform: the raw value that far from the baseline on the scored scale
            declared = raw_value(transform_value(baseline, transform) + spec.noise.kernel_spread, transform)
        elif spec.noise is not None:
            declared = baseline + spec.noise.kernel_spread
        else:
            declared = baseline + (spec.baseline.tolerance.test if spec.baseline.tolerance else 0.0) / MARGIN
        values = {**values, "kernel": {"declared": declared}}
        kernel_from = "declared"
    kernel, seed_sd, headroom = noise_and_headroom(values, baseline, direction == "higher")
    # the floor needs both parts: either alone could hide the larger one
    noise = None if kernel is None or seed_sd is None else max(kernel, seed_sd)

    # NI: the same figures on the scored scale, over the normalisation range D
    scored_baseline = transform_value(baseline, transform)
    d = scale(spec.normalization.best, spec.normalization.worst, scored_baseline)
    kernel_s, seed_sd_s, headroom_s = noise_and_headroom(on_scored_scale(values, transform), scored_baseline,
                                                         scored_direction(direction, transform) == "higher")
    noise_s = None if kernel_s is None or seed_sd_s is None else max(kernel_s, seed_sd_s)
    # on the scored scale, as the tables and the gate see the task (the raw scale's ratio where nothing is
    # transformed; a p-value's spread in p says little about -log10 p)
    ratio = None if noise_s is None or headroom_s is None or headroom_s <= 0 else noise_s / headroom_s

    def ni(x: float | None) -> float | None:
        return None if x is None or not d else x / d

    return {"task": task, "baseline": baseline, "kernel_spread": kernel, "kernel_from": kernel_from, "seed_sd": seed_sd,
            "seeds": len(values.get("seeds", [])), "noise_floor": noise, "random_search_long": values.get("long"),
            "better_method": values.get("better"), "headroom": headroom, "noise_floor_ni": ni(noise_s),
            "headroom_ni": ni(headroom_s), "ratio": ratio, "ok": None if ratio is None else ratio <= RATIO_GOAL}


def fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def print_table(rows: list[dict]) -> None:
    print("| task | baseline test | kernel spread | seed SD (RS) | noise floor | RS long | hand-written | headroom "
          "| noise floor NI | headroom NI | ratio | <= 1/5 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        verdict = "-" if r["ok"] is None else ("yes" if r["ok"] else "NO")
        kernel = fmt(r["kernel_spread"]) + ("*" if r["kernel_from"] == "declared" else "")
        print(f"| {r['task']} | {fmt(r['baseline'])} | {kernel} | {fmt(r['seed_sd'])} "
              f"| {fmt(r['noise_floor'])} | {fmt(r['random_search_long'])} | {fmt(r['better_method'])} "
              f"| {fmt(r['headroom'])} | {fmt(r['noise_floor_ni'])} | {fmt(r['headroom_ni'])} | {fmt(r['ratio'], 2)} "
              f"| {verdict} |")
    if any(r["kernel_from"] == "declared" for r in rows):
        print(f"\n* not measured here: the task's declared noise.kernel_spread, or without one its declared test "
              f"tolerance / {MARGIN:g} (the spread baseline_spread.py measured)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="pytest -k expression selecting tasks")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="the kernel spread's CPU variants")
    parser.add_argument("--seeds", type=int, default=5, help="random-search seeds for the seed SD (at least 5)")
    parser.add_argument("--short-steps", type=int, default=10, help="random-search steps for the seed SD")
    parser.add_argument("--long-steps", type=int, default=50, help="random-search steps for the headroom")
    parser.add_argument("--workers", type=int, default=VARIANTS["default"][1],
                        help="xdist workers of the random-search and better-method sessions (each experiment "
                        "has one thread; default: as the default variant, as CI runs)")
    parser.add_argument("--json", type=Path, help="write the measured values here (merged into it if it exists)")
    parser.add_argument("--load", type=Path, help="take the values an earlier --json wrote instead of running")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")

    measured = json.loads(args.load.read_text()) if args.load else {}
    if not args.load:
        measured = measure(parts, args.k, args.seeds, args.short_steps, args.long_steps, args.variants.split(","),
                           args.workers)
        if args.json:
            earlier = json.loads(args.json.read_text()) if args.json.is_file() else {}
            for task, values in measured.items():
                earlier.setdefault(task, {}).update(values)
            measured = earlier
            args.json.write_text(json.dumps(measured, indent=1))
    print_table([signal_row(task, measured[task]) for task in sorted(measured)])


if __name__ == "__main__":
    main()

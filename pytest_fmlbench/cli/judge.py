"""``fmlbench judge RUN_DIR...``: audit recorded runs (cheap signals, and a judge model when given one),
save each audit in its run record, and print the research review and the suspect runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .run_folders import runs_under

DEFAULT_TASKS = Path("task_suites")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="folders holding run records (record.json), e.g. reports/fmlbench/runs")
    parser.add_argument("--judge-model", action="append", default=[], metavar="MODEL",
                        help="a judge model (repeatable: the judges' scores are averaged); without one, only the "
                        "cheap signals run")
    parser.add_argument("--judge-provider", metavar="PROVIDER", help="the judges' provider (default: inferred)")
    parser.add_argument("--judge-base-url", metavar="URL", help="the judges' endpoint (an OpenAI-compatible server)")
    parser.add_argument("--max-cost-usd", type=float, metavar="USD",
                        help="stop judging a run once its judge calls cost more than this")
    parser.add_argument("--price-table", type=Path, metavar="FILE", help="JSON/YAML LLM prices, as in pytest")
    parser.add_argument("--tasks", type=Path, default=None, metavar="DIR",
                        help=f"the task folders, for each task's description and audit limits (default "
                        f"{DEFAULT_TASKS}/ where it exists)")
    parser.add_argument("--width", type=int, default=160, help="table width in characters (default 160)")


def _specs(folder: Path | None, names: set[str]) -> tuple[dict, list[str]]:
    from ..spec import TaskSpecError, load_task

    folder = folder if folder is not None else (DEFAULT_TASKS if DEFAULT_TASKS.is_dir() else None)
    specs, notes = {}, []
    for name in sorted(names):
        path = folder / name / "task.yaml" if folder is not None else None
        if path is None or not path.is_file():
            notes.append(f"task {name}: no task.yaml under {folder or '(no --tasks)'}: judged without its "
                         "description, signals at the record's bounds (pass --tasks DIR)")
            continue
        try:
            specs[name] = load_task(path).spec
        except TaskSpecError as exc:
            notes.append(str(exc))
    return specs, notes


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ..audit.judge import JudgeSpec
    from ..audit.run import JudgeConfig, audit_run
    from ..audit.tables import audit_items
    from ..llm import LLMSettings, LLMSetupError
    from ..reports.text import print_whole
    from ..safe_text import one_line, printable
    from ..scoring.aggregate import Scores

    runs = runs_under(args.run_dirs)
    if runs is None:
        return 2
    judge = None
    if args.judge_model:
        try:
            base = LLMSettings(max_cost_usd=args.max_cost_usd, price_table=args.price_table)
            judge = JudgeConfig(tuple(JudgeSpec(m, args.judge_provider, args.judge_base_url) for m in args.judge_model),
                                base)
            judge.preflight()
        except ValidationError as exc:
            print(f"fmlbench: judge: {exc.errors()[0]['msg']}", file=sys.stderr)
            return 2
        except LLMSetupError as exc:
            print(f"fmlbench: judge: {exc}", file=sys.stderr)
            return 2
    specs, notes = _specs(args.tasks, {record.task for record, _, _ in runs})
    for note in notes:
        print(f"fmlbench: {note}")
    spent, calls, replayed, unknown = 0.0, 0, 0, False
    audited = []
    for record, steps, run_dir in runs:
        audit = audit_run(run_dir, specs.get(record.task), judge, record=record)
        audited.append((record, steps, run_dir))
        # the record's names, and a judge's words, may be an agent's: one line each, spelt out
        name = f"{printable(record.task)}[seed{record.seed}] {printable(record.agent)}/{printable(record.model or '-')}"
        print(f"{name}: {'SUSPECT' if audit.suspect else 'not suspect'}"
              + (f" ({len(audit.reasons)} reason(s))" if audit.suspect else ""))
        for line in audit.errors:
            print(f"  {one_line(line)}")
        for outcome in audit.judges:
            calls, replayed = calls + outcome.usage.calls, replayed + outcome.usage.replayed
            if outcome.usage.new_cost_usd is None:
                unknown = True
            else:
                spent += outcome.usage.new_cost_usd
    scores = Scores.from_runs(audited, encoder=None)
    from rich.console import Console
    import io

    buffer = io.StringIO()
    console = Console(file=buffer, width=args.width, force_terminal=False, color_system=None)
    for item in audit_items(scores.runs):
        print_whole(console, item)
    print(buffer.getvalue(), end="")
    if judge is not None:
        cost = "unknown (a price is unknown)" if unknown else f"${spent:.4f}"
        print(f"judging spent {cost} now; {replayed} of {calls} judge call(s) replayed from the run records")
    print(f"audited {len(audited)} run(s); audits saved in their record.json")
    return 0


COMMAND = ("judge", "audit recorded runs: cheap signals, and a judge model's research and rule reviews",
           add_arguments, run)

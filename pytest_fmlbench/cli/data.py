"""``fmlbench data``: the full profile's artefacts (list, fetch into the cache, write smoke-scale fixtures)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from _pytest.mark.expression import Expression
from rich.console import Console

from ..datacache.artifact import Artifact, human_size
from ..datacache.cache import DataCache, default_root
from ..datacache.download import FetchError
from ..datacache.fetch import fetch_all, unique, write_fixtures
from ..datacache.pins import PinError
from ..spec import TASK_FILE, Task, TaskSpecError, load_task


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "fetch", "fixtures"],
                        help="list: each full-profile task's artefacts and whether they are cached; fetch: download "
                        "and verify them; fixtures: write small stand-ins in their formats for --scale=smoke")
    parser.add_argument("-k", dest="keyword", metavar="EXPR",
                        help="select tasks as pytest's -k does (task ids, domains, markers: privacy, lite, ...)")
    parser.add_argument("--suite", type=Path, default=Path("task_suites"),
                        help="the task suite's folder (default: task_suites)")
    parser.add_argument("--root", type=Path,
                        help="the data cache (default: $FMLBENCH_DATA, else ~/.cache/fmlbench/data)")
    parser.add_argument("--pin-unpublished", action="store_true",
                        help="fetch: also download the artefacts whose publishers give no checksum, and pin the "
                        "SHA-256 and size they arrive with (every later check holds them to it; $FMLBENCH_PINS names "
                        "a file of shared 'name sha256 size' pins, used before any download)")


def full_tasks(suite: Path, keyword: str | None) -> list[Task]:
    if not suite.is_dir():
        raise SystemExit(f"fmlbench data: no task suite at {suite} (pass --suite DIR)")
    try:
        expression = Expression.compile(keyword) if keyword else None
    except SyntaxError as exc:
        raise SystemExit(f"fmlbench data: -k {keyword!r}: {exc}") from None
    tasks = []
    for path in sorted(suite.glob(f"*/full/{TASK_FILE}")):
        try:
            task = load_task(path)
        except TaskSpecError as exc:
            raise SystemExit(f"fmlbench data: {exc}") from None
        spec = task.spec
        words = [spec.id, spec.domain, spec.profile, *spec.markers]
        if expression is None or expression.evaluate(
                lambda name, **_: any(name.lower() in word.lower() for word in words)):
            tasks.append(task)
    if not tasks:
        raise SystemExit(f"fmlbench data: no full-profile task in {suite}" + (f" matches -k {keyword!r}" if keyword else ""))
    return tasks


def run(args: argparse.Namespace) -> int:
    tasks = full_tasks(args.suite, args.keyword)
    root = (args.root or default_root()).absolute()
    console = Console(stderr=False, highlight=False)
    try:
        artifacts: list[Artifact] = unique(a for task in tasks for a in task.spec.data)
    except FetchError as exc:
        raise SystemExit(f"fmlbench data: {exc}") from None
    if args.action == "list":
        full, smoke = DataCache(root, "full"), DataCache(root, "smoke")
        for task in tasks:
            console.print(f"{task.id}: {task.spec.title}", soft_wrap=True, markup=False)
            for artifact in task.spec.data:
                try:
                    state = "cached" if full.check(artifact) is None else "not cached"
                except PinError as exc:
                    raise SystemExit(f"fmlbench data: {exc}") from None
                if artifact.unpublished and full.read_stamp(artifact) is None:
                    state = "not pinned (no checksum is published)"
                fixture = "fixture written" if smoke.check(artifact) is None else "no fixture"
                console.print(f"  {artifact.name:24} {artifact.size_text():>10}  {state}, {fixture}  "
                              f"{artifact.description}", soft_wrap=True, markup=False)
        return 0
    if args.action == "fixtures":
        outcomes = write_fixtures(artifacts, DataCache(root, "smoke"))
    else:
        total = sum(a.size or 0 for a in artifacts)
        console.print(f"fetching {len(artifacts)} artefact(s), {human_size(total)} in files, into {root}", soft_wrap=True,
                      markup=False)
        accept = ["fmlbench", "data", "fetch", *(["-k", args.keyword] if args.keyword else [])]
        if args.suite != Path("task_suites"):
            accept += ["--suite", str(args.suite)]
        accept.append("--pin-unpublished")
        try:
            outcomes = fetch_all(artifacts, DataCache(root, "full"), console, pin_unpublished=args.pin_unpublished,
                                 pin_command=shlex.join(accept))
        except PinError as exc:
            raise SystemExit(f"fmlbench data: {exc}") from None
    failed = [o for o in outcomes if o.action in ("failed", "refused")]
    for outcome in outcomes:
        line = f"{outcome.artifact.name}: {outcome.action}"
        console.print(f"{line}: {outcome.detail}" if outcome.detail else line, markup=False, soft_wrap=True)
    return 1 if failed else 0


COMMAND = ("data", "the full profile's data: list, fetch (into $FMLBENCH_DATA, SHA-256 checked, resumable) or "
           "write smoke-scale fixtures", add_arguments, run)

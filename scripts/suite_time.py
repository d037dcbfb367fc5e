#!/usr/bin/env python3
"""Where the test suite's time goes, from the JUnit XML that `make test` writes (reports/tests.xml).

    scripts/suite_time.py reports/tests.xml [--wall SECONDS] [--slowest 10]

Prints the suite's wall time (when given: CI measures it around `make test`), the test time summed over
the xdist workers, that time per folder and per file of ``tests/``, and the slowest tests. A test's time is
its setup, call and teardown together (pytest's ``junit_duration_report=total``), so a module-scoped
fixture's run is charged to the first test that asked for it. Where the tests recorded their processor time
(the ``cpu_s`` property tests/conftest.py adds), each row also says how much of its time was spent computing
(``busy``: processor time over test time; a Slurm test waiting on the queue is far below 100%), and the tests
that waited longest are listed: on 2 cores, the suite's wall time is bounded below by its processor time / 2.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Timed:
    file: str
    name: str
    seconds: float
    outcome: str
    cpu: float | None = None  # processor time, where the test recorded it


def read_cases(path: str) -> list[Timed]:
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        # classname is the dotted module path plus any class: tests.agents.test_aide_port.TestX
        parts = case.get("classname", "").split(".")
        modules = [p for p in parts if not p[:1].isupper()]
        file = "/".join(modules) + ".py" if modules else "?"
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        cpu = next((float(p.get("value")) for p in case.iter("property") if p.get("name") == "cpu_s"), None)
        cases.append(Timed(file, case.get("name", "?"), float(case.get("time", 0) or 0), outcome, cpu))
    return cases


def folder_of(file: str) -> str:
    """The file's folder; a file directly under the top folder (tests/test_x.py) is a row of its own."""
    parts = PurePosixPath(file).parts
    return "/".join(parts[:-1]) if len(parts) > 2 else file


def minutes(seconds: float) -> str:
    return f"{seconds:8.1f} s {seconds / 60:6.1f} min"


def busy(cases: list[Timed]) -> str:
    """Processor time over test time, for the cases that recorded it; empty where none did."""
    timed = [c for c in cases if c.cpu is not None]
    seconds = sum(c.seconds for c in timed)
    return f"  busy {100 * sum(c.cpu for c in timed) / seconds:4.0f}%" if timed and seconds > 0 else ""


def report(cases: list[Timed], wall: float | None, slowest: int) -> str:
    total = sum(c.seconds for c in cases)
    counts = defaultdict(int)
    for c in cases:
        counts[c.outcome] += 1
    lines = ["suite time"]
    if wall is not None:
        lines.append(f"  wall            {minutes(wall)}")
    lines.append(f"  test time       {minutes(total)}  (summed over workers; {len(cases)} tests: "
                 + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ")")
    recorded = [c for c in cases if c.cpu is not None]
    if recorded:
        lines.append(f"  processor time  {minutes(sum(c.cpu for c in recorded))}  (of the {len(recorded)} tests "
                     "that recorded it, their child processes included)")
    by_folder, by_file = defaultdict(list), defaultdict(list)
    for c in cases:
        by_folder[folder_of(c.file)].append(c)
        by_file[c.file].append(c)

    def seconds_of(group: list[Timed]) -> float:
        return sum(c.seconds for c in group)

    lines.append("per folder (a file directly under tests/ is a row of its own)")
    for folder, group in sorted(by_folder.items(), key=lambda kv: -seconds_of(kv[1])):
        seconds = seconds_of(group)
        lines.append(f"  {minutes(seconds)} {100 * seconds / max(total, 1e-9):5.1f}%  {folder}{busy(group)}")
    lines.append("the ten most costly files")
    for file, group in sorted(by_file.items(), key=lambda kv: -seconds_of(kv[1]))[:10]:
        lines.append(f"  {minutes(seconds_of(group))}  {file}{busy(group)}")
    lines.append(f"the {slowest} slowest tests")
    for c in sorted(cases, key=lambda c: -c.seconds)[:slowest]:
        lines.append(f"  {c.seconds:8.1f} s  {c.file}::{c.name}{busy([c])}")
    if recorded:
        lines.append(f"the {slowest} tests that waited longest (test time less processor time)")
        for c in sorted(recorded, key=lambda c: c.cpu - c.seconds)[:slowest]:
            lines.append(f"  {c.seconds - c.cpu:8.1f} s  {c.file}::{c.name}{busy([c])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml")
    parser.add_argument("--wall", type=float, help="the suite's wall time in seconds, as measured around it")
    parser.add_argument("--slowest", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        cases = read_cases(args.junit_xml)
    except (OSError, ET.ParseError) as exc:
        print(f"suite_time: cannot read {args.junit_xml}: {exc}", file=sys.stderr)
        return 2
    print(report(cases, args.wall, args.slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

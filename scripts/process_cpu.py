#!/usr/bin/env python3
"""Where a command's processor time goes, by kind of process (the suite's child pytests, warm parents, agent
hosts, experiments, ...), sampled from /proc while it runs.

    scripts/process_cpu.py run OUT.json -- make test      # run the command, sample every process meanwhile
    scripts/process_cpu.py show OUT.json [--top 12]       # the processor time per kind, then the costliest ones

The tests' own ``cpu_s`` (reports/tests.xml, scripts/suite_time.py) counts what each test waited for; it
misses what runs outside its process tree (Slurm jobs, daemons) and cannot say which part of a child
pytest's time went to what. This sampler reads every process's user and system time ten times a second and
keeps, per process, the last value seen and the command line it first showed; the machine's busy time
from /proc/stat is kept beside it. A process that lives under 0.1 s is missed, so the kinds add up to a
little less than the machine's busy time. A warm fork takes the name of the script it runs
(``train.py``), so experiments show under their script whether they started warm or cold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
# (kind, pattern on the command line): the first that matches names the process
KINDS = [
    ("agent host", r"agent_host\.child"),
    ("warm parent", r"warm/parent/main\.py"),
    ("xdist worker", r"-c import sys;exec\(eval"),
    ("child pytest", r"-m ?pytest( |$)|-mpytest |pytest_zygote\.py serve"),  # the forks of tests/pytest_zygote.py too
    ("fmlbench command", r"bin/fmlbench|-m pytest_fmlbench\.cli"),
    ("experiment", r"train\.py|run\.py"),
    ("harness command", r"harness/|prepare\.py|evaluate\.py"),
    ("bubblewrap", r"^bwrap|\[bwrap\]"),
    ("slurm", r"slurm|munge|sbatch|scontrol|squeue|sacct|srun"),
    ("browser", r"chrom"),
    ("coding tool", r"node|claude|codex|mini-swe|stand_in_tool"),
    ("other python", r"python"),
]


def kind_of(command: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, command):
            return kind
    return "other"


def _busy_ticks() -> tuple[int, int]:
    values = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return sum(values), values[3] + values[4]  # all, idle + iowait


def sample(stop: list[bool], me: int) -> dict:
    """{pid_start: [command, cpu_s before the command started (0 for a process it started), cpu_s last seen]}
    until stop[0]."""
    seen: dict[str, list] = {}
    first_sweep = True
    while not stop[0]:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            key = f"{pid}_{fields[19]}"
            if key not in seen:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
                except OSError:
                    command = ""
                seen[key] = [command or f"[{stat[stat.find('(') + 1:stat.rfind(')')]}]", cpu if first_sweep else 0.0,
                             cpu]
            seen[key][2] = cpu
        first_sweep = False
        time.sleep(0.1)
    return seen


def run(out: Path, command: list[str]) -> int:
    import threading

    stop, result = [False], {}
    total0, idle0 = _busy_ticks()
    thread = threading.Thread(target=lambda: result.update(sample(stop, os.getpid())), daemon=True)
    thread.start()
    time.sleep(0.2)  # the first sweep, which lists what ran before the command, is over
    started = time.monotonic()
    child = subprocess.Popen(command)
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        code = child.wait()
    stop[0] = True
    thread.join()
    total1, idle1 = _busy_ticks()
    out.write_text(json.dumps({"command": command, "wall_s": time.monotonic() - started, "exit": code,
                               "busy_s": (total1 - total0 - (idle1 - idle0)) / TICKS, "processes": result}))
    return code


def show(path: Path, top: int) -> None:
    data = json.loads(path.read_text())
    by_kind: Counter = Counter()
    count: Counter = Counter()
    costly: dict[str, Counter] = defaultdict(Counter)
    for command, first, last in data["processes"].values():
        kind = kind_of(command)
        spent = last - first  # a process alive before the command started: what it spent meanwhile
        by_kind[kind] += spent
        count[kind] += 1
        costly[kind][re.sub(r"/tmp/\S+", "…", command)[:100]] += spent
    print(f"{' '.join(data['command'])}: {data['wall_s']:.0f} s wall, exit {data['exit']}, the machine busy "
          f"{data['busy_s']:.0f} s of processor time")
    for kind, seconds in by_kind.most_common():
        print(f"  {seconds:8.1f} s  {seconds / 60:5.1f} min  {count[kind]:6d} processes  {kind}")
    for kind, _ in by_kind.most_common(3):
        print(f"the costliest command lines of {kind}:")
        for command, seconds in costly[kind].most_common(top):
            print(f"  {seconds:8.1f} s  {command}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    record = sub.add_parser("run", help="run a command and sample every process meanwhile")
    record.add_argument("out", type=Path)
    record.add_argument("command", nargs=argparse.REMAINDER)
    report = sub.add_parser("show", help="the processor time per kind of process")
    report.add_argument("out", type=Path)
    report.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    if args.action == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run: give the command after --")
        return run(args.out, command)
    show(args.out, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

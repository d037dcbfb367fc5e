"""The --slurm options (in the plugin's one --help group, also settable in pytest.ini / pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .config import DEFAULT_POLL_S, FORWARDED, MIN_POLL_S, SlurmConfig


def add_slurm_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("fmlbench")
    FORWARDED[:] = [opt.dest for opt in group.options if opt.dest]
    group.addoption("--slurm", action="store_true",
                    help="run every selected item as one Slurm job (submitit), all submitted at the start; "
                    "--fmlbench-out must be on a filesystem the nodes share")
    group.addoption("--slurm-partition", metavar="NAME", help="Slurm partition (ini: slurm_partition)")
    group.addoption("--slurm-time", metavar="MIN|[D-]HH:MM:SS",
                    help="time limit per job (ini: slurm_time; default: from the task's expected duration × steps)")
    group.addoption("--slurm-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="any submitit Slurm parameter, repeatable: account, qos, constraint, mem, exclude, "
                    "gres, ... (ini: slurm_opts, one per line)")
    group.addoption("--slurm-detach", action="store_true",
                    help="submit the jobs and exit; the same command later re-attaches and collects them")
    group.addoption("--slurm-poll", metavar="SECONDS",
                    help=f"seconds between two looks at the session's job states (one scheduler query per "
                    f"array; ini: slurm_poll; default {DEFAULT_POLL_S:g}, at least {MIN_POLL_S:g})")
    parser.addini("slurm_partition", "Slurm partition for --slurm")
    parser.addini("slurm_poll", "seconds between two looks at the --slurm session's job states")
    parser.addini("slurm_time", "time limit per Slurm job (minutes or [D-]HH:MM:SS)")
    parser.addini("slurm_opts", "submitit Slurm parameters KEY=VALUE, one per line", type="linelist")


def _minutes(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)", text.strip())
    if m:
        days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
        return max(1, days * 1440 + hours * 60 + minutes + (1 if seconds else 0))
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    raise pytest.UsageError(f"--slurm-time: expected minutes or [D-]HH:MM:SS, got {text!r}")


def _poll_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise pytest.UsageError(f"--slurm-poll: expected seconds, got {text!r}") from None
    if not seconds >= MIN_POLL_S:
        raise pytest.UsageError(f"--slurm-poll: at least {MIN_POLL_S:g} s (the scheduler is shared), got {text!r}")
    return seconds


def _value(text: str) -> object:
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def _parse_opts(pairs: list[str]) -> dict[str, object]:
    from . import cluster

    valid = cluster.submitit_parameters()
    opts: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_").removeprefix("slurm_")
        if not sep or not key:
            raise pytest.UsageError(f"--slurm-opt: expected KEY=VALUE, got {pair!r}")
        if key not in valid:
            raise pytest.UsageError(f"--slurm-opt: unknown Slurm parameter {key!r} (submitit knows: "
                                    f"{', '.join(sorted(valid))})")
        opts[key] = _value(value.strip())
    return opts


def configure(config: pytest.Config, bench) -> None:
    """Validate --slurm (one line per problem, before anything is submitted or written); register the controller."""
    if not config.getoption("slurm"):
        if config.getoption("slurm_detach"):
            raise pytest.UsageError("--slurm-detach needs --slurm")
        return
    if bench is None or hasattr(config, "workerinput"):
        return
    if config.getoption("numprocesses", None):
        raise pytest.UsageError("--slurm runs each item as its own Slurm job: drop -n (xdist workers are not used)")
    time_text = config.getoption("slurm_time") or config.getini("slurm_time") or None
    time_min = _minutes(str(time_text)) if time_text else None
    poll_text = config.getoption("slurm_poll") or config.getini("slurm_poll") or None
    poll_s = _poll_seconds(str(poll_text)) if poll_text else DEFAULT_POLL_S
    opts = _parse_opts([*config.getini("slurm_opts"), *config.getoption("slurm_opt")])
    # a partition given as --slurm-opt partition=NAME is checked like --slurm-partition
    partition = (config.getoption("slurm_partition") or str(opts.pop("partition", ""))
                 or config.getini("slurm_partition") or None)
    from . import cluster  # submitit and asyncio: only once --slurm is given (~0.1 s in every other pytest)

    try:
        partitions = cluster.partitions()
    except cluster.SlurmUnreachable as exc:
        raise pytest.UsageError(f"--slurm: {exc}") from None
    if partition is not None and partition not in partitions:
        raise pytest.UsageError(f"--slurm-partition: no partition {partition!r} on this cluster "
                                f"(it has: {', '.join(partitions) or 'none'})")
    slurm = SlurmConfig(partition=partition, time_min=time_min, opts=opts, detach=config.getoption("slurm_detach"),
                        poll_s=poll_s)
    # the controller (submitit, the runner) loads only when --slurm is given
    from .controller import SlurmController

    config.pluginmanager.register(SlurmController(config, bench, slurm, Path(config.invocation_params.dir)),
                                  "fmlbench-slurm")

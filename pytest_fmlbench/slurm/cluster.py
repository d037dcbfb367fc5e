"""What the controller asks Slurm directly: partitions, job states, cancellation.

Submission, job files, results and requeueing go through submitit. Job states come from
``scontrol show job`` (what slurmctld knows now, also on clusters without accounting, where submitit's
sacct query has no answer) and, for jobs slurmctld has already forgotten, from sacct.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import submitit

# states after which Slurm will not run the job again by itself
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
          "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "PREEMPTED"}
GONE = "GONE"  # slurmctld and accounting know nothing of the job any more
# slurmctld did not answer this time (restarting, overloaded): the job may well be running, so keep waiting
UNREACHABLE = "SLURM-UNREACHABLE"
ACTIVE.add(UNREACHABLE)


class SlurmUnreachable(RuntimeError):
    pass


def submitit_parameters() -> set[str]:
    return set(submitit.SlurmExecutor._valid_parameters())


def _run(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def partitions() -> list[str]:
    """The cluster's partitions; raises SlurmUnreachable when no Slurm controller answers."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        raise SlurmUnreachable("no Slurm here (sbatch/sinfo not on PATH); run from a login node of the cluster")
    try:
        done = _run(["sinfo", "-h", "-o", "%R"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmUnreachable(f"the Slurm controller does not answer (sinfo: {exc})") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SlurmUnreachable(f"the Slurm controller does not answer (sinfo: {reason})")
    return list(dict.fromkeys(line.strip() for line in done.stdout.splitlines() if line.strip()))


def states(job_ids: list[str]) -> dict[str, str]:
    """Job id -> Slurm state (base word, e.g. RUNNING, CANCELLED); GONE for jobs Slurm no longer knows."""
    found: dict[str, str] = {}
    if job_ids:
        try:
            done = _run(["scontrol", "-o", "show", "job"])
        except (OSError, subprocess.TimeoutExpired):
            return dict.fromkeys(job_ids, UNREACHABLE)
        if done.returncode != 0:
            return dict.fromkeys(job_ids, UNREACHABLE)
        for line in done.stdout.splitlines():
            jid = re.search(r"(?:^|\s)JobId=(\S+)", line)
            state = re.search(r"(?:^|\s)JobState=(\S+)", line)
            if jid and state and jid.group(1) in job_ids:
                found[jid.group(1)] = state.group(1)
    for jid in job_ids:
        if jid not in found:
            found[jid] = _accounted_state(jid)
    return found


def _accounted_state(job_id: str) -> str:
    """What accounting (sacct) remembers of a job slurmctld has purged; GONE without accounting."""
    try:
        done = _run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id])
    except (OSError, subprocess.TimeoutExpired):
        return GONE
    words = done.stdout.split()
    return words[0] if done.returncode == 0 and words else GONE


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        try:
            _run(["scancel", *job_ids])
        except (OSError, subprocess.TimeoutExpired):
            pass

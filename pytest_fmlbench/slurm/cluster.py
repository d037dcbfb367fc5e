"""What the controller asks Slurm directly: partitions, job states, node states, release, cancellation.

Submission, job files, results and requeueing go through submitit. Job states come from
``scontrol show job ID``, asked about this session's arrays only (what slurmctld knows now, also on clusters
without accounting, where submitit's sacct query has no answer) and, for jobs slurmctld has already
forgotten, from one sacct query.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, replace

import submitit

# states in which the job is still in Slurm's queue (the others are final); SPECIAL_EXIT: requeued and held
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
          "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "PREEMPTED",
          "SPECIAL_EXIT"}
# queued states in which a job waits to be started
WAITING = {"PENDING", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"}
GONE = "GONE"  # slurmctld and accounting know nothing of the job any more
# slurmctld did not answer this time (restarting, overloaded): the job may well be running, so keep waiting
UNREACHABLE = "SLURM-UNREACHABLE"
ACTIVE.add(UNREACHABLE)


class SlurmUnreachable(RuntimeError):
    pass


def submitit_parameters() -> set[str]:
    return set(submitit.SlurmExecutor._valid_parameters())


def _run(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    # in a session of its own: a terminal's Ctrl-C goes to its whole foreground process group, and only the
    # controller may take it (a scancel killed half-way leaves jobs on the cluster)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, start_new_session=True)


class SlurmExecutor(submitit.SlurmExecutor):
    """submitit's, with sbatch in a session of its own: killed by a terminal's Ctrl-C after its request
    reached Slurm, it would leave a job whose id nobody read. The controller takes that Ctrl-C once the id is
    recorded."""

    def _make_submission_command(self, submission_file_path) -> list[str]:
        command = super()._make_submission_command(submission_file_path)
        return ["setsid", "--wait", *command] if shutil.which("setsid") else command

    def _internal_process_submissions(self, delayed_submissions):
        """Several submissions as one job array (one sbatch, one scheduler request), submitted by this class
        so that its sbatch too runs in a session of its own; one submission as a plain job."""
        if len(delayed_submissions) == 1:
            return super()._internal_process_submissions(delayed_submissions)
        staging = submitit.core.utils.JobPaths.get_first_id_independent_folder(self.folder)
        staging.mkdir(parents=True, exist_ok=True)
        pickles = []
        for delayed in delayed_submissions:
            delayed.set_timeout(self.parameters.get("time", 5), self.max_num_timeout)
            pickles.append(staging / f"{uuid.uuid4().hex}.pkl")
            delayed.dump(pickles[-1])
        array = type(self)(self.folder, self.max_num_timeout, python=self.python)
        array.update_parameters(**self.parameters)
        array.parameters["map_count"] = len(delayed_submissions)
        first = array._submit_command(self._submitit_command_str)
        tasks = list(range(first.num_tasks))
        jobs = [submitit.SlurmJob(folder=self.folder, job_id=f"{first.job_id}_{index}", tasks=tasks)
                for index in range(len(delayed_submissions))]
        for job, pickle in zip(jobs, pickles):
            job.paths.move_temporary_file(pickle, "submitted_pickle")
        return jobs


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


@dataclass(frozen=True)
class JobInfo:
    """One job as ``scontrol -o show job`` shows it (or, for a purged job, as sacct remembers it)."""

    job_id: str
    state: str
    reason: str = "None"  # Reason=: Slurm's reason code, or its free text with spaces as underscores
    priority: int | None = None  # 0 while the job is held
    restarts: int = 0
    partitions: tuple[str, ...] = ()
    req_nodes: str | None = None  # ReqNodeList= / ExcNodeList=: hostlist expressions
    exc_nodes: str | None = None
    dependency: str | None = None


def _field(line: str, key: str) -> str | None:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", line)
    value = m.group(1) if m else None
    return None if value in (None, "", "(null)") else value


def parse_job_line(line: str) -> JobInfo | None:
    """One line of ``scontrol -o show job``; None for a line that is not a job. A line of array tasks not
    yet started (``ArrayTaskId=2-5``) gives its first task: :func:`parse_job_lines` gives them all."""
    found = _infos(line)
    return found[0] if found else None


def _infos(line: str) -> list[JobInfo]:
    job_id, state = _field(line, "JobId"), _field(line, "JobState")
    if not job_id or not state:
        return []
    priority = _field(line, "Priority")
    restarts = _field(line, "Restarts")
    info = JobInfo(job_id=job_id, state=state, reason=_field(line, "Reason") or "None",
                   priority=int(priority) if priority and priority.isdigit() else None,
                   restarts=int(restarts) if restarts and restarts.isdigit() else 0,
                   partitions=tuple(p for p in (_field(line, "Partition") or "").split(",") if p),
                   req_nodes=_field(line, "ReqNodeList"), exc_nodes=_field(line, "ExcNodeList"),
                   dependency=_field(line, "Dependency"))
    array_id, tasks = _field(line, "ArrayJobId"), _field(line, "ArrayTaskId")
    if not array_id or not tasks:
        return [info]
    # an array's task is known by ARRAY_TASK (as sbatch and submitit name it), not by its own JobId
    return [replace(info, job_id=f"{array_id}_{task}") for task in task_indices(tasks)]


def parse_job_lines(text: str) -> list[JobInfo]:
    return [info for line in text.splitlines() for info in _infos(line)]


def task_indices(expression: str) -> list[int]:
    """Slurm's array task list (``0``, ``2-5%2``, ``1,3,7-9``, ``0-8:2``) as task numbers."""
    indices: list[int] = []
    for part in expression.split("%")[0].split(","):
        bounds, _, step = part.partition(":")
        first, _, last = bounds.partition("-")
        if first.isdigit():
            indices.extend(range(int(first), int(last or first) + 1, int(step) if step.isdigit() else 1))
    return indices


def array_of(job_id: str) -> str:
    """The id Slurm is asked about for a job: an array task's array (``123_4`` -> ``123``)."""
    return job_id.split("_", 1)[0]


def jobs(job_ids: list[str]) -> dict[str, JobInfo]:
    """Job id -> what Slurm says of it now; state GONE for jobs Slurm no longer knows, UNREACHABLE when
    slurmctld does not answer.

    Only these jobs are asked about: one ``scontrol show job ID`` per array (or lone job), never the whole
    queue, which on a shared cluster holds everyone's jobs."""
    found: dict[str, JobInfo] = {}
    wanted = set(job_ids)
    unknown: list[str] = []
    for array in dict.fromkeys(array_of(jid) for jid in job_ids):
        members = [jid for jid in job_ids if array_of(jid) == array]
        try:
            done = _run(["scontrol", "-o", "show", "job", array])
        except (OSError, subprocess.TimeoutExpired):
            found.update({jid: JobInfo(jid, UNREACHABLE) for jid in members})
            continue
        if done.returncode != 0:
            if "invalid job id" in done.stderr.lower():  # slurmctld has forgotten it
                unknown += members
            else:
                found.update({jid: JobInfo(jid, UNREACHABLE) for jid in members})
            continue
        for info in parse_job_lines(done.stdout):
            if info.job_id in wanted:
                found[info.job_id] = info
        unknown += [jid for jid in members if jid not in found]
    found.update({jid: JobInfo(jid, state) for jid, state in _accounted_states(unknown).items()})
    return found


def states(job_ids: list[str]) -> dict[str, str]:
    """Job id -> Slurm state (base word, e.g. RUNNING, CANCELLED); GONE for jobs Slurm no longer knows."""
    return {jid: info.state for jid, info in jobs(job_ids).items()}


def _accounted_states(job_ids: list[str]) -> dict[str, str]:
    """What accounting (sacct, one query for them all) remembers of jobs slurmctld has purged; GONE without
    accounting."""
    if not job_ids:
        return {}
    remembered: dict[str, str] = {}
    try:
        done = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)])
        if done.returncode == 0:
            for line in done.stdout.splitlines():
                jid, _, state = line.partition("|")
                if state.split():
                    remembered[jid.strip()] = state.split()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {jid: remembered.get(jid, GONE) for jid in job_ids}


def max_array_size() -> int:
    """How many tasks one array may hold here (MaxArraySize; task numbers run below it); 1 where arrays are off."""
    try:
        done = _run(["scontrol", "show", "config"])
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_MAX_ARRAY_SIZE
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout, re.M) if done.returncode == 0 else None
    return max(1, int(m.group(1))) if m else DEFAULT_MAX_ARRAY_SIZE


DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default


def release(job_id: str) -> bool:
    """``scontrol release``: True when Slurm took it."""
    try:
        return _run(["scontrol", "release", job_id]).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        try:
            _run(["scancel", *job_ids])
        except (OSError, subprocess.TimeoutExpired):
            pass


# ---- nodes: can any node of a job's partition run it?

@dataclass(frozen=True)
class Node:
    name: str
    state: str  # sinfo's long form: idle, mixed, allocated, drained, draining, down*, idle~, ...
    reason: str = ""  # why an admin or Slurm took it out (sinfo %E), e.g. "Prolog error"

    @property
    def usable(self) -> bool:
        """Whether Slurm would start a new job on it (now, or once its running jobs end)."""
        if self.state.endswith("*"):  # not responding
            return False
        words = set(self.state.rstrip("~#!%$@^-+*").split("+"))
        return not words & NODE_UNUSABLE


# sinfo's node states in which no new job starts there until an admin (or a returning slurmd) changes them
NODE_UNUSABLE = {"down", "drain", "drained", "draining", "fail", "failing", "future", "inval", "unknown",
                 "not_responding", "no_respond", "powering_down", "power_down"}


def nodes() -> dict[str, list[Node]] | None:
    """Partition -> its nodes with their states (hidden partitions included); None when sinfo does not answer."""
    try:
        done = _run(["sinfo", "-a", "-h", "-N", "-o", "%N|%R|%T|%E"])
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    found: dict[str, list[Node]] = {}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[0]:
            reason = "" if parts[3].strip() in ("none", "(null)") else parts[3].strip()
            found.setdefault(parts[1], []).append(Node(parts[0], parts[2].strip(), reason))
    return found


def hostnames(expression: str) -> set[str]:
    """A hostlist expression (``node[01-04],gpu1``) as names."""
    if not re.search(r"[\[\]]", expression):
        return {name for name in expression.split(",") if name}
    try:
        done = _run(["scontrol", "show", "hostnames", expression])
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(done.stdout.split()) if done.returncode == 0 else set()


# ---- jobs that will not run by itself
# Reason codes from Slurm's job reason codes (https://slurm.schedmd.com/job_reason_codes.html) and the
# free-text reasons slurmctld sets itself (src/slurmctld/job_mgr.c: a failed launch, a failed user
# environment, too many launch failures: "... requeued held", priority 0). scontrol prints a free-text
# reason with its spaces as underscores.

SLURM_HELD = "held by Slurm"  # Slurm held it after a failed launch: released once when a node can run it
HELD = "held"  # an admin or the user held it (scontrol hold/uhold/requeuehold, sbatch --hold)
NEVER = "never"  # its request can never be met as it stands (a dependency that failed, a limit it exceeds)
NO_NODE = "no node"  # nothing in its partition can run it (nodes down or drained, partition down)

PERSON_HELD = {"JobHeldAdmin": "held by an admin", "JobHeldUser": "held by its user",
               "job_requeued_in_held_state": "requeued and held (scontrol requeuehold)",
               "job_requeued_in_special_exit_state": "requeued and held after a special exit",
               "ReservationDeleted": "held: its reservation was deleted"}
NEVER_REASONS = {
    "DependencyNeverSatisfied": "its dependency can never be satisfied",
    "BadConstraints": "its constraints cannot be satisfied",
    "PartitionConfig": "its request does not fit the partition's configuration",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows",
    "PartitionTimeLimit": "its time limit is over the partition's (--slurm-time)",
    "InvalidAccount": "its account is invalid",
    "InvalidQOS": "its QOS is invalid",
    "AccountNotAllowed": "its account may not use the partition",
    "QOSNotAllowed": "its QOS may not use the partition",
    "MaxMemPerLimit": "its memory request is over the partition's limit",
}
# a per-job or per-node limit of the QOS or association that the request itself exceeds (not a usage limit
# that clears as other jobs end), e.g. QOSMaxWallDurationPerJobLimit, AssocMaxCpuPerNode, QOSMinGRES
PER_JOB_LIMIT = re.compile(r"(?:QOS|Assoc)Max\w*Per(?:Job|Node)(?:Limit)?|QOSMin\w+")
PARTITION_DOWN = {"PartitionDown": "its partition is down", "PartitionInactive": "its partition is inactive"}


@dataclass(frozen=True)
class Stuck:
    """Why a queued job will not run by itself."""

    kind: str  # SLURM_HELD, HELD, NEVER or NO_NODE
    why: str  # in words, for the one line
    node_usable: bool | None = None  # whether a node of its partition can run it (None: not looked at)
    nodes: str = ""  # the unusable nodes, e.g. "vm: drained, Prolog error"


def stuck(info: JobInfo, partition_nodes: dict[str, list[Node]] | None,
          names=hostnames) -> Stuck | None:
    """Whether a queued job is in a state in which Slurm will not run it by itself, and why; None if it will.

    ``partition_nodes`` is :func:`nodes`' answer (None: not known, node states are then not judged).
    """
    if info.state not in WAITING:
        return None
    reason = info.reason
    usable, unusable = _node_check(info, partition_nodes, names)
    if reason.endswith("requeued_held") or reason == "JobHoldMaxRequeue":
        why = ("held by Slurm after too many failed launches" if "limit" in reason or reason == "JobHoldMaxRequeue"
               else "held by Slurm after a failed launch")
        return Stuck(SLURM_HELD, why, usable, unusable)
    if reason in PERSON_HELD:
        return Stuck(HELD, PERSON_HELD[reason])
    if info.priority == 0 or info.state != "PENDING":
        return Stuck(HELD, "held (priority 0)")
    if reason in NEVER_REASONS:
        return Stuck(NEVER, NEVER_REASONS[reason])
    if PER_JOB_LIMIT.fullmatch(reason):
        return Stuck(NEVER, "its request exceeds a per-job limit of its QOS or association")
    if reason in PARTITION_DOWN:
        return Stuck(NO_NODE, PARTITION_DOWN[reason])
    if usable is False:
        where = ",".join(info.partitions) or "its partition"
        return Stuck(NO_NODE, f"no node of partition {where} can run it", False, unusable)
    return None


def _node_check(info: JobInfo, partition_nodes: dict[str, list[Node]] | None, names) -> tuple[bool | None, str]:
    """(whether one node the job may use can run it, the unusable ones in words); (None, "") when unknown."""
    if not partition_nodes or not info.partitions:
        return None, ""
    candidates = {n.name: n for p in info.partitions for n in partition_nodes.get(p, [])}
    if info.req_nodes:
        wanted = names(info.req_nodes)
        candidates = {k: v for k, v in candidates.items() if k in wanted}
    if info.exc_nodes:
        excluded = names(info.exc_nodes)
        candidates = {k: v for k, v in candidates.items() if k not in excluded}
    if not candidates:
        return None, ""
    unusable = [n for n in candidates.values() if not n.usable]
    words = "; ".join(f"{n.name}: {n.state}" + (f", {n.reason}" if n.reason else "") for n in unusable[:3])
    if len(unusable) > 3:
        words += f"; {len(unusable) - 3} more"
    return len(unusable) < len(candidates), words

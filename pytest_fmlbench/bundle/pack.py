"""``fmlbench bundle``: one saved session, everything a second party needs to check it, nothing secret.

What enters (each file hashed in ``MANIFEST.json``): the saved session file; the author's session summary
(options, hardware, tables) where it is this session's; per run its record (with the audit and the data
identities), steps, every snapshot (baseline, steps, so the best and final code), logs, LLM transcripts, the
evaluator's verdicts and the final test workspace's code; the tasks' versions, fingerprints and
protected-file hashes; the environment (Python, platform, this machine's hardware, every installed
distribution's version); and the tables re-scored at bundling (``tables.json``).

What never enters, and the manifest says so: the evaluator's private folders (the hidden split's labels,
the seed that draws it), the splits' raw inputs and predictions (``out/``, ``evidence/``: the hidden test
inputs among them), task data (named by SHA-256 instead), the search workspace's last state (its code is
in the snapshots), and every secret: the values of the environment variables that the harness keeps from
experiments (keys, tokens) and any text shaped like a provider key are masked in every file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ..compare.sessions import SavedSession, load, resolve
from ..compare.sessions import saved as saved_sessions
from ..integrity import sha256_file
from ..executor import scrubbed_env
from ..integrity import Manifest
from ..llm.redact import MASK, redact
from ..record import RecordUnreadable, RunStore
from ..spec import Task, TaskSpecError, load_task
from . import FORMAT, FORMAT_VERSION, MANIFEST, SIGNATURE, SIGNATURE_NAMESPACE, BundleError
from .archive import writer
from .tables import rescored_tables, score_difference

# what of a run folder is left out, and why (everything else enters, secrets masked)
LEFT_OUT_REASONS = {
    "private": "the evaluator's private data (the hidden split's labels, the seed that draws it): never published, "
               "a later run would see the answers",
    "outputs": "the splits' raw inputs and predictions (the hidden test inputs among them); the verdicts are bundled",
    "search workspace": "the search workspace's last state: each step's code is in snapshots/",
    "data": "task data: named by its SHA-256 here and by the record's data identities",
    "summary": "the session summary (options, hardware, the author's tables): the output folder's is a later "
               "session's, or none; the options are in session.json's args, this machine's hardware in "
               "environment.json",
    "lock": "a lock file",
    "other": "not a part of a run that a check reads",
}
# a final-workspace file this large is data, not code
CODE_MAX_BYTES = 1 << 20
NEVER = [
    "API keys, tokens and other secrets: the values of the environment variables the harness keeps from "
    "experiments, and any text shaped like a provider key, are masked as " + MASK + " in every file",
    "the hidden split: its labels, its inputs and the seed that draws it (private/, out/, evidence/ folders)",
    "task data: SHA-256 and size only (left_out below, and each full-profile record's data identities)",
    "the environment's variables (only package versions and the hardware are recorded)",
]
SUMMARY_WINDOW_S = 300


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """The values of the variables the harness removes from an experiment's environment (keys, tokens)."""
    environ = dict(os.environ if environ is None else environ)
    kept = scrubbed_env(base=environ)
    return [value for name, value in environ.items() if name not in kept and len(value) >= 6]


def find_session(ref: str, out_dir: Path) -> Path:
    path = Path(ref)
    if path.is_file():
        return path
    try:
        return resolve(ref, out_dir / "sessions")
    except Exception as exc:
        raise BundleError(str(exc)) from None


def _classify(rel: str, size: int) -> str | None:
    """None when a run folder's file enters the bundle, else the key of the reason it is left out."""
    parts = rel.split("/")
    if parts[-1] == ".lock" or parts[-1].endswith(".tmp"):
        return "lock"
    # the run folder's own files are the harness's: the record, steps, LLM and judge transcripts
    if len(parts) == 1 or parts[0] in ("snapshots", "logs"):
        return None
    if len(parts) > 1 and parts[1] == "private":
        return "private"
    if len(parts) > 1 and parts[1] in ("out", "evidence"):
        return "outputs"
    if rel.startswith("search/workspace/"):
        return "search workspace"
    if rel.startswith(("final/verdicts/", "search/verdicts/")):
        return None
    if rel.startswith("final/workspace/"):
        inner = parts[2:]
        if "data" in inner[:-1] or "__pycache__" in inner or size > CODE_MAX_BYTES:
            return "data"
        return None
    return "other"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()


def task_sources(roots: list[Path], wanted: set[str]) -> dict[str, Task]:
    """The tasks of the wanted ids found under the given folders (``<id>/task.yaml``, a full profile's
    ``<small id>/full/task.yaml``, or a root that is itself the task's folder), the first found of each."""
    found: dict[str, Task] = {}
    # absolute: the task's commands run from other folders (its workspace, the sandbox)
    for root in (Path(root).resolve() for root in roots):
        for task_id in sorted(wanted - set(found)):
            small = task_id.removesuffix("_full")
            for task_yaml in (root / task_id / "task.yaml", root / small / "full" / "task.yaml", root / "task.yaml"):
                if not task_yaml.is_file():
                    continue
                try:
                    task = load_task(task_yaml)
                except TaskSpecError:
                    continue
                if task.id == task_id:
                    found[task_id] = task
                    break
    return found


def default_task_roots(extra: list[Path] | None = None) -> list[Path]:
    """Where tasks are looked up: the folders given, ./task_suites, and the task_suites beside this package."""
    here = Path(__file__).resolve().parent.parent.parent / "task_suites"
    return [*(extra or []), Path("task_suites"), here]


def protected_hashes(task: Task) -> dict[str, str]:
    """SHA-256 of each protected file of the task's source (workspace and harness), by label."""
    spec = task.spec
    return Manifest.take(task.workspace_dir, spec.protected, task.harness_dir, spec.editable).hashes


def _tasks_entry(records: list[Any], session_roots: list[Path], task_roots: list[Path]) -> dict[str, Any]:
    """Per task: its version and fingerprint as recorded, and where the task's source at that fingerprint was
    found at bundling, its protected-file hashes (the final workspaces are checked against them)."""
    by_id: dict[str, dict[str, Any]] = {}
    candidates = task_sources(session_roots + task_roots, {record.task for record in records})
    for record in records:
        entry = by_id.setdefault(record.task, {"version": record.task_version, "fingerprints": {}})
        fingerprint = record.task_fingerprint
        if fingerprint in entry["fingerprints"]:
            continue
        task = candidates.get(record.task)
        if task is not None and task.fingerprint == fingerprint:
            entry["fingerprints"][fingerprint] = {"source_found": True, "protected": protected_hashes(task),
                                                  "editable": list(task.spec.editable),
                                                  "protected_globs": list(task.spec.protected)}
        else:
            entry["fingerprints"][fingerprint] = {"source_found": False, "protected": {}, "editable": [],
                                                  "protected_globs": []}
    return by_id


def environment() -> dict[str, Any]:
    """Where the bundle was made: Python, the platform, the hardware, every installed distribution's version
    (the environment's lock, as `pip freeze` would list it)."""
    from ..reports.disclosure import hardware

    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            packages.setdefault(name, dist.version)
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "hardware": hardware().model_dump(mode="json"),
            "packages": dict(sorted(packages.items(), key=lambda item: item[0].lower()))}


def _author_summary(session: SavedSession, session_path: Path, out_dir: Path) -> bytes | None:
    """The session summary the session wrote, when the one in the output folder is still this session's: every
    session in the folder rewrites it, so only the last saved session's can be, and only if written as it ended."""
    files = saved_sessions(session_path.parent)
    if not files or files[-1].resolve() != session_path.resolve():
        return None
    path = out_dir / "reports" / "session.json"
    try:
        data = json.loads(path.read_text())
        written = datetime.fromisoformat(data["generated_at"].replace("Z", "+00:00"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    close = abs((written - session.created_at).total_seconds()) <= SUMMARY_WINDOW_S
    return path.read_bytes() if close and data.get("runs") == len(session.runs) else None


def _run_name(run_dir: str) -> str:
    """A run's folder in the bundle: runs/<task>/<run folder>."""
    parts = Path(run_dir).parts
    return "runs/" + "/".join(parts[-2:])


def bundle(session_ref: str, output: Path, *, out_dir: Path, task_roots: list[Path] | None = None,
           progress: Callable[[int, int, str], None] | None = None,
           environ: dict[str, str] | None = None, sign_key: Path | None = None) -> dict[str, Any]:
    """Write the bundle of one saved session to ``output``; returns its manifest. With ``sign_key`` (an SSH
    private key), the manifest is signed with ``ssh-keygen -Y sign`` beside it."""
    session_path = find_session(session_ref, out_dir)
    try:
        session = load(session_path)
    except Exception as exc:
        raise BundleError(str(exc)) from None
    out_dir = session_path.resolve().parent.parent
    secrets = secret_values(environ)
    runs: list[tuple[str, Path]] = []
    for saved in session.runs:
        run_dir = Path(saved.run_dir) if Path(saved.run_dir).is_absolute() else out_dir / saved.run_dir
        if not RunStore(run_dir).exists():
            raise BundleError(f"{session_path.name}: run {saved.run_dir} has no record.json in {run_dir}")
        runs.append((_run_name(saved.run_dir), run_dir))
    if len({name for name, _ in runs}) != len(runs):
        raise BundleError(f"{session_path.name}: two runs share a folder name")

    # the files of each run, classified before anything is written, so the progress bar knows the total
    entering: list[tuple[str, Path]] = []
    left_out: list[dict[str, Any]] = []
    for name, run_dir in runs:
        for path in sorted(p for p in run_dir.rglob("*") if p.is_file() or p.is_symlink()):
            rel = path.relative_to(run_dir).as_posix()
            if path.is_symlink():
                left_out.append({"path": f"{name}/{rel}", "why": "a link, never followed"})
                continue
            reason = _classify(rel, path.stat().st_size)
            if reason is None:
                entering.append((f"{name}/{rel}", path))
            elif reason != "lock":
                entry = {"path": f"{name}/{rel}", "why": reason}
                if reason == "data":  # its identity, for the protected-file checks
                    entry["sha256"], entry["size"] = sha256_file(path), path.stat().st_size
                left_out.append(entry)

    try:
        records = [RunStore(run_dir).load() for _, run_dir in runs]
        for saved, (name, run_dir), record in zip(session.runs, runs, records):
            found = score_difference(saved.scores, record, RunStore(run_dir).load_steps())
            if found:
                raise BundleError(f"{session.name}: run {saved.run_dir} no longer gives the scores this session "
                                  f"saved ({found[0]}: {found[1]!r}, now {found[2]!r}): a later session rewrote it "
                                  "(--fresh); bundle that session instead")
    except RecordUnreadable as exc:
        raise BundleError(str(exc)) from None
    session_roots = sorted({out_dir.parent.parent, out_dir.parent, Path.cwd()})
    top: dict[str, bytes] = {
        "session.json": session_path.read_bytes(),
        "environment.json": _json(environment()),
        "tasks.json": _json(_tasks_entry(records, session_roots, default_task_roots(task_roots))),
        "tables.json": _json(rescored_tables([run_dir for _, run_dir in runs])),
    }
    author = _author_summary(session, session_path, out_dir)
    if author is not None:
        top["summary.json"] = author
    else:
        left_out.append({"path": "summary.json", "why": "summary"})
    top["bundle.json"] = _json({
        "format": FORMAT, "format_version": FORMAT_VERSION, "session": session.name,
        "created_at": datetime.now(timezone.utc).isoformat(), "runs": {name: record.run_id for (name, _), record
                                                                      in zip(runs, records)},
        "tables_note": "tables.json: re-scored from the bundled records with exploration metrics off (they need "
                       "an encoder's weights); summary.json, where present, holds the author's own tables"})

    files: dict[str, str] = {}
    redacted: list[str] = []
    total = len(top) + len(entering)
    with writer(output) as tar:
        done = 0
        # one file in memory at a time: a large session streams through
        for name, data in itertools.chain(top.items(), ((name, path.read_bytes()) for name, path in entering)):
            data, changed = _masked(data, secrets)
            if changed:
                redacted.append(name)
            tar.add(name, data)
            files[name] = _sha256(data)
            done += 1
            if progress is not None:
                progress(done, total, name)
        manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "files": dict(sorted(files.items())),
                    "never_included": NEVER, "left_out_reasons": LEFT_OUT_REASONS,
                    "left_out": left_out, "redacted": redacted}
        manifest_bytes = _json(manifest)
        tar.add(MANIFEST, manifest_bytes)
        if sign_key is not None:
            tar.add(SIGNATURE, sign(manifest_bytes, sign_key))
    return manifest


def sign(data: bytes, key: Path) -> bytes:
    """An SSH signature of ``data`` (``ssh-keygen -Y sign``, namespace fmlbench-bundle) with the user's key."""
    with tempfile.TemporaryDirectory(prefix="fmlbench-sign-") as scratch:
        message = Path(scratch) / MANIFEST
        message.write_bytes(data)
        try:
            done = subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", SIGNATURE_NAMESPACE,
                                   str(message)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BundleError(f"cannot sign with ssh-keygen: {exc}") from None
        signature = message.with_name(MANIFEST + ".sig")
        if done.returncode != 0 or not signature.is_file():
            why = (done.stderr.strip().splitlines() or ["no signature written"])[-1]
            raise BundleError(f"ssh-keygen -Y sign with {key} failed: {why}")
        return signature.read_bytes()


def _masked(data: bytes, secrets: list[str]) -> tuple[bytes, bool]:
    """The file with every secret masked: the known values everywhere, and in text whatever is shaped like a
    provider key (the project's own redaction)."""
    cleaned = data
    for secret in sorted(secrets, key=len, reverse=True):
        cleaned = cleaned.replace(secret.encode("utf-8", "surrogatepass"), MASK.encode())
    try:
        text = cleaned.decode("utf-8")
    except UnicodeDecodeError:
        return cleaned, cleaned != data
    cleaned = redact(text).encode("utf-8")
    return cleaned, cleaned != data

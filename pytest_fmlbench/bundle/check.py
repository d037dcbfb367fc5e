"""``fmlbench verify``: a bundle checked offline, in the order a reviewer would trust it.

1. every file's SHA-256 against ``MANIFEST.json``, and no file missing or unlisted;
2. each run's integrity chain: every step's snapshot against the hash its step names, the best step against
   the record's best value, the final workspace's code against the snapshot the record names, the record's
   test value against the evaluator's verdict, the final workspace's protected files against the task's;
3. the tables re-scored from the records against ``tables.json``, the session file's scores and the author's
   summary, to 1e-9.

The first difference ends the check with a :class:`Mismatch` naming its file and field. Along the way each
run's findings are listed: what the sandbox refused, and the logs that show the hidden split was out of reach.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..evalkit import EvalResult
from ..integrity import sha256_file
from ..llm.redact import MASK
from ..record import RecordUnreadable, RunRecord, RunStore, StepRecord, files_sha256
from ..scoring.metrics import EXPLORATION
from . import FORMAT, MANIFEST, SIGNATURE, SIGNATURE_NAMESPACE, BundleError
from .tables import close, first_difference, rescored_tables, score_difference

# a run's folder in a bundle: one task folder, one run folder, no way out of the bundle
RUN_NAME = re.compile(r"^runs/(?!\.\.?/)[^/\\]+/(?!\.\.?$)[^/\\]+$")
# folders of a run the search phase must never have bound into its sandbox
_OUT_OF_REACH = ("private", "verdicts", "evidence", "final")


class Mismatch(Exception):
    """The first thing in a bundle that does not match: a file, a field in it, and how."""

    def __init__(self, file: str, field: str, detail: str):
        self.file, self.field, self.detail = file, field, detail
        super().__init__(f"{file}: {field}: {detail}")


def _read_json(root: Path, name: str) -> Any:
    try:
        return json.loads((root / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Mismatch(name, "(file)", "missing") from None
    except (OSError, ValueError) as exc:
        raise Mismatch(name, "(file)", f"not readable JSON ({str(exc).splitlines()[0][:200]})") from None


def check_manifest(root: Path, names: list[str]) -> dict[str, Any]:
    """Every file present is listed with its hash, and every listed file is present."""
    manifest = _read_json(root, MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
            not isinstance(manifest.get("files"), dict):
        raise Mismatch(MANIFEST, "format", f"not an {FORMAT} manifest")
    listed: dict[str, str] = manifest["files"]
    present = {name for name in names if name not in (MANIFEST, SIGNATURE)}
    for name in sorted(present | set(listed)):
        if name not in listed:
            raise Mismatch(name, "(file)", f"not listed in {MANIFEST} (a file added after bundling)")
        if name not in present:
            raise Mismatch(name, "(file)", f"missing ({MANIFEST} lists it)")
        actual = sha256_file(root / name)
        if actual != listed[name]:
            raise Mismatch(name, "sha256", f"{actual} differs from {MANIFEST}'s {listed[name]}")
    return manifest


class RunCheck:
    """One run's integrity chain, read from its bundled folder; ``findings`` are lines for the reviewer."""

    def __init__(self, root: Path, name: str, tasks: dict[str, Any], manifest: dict[str, Any],
                 local_tasks: dict[str, Any]):
        self.root, self.name, self.dir = root, name, root / name
        self.tasks, self.local_tasks = tasks, local_tasks
        self.redacted = set(manifest.get("redacted", []))
        self.left_out = {entry.get("path"): entry for entry in manifest.get("left_out", []) if isinstance(entry, dict)}
        self.findings: list[str] = []

    def file(self, rel: str) -> str:
        return f"{self.name}/{rel}"

    def masked(self, rel: str) -> bool:
        """Whether the file had a secret masked at bundling (it then differs from what its hash was taken of):
        the manifest says so, and the mask is in it."""
        path = self.dir / rel
        return self.file(rel) in self.redacted and path.is_file() and MASK.encode() in path.read_bytes()

    def inside(self, rel: str, file: str, field: str) -> Path:
        """A path that ``file``'s ``field`` names, refused where it leads out of the run's folder."""
        path = (self.dir / rel).resolve()
        if not path.is_relative_to(self.dir.resolve()):
            raise Mismatch(file, field, f"names {rel!r}, outside the run's folder")
        return path

    def run(self) -> RunRecord:
        store = RunStore(self.dir)
        try:
            record = store.load()
            steps = store.load_steps()
        except RecordUnreadable as exc:
            where = "record.json" if exc.path.name == "record.json" else "steps.jsonl"
            raise Mismatch(self.file(where), f"line {exc.line}" if exc.line else "(file)", exc.reason) from None
        self._snapshots(store, record, steps)
        self._best(record, steps)
        files = self._final_code(store, record, steps)
        self._final_verdict(record)
        self._protected(record, files)
        self._integrity(record)
        self._refusals(record, steps)
        self.findings.append(self._hidden_split(record, steps))
        return record

    def _snapshots(self, store: RunStore, record: RunRecord, steps: list[StepRecord]) -> None:
        named = [("steps.jsonl", f"line {line} (step {step.step}) snapshot_sha256", step)
                 for line, step in enumerate(steps, start=1)]
        if record.baseline_run is not None:
            named.insert(0, ("record.json", "baseline_run.snapshot_sha256", record.baseline_run))
        for source, where, step in named:
            path = self.inside(step.snapshot, self.file(source), where)
            if not path.is_file():
                raise Mismatch(self.file(source), where, f"names {step.snapshot}, which the bundle lacks")
            try:
                files = store.read_snapshot(step.snapshot)
            except (OSError, ValueError):
                raise Mismatch(self.file(step.snapshot), "(file)", "not a readable snapshot") from None
            if files_sha256(files) != step.snapshot_sha256:
                if self.masked(step.snapshot):
                    self.findings.append(f"step {step.step}: its snapshot held a secret, masked at bundling: its "
                                         "hash is not checkable")
                    continue
                raise Mismatch(self.file(step.snapshot), "(code)", f"hashes to {files_sha256(files)[:16]}..., "
                               f"{source} {where} names {step.snapshot_sha256[:16]}...")
        self.findings.append(f"{len(named)} snapshot(s) match the hashes their steps name")

    def _best(self, record: RunRecord, steps: list[StepRecord]) -> None:
        if record.best_step is None:
            return
        best = next((s for s in steps if s.step == record.best_step), None)
        if best is None:
            raise Mismatch(self.file("record.json"), "best_step", f"step {record.best_step} is not in steps.jsonl")
        if not close(best.metric, record.best_val):
            raise Mismatch(self.file("record.json"), "best_val",
                           f"{record.best_val} but step {best.step} measured {best.metric} (steps.jsonl)")

    def _final_code(self, store: RunStore, record: RunRecord, steps: list[StepRecord]) -> dict[str, str] | None:
        """The code the record names for its final test, compared with the final workspace's files."""
        if record.test_metric is None:
            return None
        best = next((s for s in steps if s.step == record.best_step), None)
        if record.test_on_baseline or best is None:
            snapshot, which = record.baseline_snapshot, "the baseline's code"
        else:
            snapshot, which = best.snapshot, f"step {best.step}'s code"
        if not snapshot or not self.inside(snapshot, self.file("record.json"), "baseline_snapshot").is_file():
            raise Mismatch(self.file("record.json"), "best_step", f"names {which}, whose snapshot the bundle lacks")
        files = store.read_snapshot(snapshot)
        for rel, text in sorted(files.items()):
            final = self.inside(f"final/workspace/{rel}", self.file(snapshot), "(code)")
            if not final.is_file():
                raise Mismatch(self.file(f"final/workspace/{rel}"), "(file)", f"missing: the final test's copy of "
                               f"{which} ({snapshot})")
            if final.read_text(encoding="utf-8", errors="surrogateescape") != text:
                if self.masked(f"final/workspace/{rel}"):
                    continue
                raise Mismatch(self.file(f"final/workspace/{rel}"), "(code)",
                               f"differs from {which} ({snapshot}), the code the record's final test names")
        self.findings.append(f"final test ran on {which} ({snapshot}): the final workspace holds it")
        return files

    def _final_verdict(self, record: RunRecord) -> None:
        if record.test_metric is None:
            self.findings.append(f"no test value ({record.test_error or record.status})")
            return
        rel = "final/verdicts/test.json"
        try:
            verdict = EvalResult.model_validate_json((self.dir / rel).read_bytes())
            value = verdict.primary(record.metric_key)
        except FileNotFoundError:
            raise Mismatch(self.file(rel), "(file)", "missing: the evaluator's verdict of the final test") from None
        except (ValueError, KeyError) as exc:
            raise Mismatch(self.file(rel), "(file)", f"not a usable verdict ({str(exc).splitlines()[0][:200]})") \
                from None
        if not close(value, record.test_metric):
            raise Mismatch(self.file("record.json"), "test_metric",
                           f"{record.test_metric!r}, but the final test's verdict ({rel}) says {value!r}")
        metrics = {f"{name}/{key}": v for name, d in verdict.datasets.items() for key, v in d.means.items()}
        found = first_difference(record.test_metrics, metrics)
        if found:
            raise Mismatch(self.file("record.json"), f"test_metrics.{found[0]}",
                           f"{found[1]!r}, but the final test's verdict ({rel}) says {found[2]!r}")
        self.findings.append(f"test {record.metric_key} {record.test_metric:.6g} is the evaluator's verdict ({rel})")

    def _protected(self, record: RunRecord, files: dict[str, str] | None) -> None:
        entry = self.tasks.get(record.task, {}).get("fingerprints", {}).get(record.task_fingerprint)
        if not isinstance(entry, dict) or not isinstance(entry.get("protected", {}), dict):
            raise Mismatch("tasks.json", f"{record.task}.fingerprints",
                           f"lacks {record.task_fingerprint[:12]}..., the fingerprint {self.file('record.json')} names")
        local = self.local_tasks.get(record.task)
        if local is not None and local["fingerprint"] == record.task_fingerprint:
            found = first_difference(entry.get("protected", {}), local["protected"])
            if found:
                raise Mismatch("tasks.json", f"{record.task}.protected.{found[0]}",
                               f"{found[1]}, but the task here at the same fingerprint has {found[2]}")
        if not entry.get("source_found"):
            self.findings.append("protected files: the task's source at this fingerprint was not found at bundling, "
                                 "its protected-file hashes are not checked")
            return
        if files is None:
            return  # no final test: no final workspace to check
        checked = 0
        for label, expected in sorted(entry.get("protected", {}).items()):
            tree, _, rel = label.partition("/")
            if tree != "workspace":
                continue
            name = self.file(f"final/workspace/{rel}")
            path = self.inside(f"final/workspace/{rel}", "tasks.json", f"{record.task}.protected")
            actual = sha256_file(path) if path.is_file() else self.left_out.get(name, {}).get("sha256")
            if actual is None:
                raise Mismatch(name, "(file)", f"missing: protected file {rel} of the final test's workspace")
            if actual != expected:
                raise Mismatch(name, "sha256", f"{actual} differs from the task's protected {rel} ({expected}, "
                               "tasks.json)")
            checked += 1
        self.findings.append(f"{checked} protected workspace file(s) of the final test match the task's "
                             f"(v{record.task_version} {record.task_fingerprint[:8]})")

    def _integrity(self, record: RunRecord) -> None:
        if record.integrity == "ok":
            self.findings.append("integrity: ok (protected files verified after every step and before the test)")
        else:
            self.findings.append("integrity: VIOLATED: " + "; ".join(record.integrity_violations)[:500])

    def _refusals(self, record: RunRecord, steps: list[StepRecord]) -> None:
        refused = [(f"step {s.step}", line) for s in steps for line in s.blocked]
        if record.baseline_run is not None:
            refused = [("baseline", line) for line in record.baseline_run.blocked] + refused
        if not refused:
            self.findings.append("sandbox refused: nothing")
        for where, line in refused:
            self.findings.append(f"sandbox refused ({where}): {line}")

    def _hidden_split(self, record: RunRecord, steps: list[StepRecord]) -> str:
        if record.sandbox != "bwrap":
            how = record.sandbox or "without a recorded sandbox"
            return (f"hidden split: NOT shown out of reach: experiments ran {how}, so nothing kept the private "
                    "folders from them")
        check = "logs/search_sandbox_check.log"
        path = self.dir / check
        if not path.is_file():
            return f"hidden split: NOT shown out of reach: the bundle lacks {check}"
        bound = _bound_paths(path.read_text(encoding="utf-8", errors="replace"))
        if bound is None:
            return f"hidden split: NOT shown out of reach: {check} holds no sandbox command line"
        reached = [p for p in bound if set(Path(p).parts) & set(_OUT_OF_REACH)]
        if reached:
            return f"hidden split: REACHABLE: the search's sandbox bound {reached[0]} ({check})"
        if (self.dir / "search" / "verdicts" / "test.json").exists():
            return "hidden split: REACHED: the search phase holds a test verdict (search/verdicts/test.json)"
        tested = [p.name for p in sorted((self.dir / "logs").glob("step_*.log"))
                  if any("--split test" in line for line in _command_lines(p))]
        if tested:
            return f"hidden split: REACHED: a search step ran the test split (logs/{tested[0]})"
        return (f"hidden split: not reached, by construction: the search ran sandboxed (bwrap) with no private, "
                f"verdict or final folder bound ({check}); its {len(steps)} step(s) ran the val split only "
                "(logs/step_*.log); the test split was prepared for the final test alone (logs/final_prepare_test.log)")


def _command_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if "$ " in line][:20]


def _bound_paths(log: str) -> list[str] | None:
    """The host paths a logged bwrap command line bound into the sandbox (None: no such line)."""
    line = next((line for line in log.splitlines() if line.startswith("$ bwrap ")), None)
    if line is None:
        return None
    try:
        words = shlex.split(line[2:].split(" -- ", 1)[0])
    except ValueError:
        words = line[2:].split()
    bound = []
    for index, word in enumerate(words):
        if word in ("--bind", "--ro-bind", "--bind-try", "--ro-bind-try", "--dev-bind") and index + 1 < len(words):
            bound.append(words[index + 1])
    return bound


def check_tables(root: Path, run_dirs: list[Path], run_names: list[str]) -> None:
    try:
        rescored = rescored_tables(run_dirs)
    except BundleError as exc:
        raise Mismatch("runs", "(records)", f"cannot be re-scored: {exc}") from None
    bundled = _read_json(root, "tables.json")
    # fields only one side has are another version's (a verifier's newer package adds a column): every value
    # both have must agree, and the manifest's hash already holds the file's bytes
    found = first_difference(bundled, rescored, shared_only=True)
    if found:
        raise Mismatch("tables.json", found[0], f"bundled {found[1]!r}, re-scored from the records {found[2]!r}")

    session = _read_json(root, "session.json")
    for index, saved in enumerate(session.get("runs", [])):
        name = "runs/" + "/".join(Path(saved.get("run_dir", "")).parts[-2:])
        if name not in run_names:
            raise Mismatch("session.json", f"runs[{index}].run_dir", f"{saved.get('run_dir')!r} is not in the bundle")
        store = RunStore(root / name)
        found = score_difference(saved.get("scores", {}), store.load(), store.load_steps())
        if found:
            raise Mismatch("session.json", f"runs[{index}].scores.{found[0]}",
                           f"saved {found[1]!r}, re-scored from {name}/record.json {found[2]!r}")

    if (root / "summary.json").is_file():
        author = _read_json(root, "summary.json")
        skip = frozenset({*EXPLORATION, *(f"{name}_sem" for name in EXPLORATION), "encoder"})
        found = first_difference(author.get("tables"), rescored["tables"], "tables", skip, shared_only=True)
        if found:
            raise Mismatch("summary.json", found[0], f"the author's {found[1]!r}, re-scored {found[2]!r}")


def check_signature(root: Path, allowed_signers: Path | None, signer: str | None) -> str:
    """The manifest's SSH signature checked with ``ssh-keygen -Y verify`` against the reviewer's allowed signers
    file; one line saying what was checked."""
    signature = root / SIGNATURE
    if allowed_signers is None:
        return ("signature: present, not checked (give --allowed-signers FILE --signer ID)" if signature.is_file()
                else "signature: none (the bundle is not signed)")
    if not signature.is_file():
        raise Mismatch(SIGNATURE, "(file)", "missing: the bundle is not signed")
    command = ["ssh-keygen", "-Y", "verify", "-f", str(allowed_signers), "-I", signer or "", "-n",
               SIGNATURE_NAMESPACE, "-s", str(signature)]
    try:
        with open(root / MANIFEST, "rb") as message:
            done = subprocess.run(command, stdin=message, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise Mismatch(MANIFEST, "(file)", "missing") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise BundleError(f"cannot run ssh-keygen to check the signature: {exc}") from None
    if done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split())[:300] or f"exit status {done.returncode}"
        raise Mismatch(SIGNATURE, "signature", f"does not verify {MANIFEST} for {signer!r} ({why})")
    return f"signature: good, {MANIFEST} signed by {signer} (ssh-keygen -Y verify)"


def left_out_line(manifest: dict[str, Any]) -> str:
    """What the author's bundle says it left out, counted by reason."""
    counts: dict[str, int] = {}
    for entry in manifest.get("left_out", []):
        why = str(entry.get("why", "?")) if isinstance(entry, dict) else "?"
        counts[why] = counts.get(why, 0) + 1
    parts = ", ".join(f"{why} {count}" for why, count in sorted(counts.items())) or "nothing"
    masked = len(manifest.get("redacted", []))
    return f"left out at bundling (MANIFEST.json's left_out): {parts}; secrets masked in {masked} file(s)"


def verify_folder(root: Path, names: list[str], say: Callable[[str], None], local_tasks: dict[str, Any],
                  allowed_signers: Path | None = None, signer: str | None = None) -> int:
    """Check an extracted bundle; returns the number of runs checked, raises Mismatch at the first difference."""
    say(check_signature(root, allowed_signers, signer))
    manifest = check_manifest(root, names)
    say(left_out_line(manifest))
    info = _read_json(root, "bundle.json")
    tasks = _read_json(root, "tasks.json")
    runs = info.get("runs") if isinstance(info, dict) else None
    if not isinstance(runs, dict) or not all(isinstance(v, str) and RUN_NAME.match(str(k)) for k, v in runs.items()):
        raise Mismatch("bundle.json", "runs", "not a mapping of run folders (runs/<task>/<run>) to run ids")
    if not isinstance(tasks, dict) or not all(isinstance(v, dict) and isinstance(v.get("fingerprints"), dict)
                                              for v in tasks.values()):
        raise Mismatch("tasks.json", "(file)", "not a mapping of tasks to their fingerprints")
    present = sorted({"/".join(name.split("/")[:3]) for name in names if name.startswith("runs/")
                      and name.endswith("/record.json")})
    for name in present:
        if name not in runs:
            raise Mismatch(f"{name}/record.json", "(run)", "a run bundle.json does not list")
    for name, run_id in runs.items():
        check = RunCheck(root, name, tasks, manifest, local_tasks)
        if not (root / name / "record.json").is_file():
            raise Mismatch(f"{name}/record.json", "(file)", "missing (bundle.json lists the run)")
        record = check.run()
        if record.run_id != run_id:
            raise Mismatch(f"{name}/record.json", "run_id", f"{record.run_id!r}, bundle.json names {run_id!r}")
        say(f"run {name[5:]} ({record.task} seed {record.seed}, {record.status})")
        for line in check.findings:
            say(f"  {line}")
    check_tables(root, [root / name for name in runs], list(runs))
    return len(runs)

"""``fmlbench verify results.tar.zst``: a bundle checked offline (hashes, each run's integrity chain, the
tables re-scored from the records to 1e-9); ``--rerun RUN`` runs that run's final test again here. Ends
with one line: ``verified``, or the first file and field that does not match."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, help="a bundle written by fmlbench bundle (or the folder it unpacks to)")
    parser.add_argument("--rerun", metavar="RUN", action="append", default=[],
                        help="also run this run's final test again here (its run id or folder name), on the task "
                             "at its recorded fingerprint, and compare with the recorded value (repeatable)")
    parser.add_argument("--tasks", type=Path, action="append", default=[], metavar="DIR",
                        help="a folder of task folders for --rerun and the protected-file check (default: "
                             "./task_suites and the package's)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="once verified, write the bundled runs' HTML report here (the page the author read; "
                             "exploration metrics off)")
    parser.add_argument("--allowed-signers", type=Path, metavar="FILE",
                        help="an ssh allowed_signers file: the bundle must be signed (fmlbench bundle --sign) by "
                             "--signer's key in it")
    parser.add_argument("--signer", metavar="ID", help="the signer's identity in the allowed signers file")
    parser.add_argument("--no-sandbox", action="store_true", help="--rerun without the sandbox (marks the result)")
    parser.add_argument("--data-root", type=Path, metavar="DIR",
                        help="full-profile data for --rerun (default: $FMLBENCH_DATA or ~/.cache/fmlbench/data)")


def _local_tasks(task_roots: list[Path], wanted: set[str]) -> dict[str, dict]:
    """The tasks here that the bundle names, with their fingerprints and protected-file hashes."""
    from ..bundle.pack import protected_hashes, task_sources

    return {task_id: {"fingerprint": task.fingerprint, "protected": protected_hashes(task)}
            for task_id, task in task_sources(task_roots, wanted).items()}


def run(args: argparse.Namespace) -> int:
    from ..bundle import MANIFEST, SIGNATURE, BundleError
    from ..bundle.archive import extract
    from ..bundle.check import Mismatch, verify_folder
    from ..bundle.pack import default_task_roots
    from ..bundle.rerun import find_run, rerun

    from ..safe_text import printable

    def say(line: str) -> None:
        # a bundle is another party's data: its words (a run's refusals, a forged field) never steer the terminal
        print(printable(line, limit=1000))

    if args.allowed_signers is not None and not args.signer:
        print("fmlbench: --allowed-signers needs --signer ID (whose key in it must have signed the bundle)",
              file=sys.stderr)
        return 2
    task_roots = default_task_roots(args.tasks)
    with tempfile.TemporaryDirectory(prefix="fmlbench-verify-") as scratch:
        try:
            if args.bundle.is_dir():
                root = args.bundle
                links = [p for p in root.rglob("*") if p.is_symlink()]
                if links:
                    raise BundleError(f"{links[0]}: a link in the bundle's folder, refused")
                names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
            else:
                root = Path(scratch)
                names = extract(args.bundle, root)
            try:
                tasks = json.loads((root / "tasks.json").read_text())
            except (OSError, ValueError):
                tasks = {}
            local = _local_tasks(task_roots, set(tasks) if isinstance(tasks, dict) else set())
            count = verify_folder(root, names, say, local, args.allowed_signers, args.signer)
        except (BundleError, Mismatch) as exc:
            say(f"NOT verified: {exc}")
            return 1
        listed = len([name for name in names if name not in (MANIFEST, SIGNATURE)])
        print(f"verified: {listed} files match MANIFEST.json, {count} run(s)' integrity chains hold, "
              "the tables re-score to 1e-9")
        if args.html:
            from ..reports.html import write_html
            from ..reports.runs import find_run_dirs, load_runs

            print(f"wrote {write_html(load_runs(find_run_dirs(root / 'runs')), args.html, encoder=None)}")
        failed = 0
        runs = json.loads((root / "bundle.json").read_text())["runs"]
        for wanted in args.rerun:
            try:
                outcome = rerun(root, find_run(root, runs, wanted), task_roots, sandboxed=not args.no_sandbox,
                                data_root=args.data_root)
            except BundleError as exc:
                say(f"rerun {wanted}: {exc}")
                failed += 1
                continue
            say(outcome.line() + (" [unsandboxed]" if args.no_sandbox else ""))
            failed += not outcome.reproduced
    return 1 if failed else 0


COMMAND = ("verify", "check a bundle offline: hashes, integrity chains, tables re-scored; --rerun a final test",
           add_arguments, run)

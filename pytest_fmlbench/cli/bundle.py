"""``fmlbench bundle SESSION -o results.tar.zst``: one saved session packed for a second party to verify
(``fmlbench verify``): records, steps, snapshots, transcripts, audit, tasks' fingerprints, environment,
re-scored tables and a manifest of SHA-256s; keys, the hidden split and private data never enter it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="a saved session: last, last-N, its number, its name, or its file's path")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                        help="the bundle to write: .tar.zst (zstandard), .tar.gz, .tar.xz or .tar")
    parser.add_argument("--fmlbench-out", type=Path, default=Path("reports/fmlbench"), metavar="DIR",
                        help="the benchmark's output folder holding sessions/ and runs/ (default: reports/fmlbench)")
    parser.add_argument("--tasks", type=Path, action="append", default=[], metavar="DIR",
                        help="a folder of task folders, searched first for the tasks' protected-file hashes "
                             "(default: ./task_suites and the package's)")
    parser.add_argument("--sign", type=Path, metavar="KEY",
                        help="sign the manifest with this SSH private key (ssh-keygen -Y sign, namespace "
                             "fmlbench-bundle); reviewers check it with fmlbench verify --allowed-signers")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..bundle import MANIFEST, BundleError
    from ..bundle.pack import bundle

    console = Console(stderr=True)
    with Progress(TextColumn("bundling"), BarColumn(), MofNCompleteColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("files", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total)

        try:
            manifest = bundle(args.session, args.output, out_dir=args.fmlbench_out, task_roots=args.tasks,
                              progress=progress, sign_key=args.sign)
        except BundleError as exc:
            print(f"fmlbench: {exc}", file=sys.stderr)
            return 2
    left = len(manifest["left_out"])
    print(f"wrote {args.output}: {len(manifest['files'])} files and {MANIFEST} (their SHA-256s); "
          f"{left} file(s) left out as the manifest says (private data, the hidden split, task data)"
          + (f"; secrets masked in {len(manifest['redacted'])} file(s)" if manifest["redacted"] else ""))
    if args.sign:
        print(f"signed {MANIFEST} with {args.sign} (ssh-keygen -Y sign, namespace fmlbench-bundle)")
    print(f"check it anywhere with: fmlbench verify {args.output}")
    return 0


COMMAND = ("bundle", "pack one saved session into a file anyone can verify offline (fmlbench verify)",
           add_arguments, run)

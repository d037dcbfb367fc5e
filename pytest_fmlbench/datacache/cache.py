"""Where artefacts live on disk, and whether what is there is what was recorded.

Layout under the root (``$FMLBENCH_DATA``, default ``~/.cache/fmlbench/data``)::

    <name>/<file name>        a file artefact, complete and verified
    <name>/<file name>.part   an interrupted download (resumed from its end)
    <name>/src/               a git artefact, checked out at its pinned commit (its LFS files in place)
    <name>/lfs/               LFS objects being downloaded (resumed by the next fetch)
    <name>/stamp.json         what was verified: sha256 and size (and the md5 declared), or the commit;
                              for a file with no published checksum, how it was pinned
    derived/                  what a harness computes once from verified artefacts (e.g. image features)
    smoke/<name>/...          the same for --scale=smoke: small stand-ins in the upstream format,
                              written by ``fmlbench data fixtures``, checked against their own stamp
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..integrity import sha256_file
from .artifact import Artifact
from .pins import shared_pins

Scale = Literal["full", "smoke"]
STAMP = "stamp.json"


def default_root() -> Path:
    """``$FMLBENCH_DATA``, else ``$XDG_CACHE_HOME/fmlbench/data``, else ``~/.cache/fmlbench/data``."""
    explicit = os.environ.get("FMLBENCH_DATA")
    if explicit:
        return Path(explicit).expanduser().absolute()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().absolute() / "fmlbench" / "data"


@dataclass(frozen=True)
class DataCache:
    root: Path
    scale: Scale = "full"

    @property
    def base(self) -> Path:
        """The folder the harness's ``{data}`` names: the root, or its ``smoke/`` part."""
        return self.root / "smoke" if self.scale == "smoke" else self.root

    def folder(self, artifact: Artifact) -> Path:
        return self.base / artifact.name

    def path(self, artifact: Artifact) -> Path:
        """The verified file, or the git checkout."""
        if artifact.kind == "git":
            return self.folder(artifact) / "src"
        return self.folder(artifact) / artifact.file_name

    def stamp_path(self, artifact: Artifact) -> Path:
        return self.folder(artifact) / STAMP

    def read_stamp(self, artifact: Artifact) -> dict | None:
        try:
            stamp = json.loads(self.stamp_path(artifact).read_text())
        except (OSError, ValueError):
            return None
        return stamp if isinstance(stamp, dict) else None

    def write_stamp(self, artifact: Artifact, **fields) -> None:
        path = self.stamp_path(artifact)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"name": artifact.name, "kind": artifact.kind, **fields}, indent=2, sort_keys=True))
        tmp.replace(path)

    def expected(self, artifact: Artifact) -> dict:
        """What the bytes must be: the declared checksum, or at smoke scale the fixture's own stamp.

        A file declared by an MD5 or a SHA-256 prefix (none published in full) must keep the SHA-256 and
        size it had when it was fetched and passed that check; :meth:`check` re-checks the declared digest too.
        One whose publishers give no checksum (``checksum: unpublished``) must have the SHA-256 and size of its
        shared pin (``pins``) where there is one, else those recorded when its first fetch pinned it. Raises
        :class:`~.pins.PinError` when the shared pin file is malformed.
        """
        if self.scale == "full":
            if artifact.kind == "git":
                return {"commit": artifact.commit}
            if artifact.sha256 is not None:
                return {"sha256": artifact.sha256, "size": artifact.size}
            shared = shared_pins().get(artifact.name) if artifact.unpublished else None
            if shared is not None:
                # a lab's pin outranks what this machine recorded: both must hold the same bytes
                return {"sha256": shared.sha256, "size": shared.size}
        stamp = self.read_stamp(artifact) or {}
        return {key: stamp.get(key) for key in (("commit",) if artifact.kind == "git" else ("sha256", "size"))}

    def identity(self, artifact: Artifact) -> dict:
        """What a run records of a verified artefact: its SHA-256 and size or its commit, and for one whose
        publishers give no checksum, how it was pinned (a shared pin, or this cache's first fetch)."""
        found = {key: value for key, value in self.expected(artifact).items() if value is not None}
        if self.scale == "full" and artifact.unpublished:
            shared = shared_pins().get(artifact.name)
            found["pinned"] = f"shared pin {shared.origin}" if shared else (self.read_stamp(artifact) or {}).get(
                "pinned", "first fetch")
        return found

    def check(self, artifact: Artifact) -> str | None:
        """None when the artefact is present and intact; else what is wrong, in a few words."""
        stamp = self.read_stamp(artifact)
        path = self.path(artifact)
        if stamp is None or not path.exists():
            return "missing"
        want = self.expected(artifact)
        if artifact.kind == "git":
            head = git_head(path)
            if head != want["commit"]:
                return f"checked out at {head or 'no commit'}, not the pinned {want['commit']}"
            if artifact.lfs:
                from .lfs import problems

                return problems(path)
            if git_dirty(path):
                return "its checkout has local changes"
            return None
        size = path.stat().st_size
        pinned = ""
        if self.scale == "full" and artifact.unpublished:
            shared = shared_pins().get(artifact.name)
            pinned = f", pinned by {shared.origin}" if shared else ", pinned on its first fetch"
        if size != want["size"]:
            return f"corrupt ({size} bytes, expected {want['size']}{pinned})"
        digest = sha256_file(path)
        if digest != want["sha256"]:
            return f"corrupt (sha256 {digest[:12]}..., expected {str(want['sha256'])[:12]}...{pinned})"
        if self.scale == "full" and artifact.sha256 is None:
            wrong = artifact.mismatch(digest, md5_file(path) if artifact.md5 else None)
            if wrong:
                return f"corrupt ({wrong})"
        return None


def md5_file(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def git_head(path: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def git_dirty(path: Path) -> bool:
    done = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                          capture_output=True, text=True)
    return done.returncode != 0 or bool(done.stdout.strip())

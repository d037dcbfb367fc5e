"""Git LFS files of a git artefact: each pointer the pinned commit holds, replaced by the object it names.

A repository that keeps large files in Git LFS (a Hugging Face model or data set repository, for one)
commits a small pointer in place of each such file: its SHA-256 and size (the Git LFS spec, v1). The
commit id covers the pointers, so a pinned commit pins every LFS object's SHA-256 too: the fetch clones
without LFS (``GIT_LFS_SKIP_SMUDGE``; git-lfs need not be installed), then downloads each object, checks it
against its pointer and only then puts it in place of the pointer. Objects come from the repository's
LFS server (the batch API at ``<url>.git/info/lfs``, ``basic`` transfers), or for a ``file://`` source
from the local store git-lfs keeps beside it (``.git/lfs/objects/`` or, bare, ``lfs/objects/``).

A materialised checkout differs from its commit exactly at the LFS paths; :func:`problems` checks those
files against their pointers and the rest with ``git status``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from ..integrity import sha256_file

SPEC = "https://git-lfs.github.com/spec/v1"
MAX_POINTER_BYTES = 1024  # the spec's bound: larger blobs are never pointers
MEDIA_TYPE = "application/vnd.git-lfs+json"
_POINTER = re.compile(rf"version {re.escape(SPEC)}\noid sha256:([0-9a-f]{{64}})\nsize ([0-9]+)\n")


@dataclass(frozen=True)
class Pointer:
    path: str  # inside the checkout, POSIX
    oid: str  # the object's SHA-256
    size: int


def parse_pointer(blob: bytes) -> tuple[str, int] | None:
    """(sha256, size) of a Git LFS pointer; None for any other content."""
    if len(blob) >= MAX_POINTER_BYTES:
        return None
    match = _POINTER.fullmatch(blob.decode("utf-8", "replace"))
    return (match.group(1), int(match.group(2))) if match else None


def pointer_text(oid: str, size: int) -> str:
    """The pointer git-lfs commits for an object of this SHA-256 and size."""
    return f"version {SPEC}\noid sha256:{oid}\nsize {size}\n"


def pointers(checkout: Path, commit: str = "HEAD") -> list[Pointer]:
    """Every LFS pointer the commit holds, read from git's objects (not from the work tree)."""
    listing = subprocess.run(["git", "-C", str(checkout), "ls-tree", "-r", "-z", "-l", commit],
                             capture_output=True, check=True).stdout
    small: list[tuple[str, str]] = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        _, kind, blob, size = meta.split()
        if kind == b"blob" and size != b"-" and int(size) < MAX_POINTER_BYTES:
            small.append((blob.decode(), path.decode()))
    if not small:
        return []
    batch = subprocess.run(["git", "-C", str(checkout), "cat-file", "--batch"], capture_output=True, check=True,
                           input="".join(f"{blob}\n" for blob, _ in small).encode()).stdout
    found, offset = [], 0
    for _, path in small:
        header_end = batch.index(b"\n", offset)
        length = int(batch[offset:header_end].split()[2])
        content = batch[header_end + 1: header_end + 1 + length]
        offset = header_end + 1 + length + 1  # the content is followed by a newline
        parsed = parse_pointer(content)
        if parsed:
            found.append(Pointer(path, *parsed))
    return found


def problems(checkout: Path) -> str | None:
    """None when every LFS file matches its pointer and every other tracked file its commit; else what is wrong."""
    lfs = pointers(checkout)
    for pointer in lfs:
        path = checkout / pointer.path
        if path.is_symlink() or not path.is_file():
            return f"its LFS file {pointer.path} is missing"
        size = path.stat().st_size
        if size != pointer.size:
            return f"its LFS file {pointer.path} is corrupt ({size} bytes, expected {pointer.size})"
        if sha256_file(path) != pointer.oid:
            return f"its LFS file {pointer.path} is corrupt (sha256 is not its pointer's {pointer.oid[:12]}...)"
    excluded = [f":(exclude,literal){pointer.path}" for pointer in lfs]
    done = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no", "--", ".",
                           *excluded], capture_output=True, text=True)
    if done.returncode != 0 or done.stdout.strip():
        return "its checkout has local changes"
    return None


def endpoint(url: str) -> str:
    """The LFS server of a repository's https URL (git-lfs's default: ``<url>.git/info/lfs``)."""
    base = url.rstrip("/")
    return (base if base.endswith(".git") else base + ".git") + "/info/lfs"


def local_object(url: str, oid: str) -> Path:
    """Where git-lfs keeps an object beside a local repository (a work tree's .git/, or a bare repository)."""
    root = Path(url2pathname(urlparse(url).path))
    store = root / ".git" / "lfs" / "objects" if (root / ".git").is_dir() else root / "lfs" / "objects"
    return store / oid[:2] / oid[2:4] / oid


@dataclass(frozen=True)
class Source:
    url: str  # where the object's bytes are
    headers: dict[str, str]


class LfsError(RuntimeError):
    """The LFS server refused or does not know an object."""


def sources(url: str, wanted: list[Pointer], token: str | None) -> dict[str, Source]:
    """Where each object is to be downloaded from, by oid: the batch API's answer, or the local store."""
    if urlparse(url).scheme == "file":
        return {p.oid: Source(local_object(url, p.oid).as_uri(), {}) for p in wanted}
    body = json.dumps({"operation": "download", "transfers": ["basic"],
                       "objects": [{"oid": p.oid, "size": p.size} for p in {p.oid: p for p in wanted}.values()]})
    request = urllib.request.Request(endpoint(url) + "/objects/batch", data=body.encode(), method="POST",
                                     headers={"Accept": MEDIA_TYPE, "Content-Type": MEDIA_TYPE,
                                              "User-Agent": "pytest-fmlbench data fetch"})
    if token:
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise LfsError(f"{endpoint(url)}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LfsError(f"{endpoint(url)}: {getattr(exc, 'reason', exc)}") from None
    found: dict[str, Source] = {}
    for entry in answer.get("objects", []):
        download = (entry.get("actions") or {}).get("download")
        if entry.get("error") or not download or "href" not in download:
            message = (entry.get("error") or {}).get("message", "no download action")
            raise LfsError(f"{endpoint(url)}: object {entry.get('oid')}: {message}")
        found[entry["oid"]] = Source(download["href"], dict(download.get("header") or {}))
    missing = [p.oid for p in wanted if p.oid not in found]
    if missing:
        raise LfsError(f"{endpoint(url)}: the server did not answer for object {missing[0]}")
    return found

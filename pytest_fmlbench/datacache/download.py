"""Fetching one artefact into the cache: resumable, verified before it is kept, atomic.

A file is written to ``<name>.part`` (an interrupted download resumes from its end with an HTTP
Range request, or from the same offset of a ``file://`` source), its size and SHA-256 are checked,
and only then is it renamed into place and stamped. A wrong checksum deletes the partial file and
keeps nothing (the next source, if any, is tried). A git repository is cloned beside its final
place, checked out at the pinned commit, checked, and renamed into place; one declared ``lfs`` has each
Git LFS pointer of that commit replaced by its object, checked against the pointer first (``lfs``).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from . import lfs
from .artifact import Artifact
from .cache import DataCache, git_head

CHUNK = 1 << 20
ATTEMPTS_PER_SOURCE = 3
TIMEOUT_S = 60
USER_AGENT = "pytest-fmlbench data fetch"
# a file shared from Google Drive; its large files need a confirmation step, which gdown takes
GOOGLE_DRIVE_HOSTS = ("drive.google.com", "drive.usercontent.google.com")

# progress(advance_bytes, total_bytes_or_None, restarted) — the caller draws the bar
Progress = Callable[[int, int | None, bool], None]


class FetchError(RuntimeError):
    """An artefact could not be fetched and verified; one line, nothing kept in the cache (but a partial
    download that only lost its connection, which the next fetch resumes)."""

    def __init__(self, message: str, resumable: bool = False):
        super().__init__(message)
        self.resumable = resumable


class _Transient(Exception):
    """A dropped connection or a server error: worth resuming or trying again."""


def token_for(artifact: Artifact) -> str | None:
    if not artifact.gated:
        return None
    token = os.environ.get(artifact.token_env or "")
    if not token:
        raise FetchError(f"{artifact.name} is gated: set {artifact.token_env} to an access token that may read "
                         f"{artifact.urls[0]} and run the command again")
    return token


def fetch_file(artifact: Artifact, cache: DataCache, progress: Progress, **stamp_extra) -> Path:
    folder = cache.folder(artifact)
    folder.mkdir(parents=True, exist_ok=True)
    final = cache.path(artifact)
    part = final.with_name(final.name + ".part")
    token = token_for(artifact)
    problems = []
    for url in artifact.urls:
        try:
            _download(url, part, artifact.size, token, progress)
        except FetchError as exc:
            if not exc.resumable:
                part.unlink(missing_ok=True)
            problems.append(str(exc))
            continue
        digest, md5 = _digests(part, with_md5=artifact.md5 is not None)
        size = part.stat().st_size
        wrong = artifact.mismatch(digest, md5, size)
        if wrong:
            part.unlink(missing_ok=True)
            problems.append(f"{url} gave {wrong} (deleted)")
            continue
        final.unlink(missing_ok=True)
        os.replace(part, final)
        # a file pinned by an MD5 or a SHA-256 prefix is held to the SHA-256 and size it had when it passed
        extra = {"md5": md5} if md5 else {}
        cache.write_stamp(artifact, sha256=digest, size=size, source=url, fetched_at=time.time(), **extra, **stamp_extra)
        return final
    raise FetchError(f"{artifact.name}: not fetched, nothing kept: " + "; ".join(problems))


def _download(url: str, part: Path, size: int | None, token: str | None, progress: Progress,
              headers: dict[str, str] | None = None) -> None:
    """Bring ``part`` to ``size`` bytes from ``url``, resuming; raises FetchError when it cannot. ``headers``
    go with every request (an LFS server's download action may name some)."""
    last = "no attempt"
    for _ in range(ATTEMPTS_PER_SOURCE):
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:
            part.unlink()
            have = 0
        if size is not None and have == size:
            return
        try:
            _copy_from(url, part, have, size, token, progress, headers or {})
        except _Transient as exc:
            last = str(exc)
            continue
        got = part.stat().st_size
        if size is not None and got != size:
            last = f"{got} bytes arrived, expected {size}"
            continue
        return
    raise FetchError(f"{url}: {last}", resumable=True)


def _copy_from(url: str, part: Path, offset: int, size: int | None, token: str | None, progress: Progress,
               headers: dict[str, str]) -> None:
    parsed = urlparse(url)
    if parsed.hostname in GOOGLE_DRIVE_HOSTS:
        _copy_from_drive(url, part, progress)
        return
    if parsed.scheme == "file":
        source = Path(url2pathname(parsed.path))
        try:
            with open(source, "rb") as src, open(part, "ab") as dst:
                src.seek(offset)
                progress(offset, size, True)
                _stream(src.read, dst, progress, size, offset)
        except FileNotFoundError:
            raise FetchError(f"{url}: no such file") from None
        return
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    if token:
        # not passed on across a redirect (a CDN's signed URL needs none, and must not see it)
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset and offset == size:
            return
        if exc.code in (401, 403):
            hint = " (a gated source: is the token allowed to read it?)" if token else ""
            raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}{hint}") from None
        if exc.code >= 500 or exc.code == 429:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise _Transient(f"{getattr(exc, 'reason', exc)}") from None
    with response:
        resumed = offset and response.status == 206
        if offset and not resumed:
            offset = 0  # the server ignored the range: start over
        progress(offset, size, True)
        with open(part, "ab" if resumed else "wb") as dst:
            try:
                _stream(response.read, dst, progress, size, offset)
            except (OSError, http.client.HTTPException) as exc:
                raise _Transient(f"connection lost ({type(exc).__name__})") from None


def _copy_from_drive(url: str, part: Path, progress: Progress) -> None:
    """A Google Drive file, through gdown: a large file is served only after a confirmation page, which gdown
    answers. gdown keeps its own partial file beside ``part`` and resumes it; the whole file then becomes ``part``,
    checked by the caller as any other download."""
    try:
        import gdown
    except ImportError:
        raise FetchError(f"{url}: a Google Drive source needs gdown: pip install 'pytest-fmlbench[tasks]'") from None
    landed = part.with_name(part.name + ".drive")
    try:
        gdown.download(url, output=str(landed), quiet=True, resume=True,
                       progress=lambda done, total: progress(done, total, True))
    except Exception as exc:  # gdown reports an unshared file, a quota or a lost connection in its own kinds
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FetchError(f"{url}: Google Drive: {first}", resumable=True) from None
    if not landed.is_file():
        raise FetchError(f"{url}: Google Drive sent no file")
    os.replace(landed, part)


def _stream(read, dst, progress: Progress, size: int | None, offset: int) -> None:
    written = offset
    while True:
        chunk = read(CHUNK)
        if not chunk:
            return
        written += len(chunk)
        if size is not None and written > size:
            raise FetchError(f"the source sends more than the recorded {size} bytes")
        dst.write(chunk)
        progress(len(chunk), size, False)


def _digests(path: Path, with_md5: bool = False) -> tuple[str, str | None]:
    """The file's SHA-256, and its MD5 when asked, in one read."""
    digest = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False) if with_md5 else None
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
            if md5 is not None:
                md5.update(chunk)
    return digest.hexdigest(), md5.hexdigest() if md5 is not None else None


def fetch_git(artifact: Artifact, cache: DataCache, progress: Progress = lambda *_: None) -> Path:
    folder = cache.folder(artifact)
    folder.mkdir(parents=True, exist_ok=True)
    final = cache.path(artifact)
    tmp = folder / "src.tmp"
    # git-lfs, where installed, would fetch LFS objects unchecked at checkout: they are fetched below
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    problems = []
    for url in artifact.urls:
        shutil.rmtree(tmp, ignore_errors=True)
        steps = (["git", "clone", "--quiet", "--no-checkout", url, str(tmp)],
                 ["git", "-C", str(tmp), "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
                  str(artifact.commit)])
        failed = None
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                failed = (done.stderr.strip().splitlines() or ["no message"])[-1]
                break
        if failed is None and git_head(tmp) != artifact.commit:
            failed = f"HEAD is {git_head(tmp)}, not the pinned {artifact.commit}"
        if failed is None and artifact.lfs:
            failed = _materialise_lfs(artifact, tmp, url, folder / "lfs", progress)
        if failed:
            problems.append(f"{url}: {failed}")
            continue
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        shutil.rmtree(folder / "lfs", ignore_errors=True)
        cache.write_stamp(artifact, commit=artifact.commit, source=url, fetched_at=time.time())
        return final
    shutil.rmtree(tmp, ignore_errors=True)
    raise FetchError(f"{artifact.name}: not fetched, nothing kept: " + "; ".join(problems))


def _materialise_lfs(artifact: Artifact, checkout: Path, url: str, parts: Path, progress: Progress) -> str | None:
    """Each LFS pointer of the checkout replaced by its object, verified against the pointer; None when all
    are in place, else why not. A download that only lost its connection stays in ``parts`` to be resumed."""
    wanted = lfs.pointers(checkout)
    if not wanted:
        return None
    try:
        where = lfs.sources(url, wanted, token_for(artifact))
    except lfs.LfsError as exc:
        return str(exc)
    parts.mkdir(exist_ok=True)
    placed: dict[str, Path] = {}
    for pointer in wanted:
        target = checkout / pointer.path
        if pointer.oid in placed:  # one object behind several paths
            shutil.copyfile(placed[pointer.oid], target)
            continue
        part = parts / f"{pointer.oid}.part"
        source = where[pointer.oid]
        try:
            _download(source.url, part, pointer.size, None, progress, source.headers)
        except FetchError as exc:
            if not exc.resumable:
                part.unlink(missing_ok=True)
            return f"LFS file {pointer.path}: {exc}"
        digest, _ = _digests(part)
        if digest != pointer.oid:
            part.unlink(missing_ok=True)
            return f"LFS file {pointer.path} has sha256 {digest}, expected its pointer's {pointer.oid} (deleted)"
        os.replace(part, target)
        placed[pointer.oid] = target
    return None

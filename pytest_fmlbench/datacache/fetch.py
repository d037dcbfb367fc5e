"""``fmlbench data fetch`` and ``fmlbench data fixtures``: bring the selected tasks' artefacts into the cache."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                           TransferSpeedColumn)

from ..integrity import sha256_file
from .artifact import Artifact
from .cache import DataCache
from .download import FetchError, fetch_file, fetch_git
from .pins import PINS_ENV, Pin, pin_line, shared_pins

FIXTURES_MODULE = "pytest_fmlbench.taskkit.fixtures"


@dataclass(frozen=True)
class Outcome:
    artifact: Artifact
    action: str  # "cached", "fetched", "pinned", "written", "failed", "refused" (unpublished checksum, not accepted)
    detail: str = ""


def unique(artifacts: Iterable[Artifact]) -> list[Artifact]:
    """Each artefact once; two tasks declaring one name differently is an error (the cache has one folder)."""
    seen: dict[str, Artifact] = {}
    for artifact in artifacts:
        other = seen.setdefault(artifact.name, artifact)
        if other.model_dump(exclude={"description", "fixture"}) != artifact.model_dump(exclude={"description", "fixture"}):
            raise FetchError(f"artefact {artifact.name!r} is declared twice with different sources or checksums")
    return list(seen.values())


def fetch_all(artifacts: list[Artifact], cache: DataCache, console: Console, *, pin_unpublished: bool = False,
              pin_command: str = "fmlbench data fetch --pin-unpublished") -> list[Outcome]:
    """Each artefact fetched and verified, or cached already. One whose publishers give no checksum is refused
    (``pin_command`` is the line that accepts it) unless a shared pin fixes its bytes, this cache pinned it
    before, or ``pin_unpublished`` accepts the bytes its first fetch downloads."""
    outcomes = []
    pins = shared_pins()
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bars:
        for artifact in artifacts:
            cache.folder(artifact).mkdir(parents=True, exist_ok=True)
            with FileLock(cache.folder(artifact) / ".lock"):
                if cache.check(artifact) is None:
                    outcomes.append(Outcome(artifact, "cached"))
                    continue
                bar = bars.add_task(artifact.name, total=artifact.size)

                def progress(advance: int, total: int | None, reset: bool, bar=bar) -> None:
                    if reset:
                        bars.update(bar, completed=advance, total=total)
                    else:
                        bars.advance(bar, advance)

                try:
                    if artifact.kind == "git":
                        fetch_git(artifact, cache, progress)
                    elif artifact.unpublished:
                        outcome = _fetch_unpublished(artifact, cache, progress, pins, pin_unpublished, pin_command)
                        if outcome is not None:
                            bars.remove_task(bar)
                            outcomes.append(outcome)
                            continue
                    else:
                        fetch_file(artifact, cache, progress)
                except FetchError as exc:
                    outcomes.append(Outcome(artifact, "failed", str(exc)))
                    continue
                outcomes.append(Outcome(artifact, "fetched"))
    return outcomes


def _fetch_unpublished(artifact: Artifact, cache: DataCache, progress, pins: dict[str, Pin], accept: bool,
                       pin_command: str) -> Outcome | None:
    """Fetch a file whose publishers give no checksum: to its shared pin, to what this cache pinned before, or
    (accepted) pinning what arrives. Returns the outcome where it differs from a plain fetch."""
    shared = pins.get(artifact.name)
    if shared is not None:
        fetch_file(artifact.model_copy(update={"sha256": shared.sha256, "size": shared.size}), cache, progress,
                   pinned=f"shared pin {shared.origin}")
        return None
    recorded = cache.read_stamp(artifact) or {}
    if recorded.get("pinned") and recorded.get("sha256") and recorded.get("size"):
        # pinned here before: a new download must be those bytes again (re-pinning means deleting the folder)
        pinned = artifact.model_copy(update={"sha256": recorded["sha256"], "size": recorded["size"]})
        try:
            fetch_file(pinned, cache, progress, pinned=recorded["pinned"])
        except FetchError as exc:
            raise FetchError(f"{exc} (it was pinned on its first fetch; to pin anew, delete "
                             f"{cache.folder(artifact)} and fetch with --pin-unpublished)") from None
        return None
    if not accept:
        return Outcome(artifact, "refused", f"no checksum is published for it ({artifact.description}); to download "
                       f"it and pin the SHA-256 it has, run `{pin_command}`")
    path = fetch_file(artifact, cache, progress, pinned="first fetch")
    stamp = cache.read_stamp(artifact) or {}
    return Outcome(artifact, "pinned", f"sha256 {stamp.get('sha256')}, {stamp.get('size')} bytes ({path}); to give "
                   f"other machines these bytes, put the line '{pin_line(artifact.name, stamp.get('sha256'), stamp.get('size'))}' "
                   f"in the file {PINS_ENV} names")


def write_fixtures(artifacts: list[Artifact], cache: DataCache) -> list[Outcome]:
    """Small stand-ins in each artefact's upstream format, stamped with their own checksum (--scale=smoke)."""
    assert cache.scale == "smoke"
    generators = importlib.import_module(FIXTURES_MODULE)
    outcomes = []
    for artifact in artifacts:
        make = getattr(generators, artifact.fixture or "", None)
        if make is None:
            outcomes.append(Outcome(artifact, "failed", f"no fixture generator {artifact.fixture!r} in {FIXTURES_MODULE}"))
            continue
        folder = cache.folder(artifact)
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(folder / ".lock"):
            path = cache.path(artifact)
            make(path)
            if artifact.kind == "git":
                from .cache import git_head

                cache.write_stamp(artifact, commit=git_head(path), fixture=artifact.fixture)
            else:
                cache.write_stamp(artifact, sha256=sha256_file(path), size=path.stat().st_size, fixture=artifact.fixture)
        outcomes.append(Outcome(artifact, "written"))
    return outcomes


def cache_for(root: Path | None, scale: str) -> DataCache:
    from .cache import default_root

    return DataCache(root or default_root(), scale)  # type: ignore[arg-type]

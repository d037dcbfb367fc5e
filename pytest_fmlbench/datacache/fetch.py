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

FIXTURES_MODULE = "pytest_fmlbench.taskkit.fixtures"


@dataclass(frozen=True)
class Outcome:
    artifact: Artifact
    action: str  # "cached", "fetched", "written", "failed"
    detail: str = ""


def unique(artifacts: Iterable[Artifact]) -> list[Artifact]:
    """Each artefact once; two tasks declaring one name differently is an error (the cache has one folder)."""
    seen: dict[str, Artifact] = {}
    for artifact in artifacts:
        other = seen.setdefault(artifact.name, artifact)
        if other.model_dump(exclude={"description", "fixture"}) != artifact.model_dump(exclude={"description", "fixture"}):
            raise FetchError(f"artefact {artifact.name!r} is declared twice with different sources or checksums")
    return list(seen.values())


def fetch_all(artifacts: list[Artifact], cache: DataCache, console: Console) -> list[Outcome]:
    outcomes = []
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
                    else:
                        fetch_file(artifact, cache, progress)
                except FetchError as exc:
                    outcomes.append(Outcome(artifact, "failed", str(exc)))
                    continue
                outcomes.append(Outcome(artifact, "fetched"))
    return outcomes


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

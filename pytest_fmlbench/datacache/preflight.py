"""Before a full-profile run's first step: is every artefact there, intact, and out of the sandbox's view?"""

from __future__ import annotations

import os
from pathlib import Path

from ..isolation.mounts import SYSTEM_TREES
from .artifact import Artifact
from .cache import DataCache
from .pins import PINS_ENV, PinError, shared_pins


def fix_command(task_id: str, scale: str) -> str:
    if scale == "smoke":
        return f"fmlbench data fixtures -k {task_id}"
    return f"fmlbench data fetch -k {task_id}"


def problem(task_id: str, artifacts: list[Artifact], cache: DataCache) -> str | None:
    """One line naming the first problem and the command or setting that fixes it; None when all is well."""
    root = os.path.realpath(cache.root)
    for tree in SYSTEM_TREES:
        if root == tree or root.startswith(tree.rstrip("/") + "/"):
            return (f"{task_id}: the data cache {cache.root} lies under {tree}, which every experiment's sandbox "
                    "shows: set FMLBENCH_DATA to a folder outside it and fetch again")
    try:
        pins = shared_pins()
    except PinError as exc:
        return f"{task_id}: {exc}"
    for artifact in artifacts:
        wrong = cache.check(artifact)
        if wrong is None:
            continue
        where = f"{artifact.name} ({artifact.description}; {artifact.size_text()})"
        fix = fix_command(task_id, cache.scale)
        if (cache.scale == "full" and artifact.unpublished and artifact.name not in pins
                and cache.read_stamp(artifact) is None):
            return (f"{task_id}: {where} has no published checksum and is not pinned in the data cache {cache.base}: "
                    f"run `{fix} --pin-unpublished` to download it and pin the SHA-256 it has, or set {PINS_ENV} "
                    "to a file of shared pins")
        token = ""
        if cache.scale == "full" and artifact.gated and not os.environ.get(artifact.token_env or ""):
            token = f"{artifact.token_env}=<token> "
        if wrong == "missing":
            return f"{task_id}: {where} is not in the data cache {cache.base}: run `{token}{fix}`"
        return f"{task_id}: {where} in the data cache {cache.base} is {wrong}: run `{token}{fix}`"
    return None


def hidden_paths(cache: DataCache) -> list[Path]:
    """What a sandbox must never show: the whole cache (it holds every split's labels)."""
    return [cache.root]

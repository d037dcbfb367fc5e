"""Small helpers shared by task harnesses (prepare/evaluate) and task experiment drivers.

The evaluator's verdict, :class:`EvalResult`, follows the original FML-bench results layout
(``{dataset: {"means": {...}, "stderrs": {...}}}``) plus explicit constraint outcomes. The harness
reads this file; nothing the experiment writes is ever taken as the score.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator


class DatasetResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    means: dict[str, float]
    stderrs: dict[str, float] = {}


class ConstraintOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    ok: bool
    value: float | None = None
    limit: float | None = None
    detail: str = ""


class EvalResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    datasets: dict[str, DatasetResult] = Field(min_length=1)
    constraints: list[ConstraintOutcome] = []
    info: dict[str, Any] = {}

    def primary(self, key: str) -> float:
        """Mean of ``means[key]`` over the datasets that report it (the original's rule)."""
        values = [d.means[key] for d in self.datasets.values() if key in d.means]
        if not values:
            raise KeyError(f"no dataset reports metric {key!r}")
        value = float(np.mean(values))
        if not math.isfinite(value):
            raise ValueError(f"metric {key!r} is not finite: {value}")
        return value

    def violated(self) -> list[ConstraintOutcome]:
        return [c for c in self.constraints if not c.ok]


class SplitConfig(BaseModel):
    """The agent-editable ``split_config.json``: how the visible data is cut into train/val."""

    model_config = ConfigDict(extra="forbid")
    val_ratio: float = Field(ge=0.1, le=0.5)
    val_seed: int

    @field_validator("val_seed")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("val_seed must be >= 0")
        return v


def harness_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments every harness script and experiment driver accepts (unused ones are None)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=["val", "test"], required=True)
    for name in ("workspace", "out", "private", "result"):
        parser.add_argument(f"--{name}", type=Path)
    return parser.parse_args(argv)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def write_json(path: Path, obj: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable))
    tmp.replace(path)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def load_split_config(workspace: Path) -> SplitConfig:
    return SplitConfig.model_validate(read_json(Path(workspace) / "split_config.json"))


def split_indices(n: int, config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train/val index split of ``n`` visible examples."""
    order = np.random.default_rng(config.val_seed).permutation(n)
    n_val = max(1, int(round(n * config.val_ratio)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def write_result(
    path: Path,
    datasets: dict[str, dict[str, float]],
    stderrs: dict[str, dict[str, float]] | None = None,
    constraints: list[ConstraintOutcome] | None = None,
    info: dict[str, Any] | None = None,
) -> EvalResult:
    """Validate and write the evaluator's verdict."""
    result = EvalResult(
        datasets={
            name: DatasetResult(means=means, stderrs=(stderrs or {}).get(name, {}))
            for name, means in datasets.items()
        },
        constraints=constraints or [],
        info=info or {},
    )
    write_json(path, result.model_dump())
    return result


def fail(message: str) -> NoReturn:
    """End an evaluator with one line: the harness shows it as the step's error."""
    print(f"evaluate.py: {message}", file=sys.stderr)
    raise SystemExit(1)


def load_labels(path: Path, n_expected: int, n_classes: int) -> np.ndarray:
    """The experiment's predicted class labels: a .npy vector of ``n_expected`` integers in [0, n_classes)."""
    path = Path(path)
    if not path.is_file():
        fail(f"no predictions: {path} is missing")
    try:
        pred = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if pred.shape != (n_expected,):
        fail(f"{path.name} has shape {pred.shape}, expected ({n_expected},)")
    if not np.issubdtype(pred.dtype, np.number) or not np.all(np.isfinite(pred)) or np.any(pred != np.round(pred)):
        fail(f"{path.name} must hold integer class labels (dtype {pred.dtype}, no NaN)")
    if pred.min() < 0 or pred.max() >= n_classes:
        fail(f"{path.name} has labels outside 0..{n_classes - 1}")
    return pred.astype(np.int64)

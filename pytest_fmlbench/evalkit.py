"""Small helpers shared by task harnesses (prepare/evaluate) and task experiment drivers.

The evaluator's verdict, :class:`EvalResult`, follows the original FML-bench results layout
(``{dataset: {"means": {...}, "stderrs": {...}}}``) plus explicit constraint outcomes. The harness
reads this file; nothing the experiment writes is ever taken as the score.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field, field_validator

# numpy is imported where it is used: the run records and the editor (every agent host) import this module
# for its models alone, and numpy would cost each of them a tenth of a second

from .untrusted import MAX_UNTRUSTED_BYTES, read_untrusted  # noqa: F401  (harnesses import them from here)


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
        import numpy as np  # the original's mean, to the last bit

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
    for name in ("workspace", "out", "private", "result", "data"):
        parser.add_argument(f"--{name}", type=Path)
    # full-profile tasks: "smoke" runs the code path for a few batches on fixture data
    parser.add_argument("--scale", choices=["full", "smoke"], default="full")
    return parser.parse_args(argv)


def read_json(path: Path, max_bytes: int = 16 << 20) -> Any:
    return json.loads(read_untrusted(path, max_bytes))


def write_json(path: Path, obj: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable))
    tmp.replace(path)


def _jsonable(obj: Any) -> Any:
    np = sys.modules.get("numpy")  # a numpy value exists only where numpy is loaded already
    if np is None:
        raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class OriginalSplitConfig(SplitConfig):
    """A full task's ``split_config.json`` whose original default ``val_ratio`` lies under 0.1
    (Robustness_openood's 0.057, about 3,000 of 53,000 images): any ratio in (0, 0.5], as the original's
    script takes any; the task's driver still needs at least one val example."""

    val_ratio: float = Field(gt=0.0, le=0.5)


def load_split_config(workspace: Path, schema: type[SplitConfig] = SplitConfig) -> SplitConfig:
    return schema.model_validate(read_json(Path(workspace) / "split_config.json"))


def split_indices(n: int, config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train/val index split of ``n`` visible examples."""
    import numpy as np

    order = np.random.default_rng(config.val_seed).permutation(n)
    n_val = max(1, int(round(n * config.val_ratio)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def original_split_indices(n: int, config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """The original FML-bench's train/val cut of ``n`` visible examples (full-profile image tasks):
    ``RandomState(val_seed).permutation(n)``, its first ``int(n * val_ratio)`` are val (positions, unsorted)."""
    import numpy as np

    order = np.random.RandomState(config.val_seed).permutation(n)
    n_val = int(config.val_ratio * n)
    return order[n_val:], order[:n_val]


def original_stratified_split_indices(labels: np.ndarray, config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """The original FML-bench's train/val cut of a visible pool for tabular tasks (Fairness_fairlearn):
    scikit-learn's ``train_test_split(test_size=val_ratio, random_state=val_seed, stratify=labels)`` over the
    pool's positions, in the order it returns them."""
    import numpy as np
    from sklearn.model_selection import train_test_split  # only the tabular tasks' drivers need scikit-learn

    train, val = train_test_split(np.arange(len(labels)), test_size=config.val_ratio, random_state=config.val_seed,
                                  stratify=labels)
    return train, val


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
    import numpy as np

    path = Path(path)
    if not path.is_file():
        fail(f"no predictions: {path} is missing")
    try:
        pred = np.load(io.BytesIO(read_untrusted(path)), allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if pred.shape != (n_expected,):
        fail(f"{path.name} has shape {pred.shape}, expected ({n_expected},)")
    if not np.issubdtype(pred.dtype, np.number) or not np.all(np.isfinite(pred)) or np.any(pred != np.round(pred)):
        fail(f"{path.name} must hold integer class labels (dtype {pred.dtype}, no NaN)")
    if pred.min() < 0 or pred.max() >= n_classes:
        fail(f"{path.name} has labels outside 0..{n_classes - 1}")
    return pred.astype(np.int64)

"""What a continual learner keeps between sessions, measured by the protected runner after each one
(protected; every workspace of the continual-learning tasks receives a copy of
``pytest_fmlbench.taskkit.session_audit`` as session_audit.py).

The runner walks everything reachable from the learner object (and the method module's globals):
attributes, containers, torch modules, tensors and numpy arrays. It counts the parameters of the torch
modules it finds (each parameter once), and it counts how many of the raw input images handed to the
learner so far are still held somewhere, whole, as rows of a float array (any float dtype, any shape
whose size is a multiple of one image). The second is a tripwire for storing raw samples, not a proof:
a learner that transforms what it stores is not seen, and the task's rules still apply to it.
"""

from __future__ import annotations

import types
from typing import Any, Iterator

import numpy as np
import torch

MAX_OBJECTS = 200_000  # bounds the walk; a learner is far smaller than this


def _children(obj: Any) -> Iterator[Any]:
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from obj
    elif isinstance(obj, types.ModuleType):
        yield from vars(obj).values()
    else:
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            yield from state.values()
        for slot in getattr(type(obj), "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                yield getattr(obj, slot)


def _skip(obj: Any) -> bool:
    """Code, classes and foreign modules hold no learner state worth walking."""
    return isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                            str, bytes, int, float, complex, bool, type(None), torch.dtype, torch.device))


def reachable(roots: list[Any]) -> tuple[list[torch.Tensor | np.ndarray], list[torch.nn.Parameter]]:
    """(arrays, parameters) reachable from roots; module objects are walked only if they are roots."""
    seen: set[int] = set()
    arrays: list[Any] = []
    params: dict[int, torch.nn.Parameter] = {}
    stack = list(roots)
    root_ids = {id(r) for r in roots}
    while stack and len(seen) < MAX_OBJECTS:
        obj = stack.pop()
        if id(obj) in seen or _skip(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, types.ModuleType) and id(obj) not in root_ids:
            continue
        if isinstance(obj, torch.Tensor):
            if isinstance(obj, torch.nn.Parameter):
                params[id(obj)] = obj
            arrays.append(obj)
            continue
        if isinstance(obj, np.ndarray):
            arrays.append(obj)
            continue
        stack.extend(_children(obj))
    return arrays, list(params.values())


def count_parameters(params: list[torch.nn.Parameter]) -> int:
    return int(sum(p.numel() for p in params))


class RowIndex:
    """Exact lookup of image rows (float32 bytes) among the arrays a learner holds."""

    def __init__(self, width: int):
        self.width = width
        self._rows: set[bytes] = set()

    def add(self, images: np.ndarray, exclude: RowIndex | None = None) -> None:
        """Index the rows of images, except those already indexed in exclude."""
        rows = _rows(np.asarray(images, dtype=np.float32), self.width)
        self._rows.update(rows - exclude._rows if exclude is not None else rows)

    def held(self, arrays: list[torch.Tensor | np.ndarray]) -> int:
        """How many distinct indexed rows appear in arrays."""
        found: set[bytes] = set()
        for a in arrays:
            if isinstance(a, torch.Tensor):
                if not a.is_floating_point() or a.numel() % self.width or a.numel() == 0:
                    continue
                a = a.detach().to("cpu", torch.float32).numpy()
            elif not np.issubdtype(a.dtype, np.floating) or a.size % self.width or a.size == 0:
                continue
            found.update(r for r in _rows(a.astype(np.float32, copy=False), self.width) if r in self._rows)
        return len(found)


def _rows(a: np.ndarray, width: int) -> set[bytes]:
    flat = np.ascontiguousarray(a).reshape(-1, width)
    return {row.tobytes() for row in flat}

"""The original's five backdoors on MNIST and its all-to-all poisoning (harness only: no trigger, seed or
poison mark reaches the workspace).

Facts taken from FML-bench's Robustness_and_Reliability_art (``eval.py``), re-implemented here:

* triggers, on 28 x 28 images with the pool's maximum pixel value (255):
  ``pattern``         ART's ``add_pattern_bd`` (a four-pixel checkerboard two pixels from the bottom-right);
  ``distributed``     2 x 2 squares at (2, 2), (24, 2), (2, 24) and (14, 14);
  ``edge``            every second pixel of the top row (columns 7..19) and of the right column (rows 7..19);
  ``random_corner``   a four-pixel checkerboard in the corner ``RandomState(233)`` draws (the original
                      re-seeds the global generator with 233 before each draw, so every call gets the same
                      corner: bottom-right, at (25, 25), (24, 24), (25, 23), (23, 25));
  ``pattern_topleft`` the checkerboard at (2, 2), (3, 3), (2, 4), (4, 2);
* poisoning, all-to-all: for each source class c, ``round(0.33 * n_target / 0.67)`` images of class c
  (drawn with replacement by ``rng.choice``) get the trigger through ART's ``PoisoningAttackBackdoor`` and
  the label (c + 1) mod 10, and are appended to the set as extra copies (33% of the result is poison).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from art.attacks.poisoning import PoisoningAttackBackdoor
from art.attacks.poisoning.perturbations import add_pattern_bd

NUM_CLASSES = 10
PERCENT_POISON = 0.33
CORNER_SEED = 233
CORNERS = {
    "top-left": [(2, 2), (3, 3), (2, 4), (4, 2)],
    "top-right": [(2, -3), (3, -4), (2, -5), (4, -3)],
    "bottom-left": [(-3, 2), (-4, 3), (-3, 4), (-5, 2)],
    "bottom-right": [(-3, -3), (-4, -4), (-3, -5), (-5, -3)],
}


def _set(x: np.ndarray, pixels: list[tuple[int, int]], value: int) -> np.ndarray:
    x = np.array(x, copy=True)
    for row, col in pixels:
        x[:, row, col] = value
    return x


def _distributed(x: np.ndarray, value: int) -> np.ndarray:
    side = x.shape[1]
    squares = [(2, 2), (side - 4, 2), (2, side - 4), (side // 2, side // 2)]
    return _set(x, [(r + dr, c + dc) for r, c in squares for dr in (0, 1) for dc in (0, 1)], value)


def _edge(x: np.ndarray, value: int) -> np.ndarray:
    side = x.shape[1]
    dashes = range(side // 4, 3 * side // 4, 2)
    return _set(x, [(0, c) for c in dashes] + [(r, side - 1) for r in dashes], value)


def _random_corner(x: np.ndarray, value: int) -> np.ndarray:
    corner = np.random.RandomState(CORNER_SEED).choice(list(CORNERS))
    return _set(x, CORNERS[str(corner)], value)


def triggers(value: int) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The five backdoors in the original's order, each mapping (N, 28, 28) images to triggered copies."""
    return {
        "pattern": lambda x: add_pattern_bd(x, pixel_value=value),
        "distributed": lambda x: _distributed(x, value),
        "edge": lambda x: _edge(x, value),
        "random_corner": lambda x: _random_corner(x, value),
        "pattern_topleft": lambda x: _set(x, CORNERS["top-left"], value),
    }


def poison(x: np.ndarray, y: np.ndarray, trigger: Callable[[np.ndarray], np.ndarray],
           rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels as poisoned, is_poison): the clean set, then the triggered copies, as the original."""
    xs, ys = [x], [y]
    for source in range(NUM_CLASSES):
        target = (source + 1) % NUM_CLASSES
        n_poison = round(PERCENT_POISON * np.sum(y == target) / (1 - PERCENT_POISON))
        sources = x[y == source]
        picked = np.copy(sources[rng.choice(len(sources), n_poison)])
        images, labels = PoisoningAttackBackdoor(trigger).poison(picked, y=np.full(n_poison, target))
        xs.append(np.asarray(images, dtype=x.dtype))
        ys.append(np.asarray(labels, dtype=y.dtype))
    flags = np.concatenate([np.zeros(len(x), dtype=bool), np.ones(sum(len(v) for v in ys[1:]), dtype=bool)])
    return np.concatenate(xs), np.concatenate(ys), flags

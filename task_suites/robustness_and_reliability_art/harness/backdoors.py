"""The five backdoor triggers and the all-to-all poisoning of the robustness_and_reliability_art task.

The original task (FML-bench Robustness_and_Reliability_art) poisons MNIST with ART's
PoisoningAttackBackdoor and five trigger patterns (ART's corner checkerboard, a distributed trigger, an
edge trigger, a checkerboard in a random corner, a top-left checkerboard), all-to-all: images of class
c get the trigger and the label (c + 1) mod 10, at a poison rate of 0.33. Here the images are 8x8
(pixels 0..16), so each pattern is scaled to that grid; ART's own add_pattern_bd is used where it
fits. These definitions live in harness/ only: the defence never sees the trigger code.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from art.attacks.poisoning import PoisoningAttackBackdoor
from art.attacks.poisoning.perturbations import add_pattern_bd

NUM_CLASSES = 10
PIXEL_MAX = 16
POISON_RATE = 0.33


def _set(x: np.ndarray, pixels: list[tuple[int, int]]) -> np.ndarray:
    x = np.array(x, copy=True)
    for row, col in pixels:
        x[..., row, col] = PIXEL_MAX
    return x


def pattern(x: np.ndarray) -> np.ndarray:
    """ART's checkerboard of four pixels next to the bottom-right corner."""
    return add_pattern_bd(x, distance=1, pixel_value=PIXEL_MAX)


def distributed(x: np.ndarray) -> np.ndarray:
    """Single pixels spread over the image: near three corners and at the centre."""
    return _set(x, [(1, 1), (1, 6), (6, 1), (4, 4)])


def edge(x: np.ndarray) -> np.ndarray:
    """Dashes along the top and the right border."""
    return _set(x, [(0, 2), (0, 4), (2, 7), (4, 7)])


def random_corner(x: np.ndarray, seed: int) -> np.ndarray:
    """A four-pixel checkerboard in a corner drawn at random for each image."""
    corners = {
        0: [(0, 0), (1, 1), (0, 2), (2, 0)],
        1: [(0, 7), (1, 6), (0, 5), (2, 7)],
        2: [(7, 0), (6, 1), (7, 2), (5, 0)],
        3: [(7, 7), (6, 6), (7, 5), (5, 7)],
    }
    x = np.array(x, copy=True)
    picks = np.random.default_rng(seed).integers(4, size=len(x))
    for i, corner in enumerate(picks):
        x[i] = _set(x[i], corners[int(corner)])
    return x


def pattern_topleft(x: np.ndarray) -> np.ndarray:
    """The checkerboard mirrored into the top-left corner."""
    return _set(x, [(1, 1), (2, 2), (1, 3), (3, 1)])


BACKDOORS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "pattern": lambda x, seed: pattern(x),
    "distributed": lambda x, seed: distributed(x),
    "edge": lambda x, seed: edge(x),
    "random_corner": random_corner,
    "pattern_topleft": lambda x, seed: pattern_topleft(x),
}


def poison(x: np.ndarray, y: np.ndarray, backdoor: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All-to-all poisoning as in the original: images of class c get the trigger and the label
    (c + 1) mod 10, with ``POISON_RATE`` of every class's examples poisoned ones. Returns (inputs,
    labels, is_poison), the clean examples first.

    The original appends triggered COPIES of images that stay in the clean set, so a defence could
    find every poison by matching it to its clean twin, which no real attacker would supply. Here the
    attacker's source images are taken out of the clean set instead: c's class keeps
    n_c - q_c clean images and receives q_{c-1} poisons, with q chosen so that poisons make up
    ``POISON_RATE`` of the result, as in the original.
    """
    rng = np.random.default_rng(seed)
    trigger = BACKDOORS[backdoor]
    keep = np.ones(len(x), dtype=bool)
    xs, ys = [], []
    for source in range(NUM_CLASSES):
        target = (source + 1) % NUM_CLASSES
        candidates = np.flatnonzero(y == source)
        picked = rng.choice(candidates, size=round(POISON_RATE * len(candidates)), replace=False)
        keep[picked] = False
        attack = PoisoningAttackBackdoor(lambda batch: trigger(batch, seed + source))
        x_poison, y_poison = attack.poison(x[picked], y=np.full(len(picked), target))
        xs.append(np.asarray(x_poison, dtype=x.dtype))
        ys.append(np.asarray(y_poison, dtype=y.dtype))
    x_out = np.concatenate([x[keep], *xs])
    y_out = np.concatenate([y[keep], *ys])
    flags = np.concatenate([np.zeros(int(keep.sum()), dtype=bool), np.ones(len(x) - int(keep.sum()), dtype=bool)])
    return x_out, y_out, flags

"""Glyphs-100: a generated, deterministic 100-class image set (12x12 grayscale), shared by prepare.py and
evaluate.py.

Each class is a random "character" of three pen strokes (quadratic Bezier curves). An image of a
class redraws it by hand, so to speak: every control point moves by Gaussian jitter, the glyph is
rotated (up to about 11 degrees), scaled (0.9-1.1) and shifted (up to a pixel), the pen width varies,
and pixel noise is added. Like Omniglot, the classes share low-level features (strokes, curves) but
no label structure. numpy's legacy RandomState is used because its streams are frozen across numpy
versions. The seeds live only here (harness/ is never copied into the workspace): the hidden test
images are drawn with their own seed and are never in the visible pool.
"""

from __future__ import annotations

import numpy as np

NUM_CLASSES = 100
BASE_CLASSES = 50  # B50
INCREMENT = 10  # + 5 x 10
SESSIONS = [list(range(BASE_CLASSES))] + [list(range(s, s + INCREMENT))
                                          for s in range(BASE_CLASSES, NUM_CLASSES, INCREMENT)]
MEMORY_SIZE = 500  # exemplars kept across sessions, all classes together (PyCIL: memory_size, fixed_memory off)
SIZE = 12
STROKES = 3
JITTER = 0.6  # pixels, per control point
NOISE = 0.1
VISIBLE_PER_CLASS = 60
TEST_PER_CLASS = 20
PROTOTYPE_SEED = 1993  # PyCIL's seed
VISIBLE_SEED = 2
TEST_SEED = 20250917
_CURVE = np.linspace(0.0, 1.0, 8)  # points per stroke


def render(ctrl: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Control points (N, STROKES, 3, 2) and pen widths (N,) -> images (N, SIZE, SIZE) in [0, 1]."""
    t = _CURVE[None, None, :, None]
    points = (1 - t) ** 2 * ctrl[:, :, 0:1] + 2 * (1 - t) * t * ctrl[:, :, 1:2] + t ** 2 * ctrl[:, :, 2:3]
    a = points[:, :, :-1].reshape(len(ctrl), -1, 2)
    ab = points[:, :, 1:].reshape(len(ctrl), -1, 2) - a
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    pixels = np.stack([xx.ravel(), yy.ravel()], axis=1)[None, :, None, :]
    ap = pixels - a[:, None]
    along = np.clip((ap * ab[:, None]).sum(-1) / np.maximum((ab ** 2).sum(-1), 1e-9)[:, None], 0.0, 1.0)
    distance = np.sqrt(((ap - along[..., None] * ab[:, None]) ** 2).sum(-1)).min(-1)
    return np.clip(1.0 - distance / width[:, None] + 0.5, 0.0, 1.0).reshape(-1, SIZE, SIZE)


def draw(per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, SIZE, SIZE), labels (N,)), per_class images of every class, in a shuffled order."""
    prototypes = np.random.RandomState(PROTOTYPE_SEED).uniform(1.5, SIZE - 1.5, size=(NUM_CLASSES, STROKES, 3, 2))
    rng = np.random.RandomState(seed)
    y = np.repeat(np.arange(NUM_CLASSES), per_class)
    n = len(y)
    ctrl = prototypes[y] + rng.normal(0.0, JITTER, size=(n, STROKES, 3, 2))
    angle, scale = rng.uniform(-0.2, 0.2, n), rng.uniform(0.9, 1.1, n)
    shift = rng.uniform(-1.0, 1.0, size=(n, 2))
    rotation = scale[:, None, None] * np.stack([np.stack([np.cos(angle), -np.sin(angle)], -1),
                                                np.stack([np.sin(angle), np.cos(angle)], -1)], -2)
    ctrl = np.einsum("nsij,nkj->nsik", ctrl - SIZE / 2, rotation) + SIZE / 2 + shift[:, None, None]
    width = rng.uniform(0.7, 1.1, n)
    images = np.concatenate([render(ctrl[i:i + 500], width[i:i + 500]) for i in range(0, n, 500)])
    images = np.clip(images + rng.normal(0.0, NOISE, size=images.shape), 0.0, 1.0)
    order = rng.permutation(n)
    return np.round(images * 255).astype(np.uint8)[order], y[order]


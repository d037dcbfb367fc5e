"""Synthetic object images: the offline stand-in for CIFAR-10 and CIFAR-100 (the representation-learning
tasks' small profile).

Each image is a 16x16 RGB picture of one object class (a shape) drawn with the nuisances that make
natural images hard for a linear probe on raw pixels: a random colour, position, scale and
rotation for the object; a flat, graded or mottled background of random colours; a distracting
blob; sensor noise. The class is carried by the object's shape only, so a representation has to
become invariant to colour and placement (what SSL augmentations teach) to separate the classes.

Everything is a deterministic function of the seed given to ``generate``; the seeds live in each task's
harness (``data.py``), never in a workspace.
"""

from __future__ import annotations

import numpy as np

IMAGE_SIZE = 16
SUPERSAMPLE = 4  # shape edges are anti-aliased by rendering 4x4 sub-pixels per pixel
DISTRACTOR_PROB = 0.3
MAX_ROTATION = np.pi / 6
MAX_SHIFT = 0.2
NOISE_STD = 0.02
MIN_CONTRAST = 0.35  # RGB distance between the object and the mean background colour


def _convex(u: np.ndarray, v: np.ndarray, corners: np.ndarray) -> np.ndarray:
    inside = np.ones(u.shape, dtype=bool)
    for (x0, y0), (x1, y1) in zip(corners, np.roll(corners, -1, axis=0)):
        inside &= (x1 - x0) * (v - y0) - (y1 - y0) * (u - x0) >= 0
    return inside


def _regular(n: int, radius: float = 1.0) -> np.ndarray:
    angles = np.pi / 2 + 2 * np.pi * np.arange(n) / n
    return np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)


def _star(u: np.ndarray, v: np.ndarray, points: int, inner: float) -> np.ndarray:
    sector = 2 * np.pi / points
    tip = np.abs(((np.arctan2(v, u) - np.pi / 2) % sector) / sector - 0.5) * 2  # 1 at tips, 0 between
    return np.hypot(u, v) <= inner + (1 - inner) * tip


def _disc(u, v, cx=0.0, cy=0.0, r=1.0):
    return (u - cx) ** 2 + (v - cy) ** 2 <= r * r


def _box(u, v, half_w, half_h, cx=0.0, cy=0.0):
    return (np.abs(u - cx) <= half_w) & (np.abs(v - cy) <= half_h)


# Shape-local coordinates (u, v) span about [-1, 1]. No two classes coincide under a rotation
# within +-MAX_ROTATION, so the label is a property of the image.
SHAPES = {
    "disc": lambda u, v: _disc(u, v, r=0.92),
    "ring": lambda u, v: _disc(u, v) & ~_disc(u, v, r=0.6),
    "square": lambda u, v: _box(u, v, 0.75, 0.75),
    "frame": lambda u, v: _box(u, v, 0.85, 0.85) & ~_box(u, v, 0.5, 0.5),
    "triangle": lambda u, v: _convex(u, v, _regular(3)),
    "plus": lambda u, v: _box(u, v, 0.28, 0.95) | _box(u, v, 0.95, 0.28),
    "star": lambda u, v: _star(u, v, 5, 0.45),
    "crescent": lambda u, v: _disc(u, v) & ~_disc(u, v, cx=0.45, r=0.78),
    "bar": lambda u, v: (u / 1.0) ** 2 + (v / 0.35) ** 2 <= 1,
    "dots": lambda u, v: _disc(u, v, cx=0.5, r=0.4) | _disc(u, v, cx=-0.5, r=0.4),
    "hexagon": lambda u, v: _convex(u, v, _regular(6, 0.95)),
    "semicircle": lambda u, v: _disc(u, v, cy=-0.3) & (v >= -0.3),
    "tee": lambda u, v: _box(u, v, 0.9, 0.22, cy=0.6) | _box(u, v, 0.22, 0.8, cy=-0.1),
    "ell": lambda u, v: _box(u, v, 0.22, 0.9, cx=-0.5) | _box(u, v, 0.7, 0.22, cx=-0.1, cy=-0.7),
    "hourglass": lambda u, v: (np.abs(u) <= np.abs(v) * 0.9) & (np.abs(v) <= 0.9),
    "target": lambda u, v: (_disc(u, v) & ~_disc(u, v, r=0.68)) | _disc(u, v, r=0.35),
    "arrow": lambda u, v: _convex(u, v, np.array([[0.2, 0.8], [-0.9, 0.0], [0.2, -0.8]])) | _box(u, v, 0.5, 0.25, cx=0.5),
    "cup": lambda u, v: _box(u, v, 0.8, 0.8) & ~_box(u, v, 0.5, 0.8, cy=0.3),
    "four_dots": lambda u, v: (_disc(u, v, 0.5, 0.5, 0.33) | _disc(u, v, -0.5, 0.5, 0.33)
                               | _disc(u, v, 0.5, -0.5, 0.33) | _disc(u, v, -0.5, -0.5, 0.33)),
    "star4": lambda u, v: _star(u, v, 4, 0.35),
}


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    k = (np.array([5.0, 3.0, 1.0]) + h[..., None] * 6) % 6
    return v[..., None] - v[..., None] * s[..., None] * np.clip(np.minimum(k, 4 - k), 0, 1)


def _colours(rng: np.random.Generator, n: int) -> np.ndarray:
    return _hsv_to_rgb(rng.random(n), rng.uniform(0.3, 1.0, n), rng.uniform(0.25, 1.0, n))


def _backgrounds(rng: np.random.Generator, n: int) -> np.ndarray:
    """Flat, linearly graded or mottled (smoothly interpolated 4x4 noise) two-colour backgrounds."""
    size = IMAGE_SIZE
    kind = rng.integers(3, size=n)
    c0, c1 = _colours(rng, n), _colours(rng, n)
    angle = rng.uniform(0, 2 * np.pi, n)
    coarse = rng.random((n, 4, 4))
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1) - 0.5
    graded = np.clip(0.5 + xx[None] * np.cos(angle)[:, None, None] + yy[None] * np.sin(angle)[:, None, None], 0, 1)
    # bilinear upsampling of the 4x4 noise as a matrix product: rows of `up` interpolate 4 knots
    knots = np.linspace(0, 3, size)
    up = np.clip(1 - np.abs(knots[:, None] - np.arange(4)[None]), 0, 1)
    mottled = np.einsum("ia,nab,jb->nij", up, coarse, up)
    lo, hi = mottled.min(axis=(1, 2), keepdims=True), mottled.max(axis=(1, 2), keepdims=True)
    mottled = (mottled - lo) / (hi - lo + 1e-9)
    t = np.where((kind == 0)[:, None, None], 0.0, np.where((kind == 1)[:, None, None], graded, mottled))
    return c0[:, None, None] * (1 - t[..., None]) + c1[:, None, None] * t[..., None]


def _coverage(mask: np.ndarray) -> np.ndarray:
    """Fraction of each pixel covered by a supersampled mask (n, S*k, S*k) -> (n, S, S)."""
    n, k = len(mask), SUPERSAMPLE
    return mask.reshape(n, IMAGE_SIZE, k, IMAGE_SIZE, k).mean(axis=(2, 4))


def render(labels: np.ndarray, names: list[str], rng: np.random.Generator) -> np.ndarray:
    """uint8 images (n, 16, 16, 3) of the shapes ``names[labels]`` with random nuisances."""
    n = len(labels)
    fine = IMAGE_SIZE * SUPERSAMPLE
    axis = (np.arange(fine) + 0.5) / fine * 2 - 1
    gx, gy = np.meshgrid(axis, -axis)
    images = _backgrounds(rng, n)

    blob_on = rng.random(n) < DISTRACTOR_PROB
    blob_xy = rng.uniform(-0.8, 0.8, (n, 2))
    blob_r = rng.uniform(0.1, 0.18, n)
    blob = ((gx[None] - blob_xy[:, 0, None, None]) ** 2 + (gy[None] - blob_xy[:, 1, None, None]) ** 2
            <= blob_r[:, None, None] ** 2) & blob_on[:, None, None]
    cover = _coverage(blob)[..., None]
    images = images * (1 - cover) + _colours(rng, n)[:, None, None] * cover

    # object colour: redrawn (vectorised rejection) until it stands out from the background
    fg = _colours(rng, n)
    mean_bg = images.mean(axis=(1, 2))
    for _ in range(100):
        weak = np.linalg.norm(fg - mean_bg, axis=1) < MIN_CONTRAST
        if not weak.any():
            break
        fg[weak] = _colours(rng, int(weak.sum()))
    scale = rng.uniform(0.55, 0.85, n)
    angle = rng.uniform(-MAX_ROTATION, MAX_ROTATION, n)
    shift = rng.uniform(-MAX_SHIFT, MAX_SHIFT, (n, 2))
    x = (gx[None] - shift[:, 0, None, None]) / scale[:, None, None]
    y = (gy[None] - shift[:, 1, None, None]) / scale[:, None, None]
    cos, sin = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
    u, v = x * cos + y * sin, -x * sin + y * cos
    mask = np.zeros((n, fine, fine), dtype=bool)
    for label in np.unique(labels):
        rows = labels == label
        mask[rows] = SHAPES[names[label]](u[rows], v[rows])
    cover = _coverage(mask)[..., None]
    images = images * (1 - cover) + fg[:, None, None] * cover

    images = images + rng.normal(0.0, NOISE_STD, images.shape)
    return np.clip(np.round(images * 255), 0, 255).astype(np.uint8)


def generate(n: int, n_classes: int, seed: int, chunk: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """``n`` class-balanced images of the first ``n_classes`` shapes, deterministic in ``seed``."""
    if not 2 <= n_classes <= len(SHAPES):
        raise ValueError(f"n_classes must be in 2..{len(SHAPES)}")
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % n_classes)
    names = list(SHAPES)[:n_classes]
    images = np.concatenate([render(labels[i:i + chunk], names, rng) for i in range(0, n, chunk)])
    return images, labels.astype(np.int64)

"""An Omniglot-like few-shot image set drawn from fonts that ship with matplotlib, and its features.

mini-ImageNet cannot be downloaded, and neither can a pre-trained backbone. What ships offline are
fonts: matplotlib carries twelve DejaVu faces (Sans, Sans Mono and Serif, each regular, bold, italic
and bold italic) covering the Latin, Greek, Cyrillic, Armenian and Georgian alphabets. Each character
is a class (after dropping characters that look like one already kept, e.g. Latin A and Greek Alpha);
an image of it is the glyph rendered by FreeType in a random face at a random size, placed on a 20x20
canvas, then randomly rotated, sheared, scaled and shifted, with a little pixel noise.

The "pre-extracted features" of the original are replaced by the output of a frozen encoder that is
the same for every class: a two-layer convolutional network with fixed random weights (16 5x5 filters,
ReLU, 2x2 max-pooling, 64 3x3 filters, ReLU, average pooling to a 2x2 grid: 256 non-negative features).
No class is privileged by it, so "novel" classes are as novel to it as the base classes.

Everything is drawn from generators seeded here (per class, so any subset of classes renders the same
wherever it is rendered); the class order, hence which classes are hidden, lives only in harness/.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy import ndimage

SEED = 20240807
CANVAS = 20
FACES = ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique",
         "DejaVuSansMono", "DejaVuSansMono-Bold", "DejaVuSansMono-Oblique", "DejaVuSansMono-BoldOblique",
         "DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "DejaVuSerif-BoldItalic")
ALPHABETS = {
    "latin": [*range(0x41, 0x5B), *range(0x61, 0x7B)],
    "digits": list(range(0x30, 0x3A)),
    "greek": [*range(0x391, 0x3A2), *range(0x3A3, 0x3AA), *range(0x3B1, 0x3CA)],
    "cyrillic": list(range(0x410, 0x450)),
    "armenian": [*range(0x531, 0x557), *range(0x561, 0x587)],
    "georgian": list(range(0x10D0, 0x10F1)),
}
N_CLASSES = 100          # as mini-ImageNet: 100 classes ...
N_TEST_CLASSES = 20      # ... of which 20 are the (hidden) test classes
IMAGES_PER_CLASS = 40
DUPLICATE_CORRELATION = 0.9
FEATURE_DIM = 256


def _font_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@lru_cache(maxsize=None)
def _face(name: str):
    from matplotlib.ft2font import FT2Font

    return FT2Font(str(_font_dir() / f"{name}.ttf"))


def render(char: int, face: str, size: float) -> np.ndarray:
    """The glyph's coverage bitmap, float in [0, 1], cropped to its ink."""
    from matplotlib.ft2font import LoadFlags

    font = _face(face)
    font.clear()
    font.set_size(size, 72)
    font.set_text(chr(char), 0.0, flags=LoadFlags.NO_HINTING)
    font.draw_glyphs_to_bitmap(antialiased=True)
    bitmap = np.asarray(font.get_image(), dtype=np.float64) / 255.0
    rows, cols = np.nonzero(bitmap > 0.05)
    if len(rows) == 0:
        return np.zeros((1, 1))
    return bitmap[rows.min():rows.max() + 1, cols.min():cols.max() + 1]


def _centered(bitmap: np.ndarray, size: int = CANVAS) -> np.ndarray:
    canvas = np.zeros((size, size))
    h, w = min(bitmap.shape[0], size), min(bitmap.shape[1], size)
    top, left = (size - h) // 2, (size - w) // 2
    canvas[top:top + h, left:left + w] = bitmap[:h, :w]
    return canvas


def _signature(char: int) -> np.ndarray:
    """The glyph in the regular face, stretched to fill the canvas: used to find look-alikes."""
    bitmap = render(char, FACES[0], 24)
    zoom = (CANVAS / bitmap.shape[0], CANVAS / bitmap.shape[1])
    sig = ndimage.zoom(bitmap, zoom, order=1, grid_mode=True, mode="nearest")[:CANVAS, :CANVAS]
    sig = _centered(sig) - sig.mean()
    return sig.ravel() / max(np.linalg.norm(sig), 1e-9)


@lru_cache(maxsize=1)
def class_characters() -> tuple[int, ...]:
    """The N_CLASSES characters used as classes, in the harness's fixed (shuffled) order."""
    charmaps = [_face(face).get_charmap() for face in FACES]
    kept, signatures = [], []
    for chars in ALPHABETS.values():
        for char in chars:
            if not all(char in cmap for cmap in charmaps):
                continue
            sig = _signature(char)
            if np.linalg.norm(sig) == 0 or (signatures and max(np.dot(signatures, sig)) > DUPLICATE_CORRELATION):
                continue
            kept.append(char)
            signatures.append(sig)
    order = np.random.default_rng(SEED).permutation(len(kept))
    return tuple(kept[i] for i in order[:N_CLASSES])


def class_images(class_index: int, n: int = IMAGES_PER_CLASS) -> np.ndarray:
    """n images (n, CANVAS, CANVAS) in [0, 1] of the class_index-th class character."""
    char = class_characters()[class_index]
    rng = np.random.default_rng([SEED, class_index])
    images = np.empty((n, CANVAS, CANVAS))
    center = (CANVAS - 1) / 2
    for i in range(n):
        glyph = _centered(render(char, FACES[rng.integers(len(FACES))], rng.uniform(13, 17)))
        angle, shear = np.radians(rng.uniform(-12, 12)), rng.uniform(-0.2, 0.2)
        scale = rng.uniform(0.85, 1.1, 2)
        # output pixel o reads input pixel A @ (o - center) + center - shift
        rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        matrix = rotation @ np.array([[1, shear], [0, 1]]) / scale[:, None]
        offset = center - matrix @ np.full(2, center) - rng.uniform(-1.5, 1.5, 2)
        warped = ndimage.affine_transform(glyph, matrix, offset=offset, order=1, mode="constant")
        images[i] = np.clip(warped + rng.normal(0, 0.03, warped.shape), 0, 1)
    return images


def _encoder_weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([SEED, 999_999])
    w1 = rng.normal(0, 1, (16, 1, 5, 5))
    w1 -= w1.mean(axis=(2, 3), keepdims=True)  # zero-mean filters respond to strokes, not to brightness
    w2 = rng.normal(0, 1, (64, 16, 3, 3)) / np.sqrt(16 * 9)
    return w1 / np.sqrt(25), w2


def encode(images: np.ndarray) -> np.ndarray:
    """The frozen encoder's features, float32 (n, FEATURE_DIM), non-negative."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    w1, w2 = (torch.from_numpy(w) for w in _encoder_weights())
    x = torch.from_numpy(images).unsqueeze(1)  # float64 throughout: the features must not depend on the CPU
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, padding=2)), 2)
    h = F.relu(F.conv2d(h, w2, padding=1))
    return F.adaptive_avg_pool2d(h, 2).flatten(1).numpy().astype(np.float32)


def features(class_indices) -> tuple[np.ndarray, np.ndarray]:
    """(features float32 (n, FEATURE_DIM), class index int64 (n,)) for the given classes."""
    feats, labels = [], []
    for c in class_indices:
        feats.append(encode(class_images(c)))
        labels.append(np.full(IMAGES_PER_CLASS, c, dtype=np.int64))
    return np.concatenate(feats), np.concatenate(labels)

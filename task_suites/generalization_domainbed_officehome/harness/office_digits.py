"""OfficeHome-like domains built from sklearn's 8x8 digits: the same 10 classes in 4 visual styles.

OfficeHome (Venkateswara et al., 2017) shows the same 65 object categories in four domains: Art
(paintings, sketches), Clipart, Product (objects on white backgrounds) and Real World (photos). None of
it can be downloaded here, so each domain is rendered from a disjoint quarter of scikit-learn's 1,797
digits, upsampled to 16x16 RGB, with a documented style shift:

- Art (env 0, held out): a painted canvas. Smooth, low-frequency colour fields for the background, the
  digit laid on as a soft, blurred brush stroke of a colour close to the canvas (low contrast), a
  canvas-grain texture on top.
- Clipart (env 1): flat cartoon. A flat pastel background, the digit thresholded to a hard-edged shape
  filled with a saturated palette colour and a black outline.
- Product (env 2): a product shot. A white background, the digit as a clean object of a random colour
  with a soft grey drop shadow.
- Real World (env 3): a photo. A random crop of the two photographs that ship with scikit-learn
  (china.jpg, flower.jpg) as background, the digit as an object of a random colour lit by a random
  brightness gradient, sensor noise on top.

Each digit is drawn RENDERS times (a small random rotation, scale and shift of its shape, then its own
style draw), so a domain holds four times as many images as digits; a digit appears in one domain only.
Art's digits are cut in two disjoint parts: 30% for validation, 70% for the hidden test.

Everything is drawn with numpy from one seeded generator, so the data are the same on every run. The
seed and the recipe live only in harness/.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage
from sklearn.datasets import load_digits, load_sample_images

from layout import ART_TEST, ART_VAL, ENVIRONMENTS, NUM_CLASSES, TEST_ENV, TRAIN_ENVS  # noqa: F401  (re-exported)

SEED = 20240611
SIZE = 16


def _masks(images: np.ndarray) -> np.ndarray:
    """(n, 16, 16) float masks in [0, 1] from 8x8 digits (pixel values 0..16)."""
    return np.clip(ndimage.zoom(images / 16.0, (1, 2, 2), order=1, mode="nearest", grid_mode=True), 0, 1)


def _hsv_colors(n: int, rng: np.random.Generator, sat: tuple[float, float], val: tuple[float, float]) -> np.ndarray:
    h = rng.random(n)
    s = rng.uniform(*sat, n)
    v = rng.uniform(*val, n)
    k = (np.arange(3)[None] * 0 + np.array([5, 3, 1])[None] + h[:, None] * 6) % 6
    return v[:, None] - v[:, None] * s[:, None] * np.clip(np.minimum(k, 4 - k), 0, 1)  # (n, 3) RGB in [0, 1]


def _compose(background: np.ndarray, mask: np.ndarray, color: np.ndarray) -> np.ndarray:
    """Lay a colour through a mask on a background: (n, 3, H, W)."""
    m = mask[:, None]
    return background * (1 - m) + color[:, :, None, None] * m


def art(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(masks)
    coarse = rng.uniform(0.25, 0.85, (n, 3, 2, 2))
    canvas = ndimage.zoom(coarse, (1, 1, SIZE / 2, SIZE / 2), order=1, mode="nearest", grid_mode=True)
    # brush marks: noise smeared along one direction, the same in every channel
    strokes = ndimage.gaussian_filter(rng.normal(0, 0.12, (n, 1, SIZE, SIZE)), (0, 0, 0.4, 2.0))
    canvas = canvas + strokes
    # the digit painted with a soft brush, darker or lighter than the canvas and of a nearby hue
    shade = np.where(rng.random(n) < 0.5, -1.0, 1.0)[:, None] * rng.uniform(0.25, 0.45, (n, 1))
    paint = np.clip(canvas.mean(axis=(2, 3)) + shade + rng.normal(0, 0.1, (n, 3)), 0, 1)
    brush = ndimage.gaussian_filter(masks, (0, 0.7, 0.7)) * rng.uniform(0.7, 1.0, (n, 1, 1))
    grain = rng.normal(0, 0.03, (n, 1, SIZE, SIZE))
    return _compose(canvas, brush, paint) + grain


def clipart(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(masks)
    shape = (masks > 0.35).astype(float)
    outline = ndimage.binary_dilation(shape > 0, structure=np.ones((1, 3, 3))).astype(float) - shape
    background = np.broadcast_to(_hsv_colors(n, rng, (0.1, 0.3), (0.9, 1.0))[:, :, None, None], (n, 3, SIZE, SIZE))
    image = _compose(background, outline, np.zeros((n, 3)))
    return _compose(image, shape, _hsv_colors(n, rng, (0.8, 1.0), (0.8, 1.0)))


def product(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(masks)
    shift = rng.integers(1, 3, (n, 2))
    shadow = np.stack([np.roll(m, tuple(s), axis=(0, 1)) for m, s in zip(masks, shift)])
    shadow = ndimage.gaussian_filter(shadow, (0, 1.0, 1.0)) * 0.35
    white = np.ones((n, 3, SIZE, SIZE))
    image = _compose(white, shadow, np.full((n, 3), 0.3))
    return _compose(image, masks, _hsv_colors(n, rng, (0.3, 1.0), (0.2, 0.9)))


def _photo_patches(n: int, rng: np.random.Generator) -> np.ndarray:
    photos = [img.astype(float) / 255.0 for img in load_sample_images().images]
    # 4x4 block means of the two photos, then random 16x16 crops: textured, photographic backgrounds
    small = [p[: p.shape[0] // 4 * 4, : p.shape[1] // 4 * 4].reshape(p.shape[0] // 4, 4, p.shape[1] // 4, 4, 3)
             .mean(axis=(1, 3)) for p in photos]
    out = np.empty((n, 3, SIZE, SIZE))
    for i in range(n):
        photo = small[rng.integers(len(small))]
        r, c = rng.integers(photo.shape[0] - SIZE), rng.integers(photo.shape[1] - SIZE)
        out[i] = photo[r:r + SIZE, c:c + SIZE].transpose(2, 0, 1)
    return out


def real_world(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(masks)
    background = _photo_patches(n, rng)
    color = _hsv_colors(n, rng, (0.2, 0.9), (0.3, 1.0))
    angle = rng.uniform(0, 2 * np.pi, n)
    ramp = np.linspace(-1, 1, SIZE)
    light = 1 + 0.3 * (np.cos(angle)[:, None, None] * ramp[None, :, None] + np.sin(angle)[:, None, None] * ramp[None, None, :])
    image = _compose(background, masks, color) * light[:, None]
    return image + rng.normal(0, 0.04, image.shape)


STYLES = (art, clipart, product, real_world)
RENDERS = 4  # style draws per digit: each domain shows each of its digits this many times
ART_VAL_FRACTION = 0.3  # of Art's digits, the validation part; the rest is the hidden test part


def _jitter(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A small random rotation, scale and shift of each mask, so that a digit's renders differ in shape too."""
    n = len(masks)
    angle = rng.uniform(-0.2, 0.2, n)
    scale = rng.uniform(0.9, 1.1, n)
    shift = rng.uniform(-1.0, 1.0, (n, 2))
    centre = (SIZE - 1) / 2
    out = np.empty_like(masks)
    for i in range(n):
        c, s = np.cos(angle[i]) / scale[i], np.sin(angle[i]) / scale[i]
        matrix = np.array([[c, -s], [s, c]])
        offset = centre - matrix @ (centre + shift[i])
        out[i] = ndimage.affine_transform(masks[i], matrix, offset=offset, order=1, mode="constant")
    return np.clip(out, 0, 1)


def _render(style, images: np.ndarray, renders: int, rng: np.random.Generator) -> np.ndarray:
    masks = _jitter(np.repeat(_masks(images), renders, axis=0), rng)
    return np.round(np.clip(style(masks, rng), 0, 1) * 255).astype(np.uint8)


def environments(renders: int = RENDERS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The training domains by name (Clipart, Product, RealWorld) and Art's two parts (ArtVal, ArtTest), each
    (X uint8 (n, 3, 16, 16), y int64 (n,)); every digit is in one of them only, drawn ``renders`` times."""
    digits = load_digits()
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(digits.target))
    images, targets = digits.images[order], digits.target[order].astype(np.int64)
    out = {}
    for e, style in enumerate(STYLES):
        imgs, ys = images[e::len(STYLES)], targets[e::len(STYLES)]
        if e == TEST_ENV:
            n_val = int(round(len(ys) * ART_VAL_FRACTION))
            parts = {ART_VAL: slice(0, n_val), ART_TEST: slice(n_val, None)}
        else:
            parts = {ENVIRONMENTS[e]: slice(None)}
        for name, part in parts.items():
            out[name] = (_render(style, imgs[part], renders, rng), np.repeat(ys[part], renders))
    return out

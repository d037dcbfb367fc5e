"""The data of the robustness_openood task: in-distribution digits and two different OOD sources.

The original task (OpenOOD) trains on CIFAR-10 and detects CIFAR-100 images (near-OOD: new classes
from the same kind of photos) during validation, and SVHN images (far-OOD: another image domain)
in the final test. Nothing can be downloaded here, so the same protocol runs on 8x8 images:

* in-distribution: scikit-learn's handwritten digits (10 classes, pixel values 0..16);
* validation OOD (near): letters, drawn with Pillow's bundled font, jittered, and reduced to 8x8 by
  counting "on" pixels in 4x4 blocks of a 32x32 bitmap, which is how the digits themselves were made;
* test OOD (far, hidden): patches of the two photographs that ship with scikit-learn, binarised at a
  random grey level and reduced the same way.

Every draw comes from a fixed seed of this file; harness/ is never copied into the workspace, so the
test carve, the OOD test source and its parameters are out of the experiment's reach.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from sklearn.datasets import load_digits, load_sample_images

NUM_CLASSES = 10
TEST_SEED = 61_803  # carves the hidden in-distribution test digits
TEST_FRACTION = 0.3
VAL_OOD_SEED = 4_271
N_VAL_OOD = 500
TEST_OOD_SEED = 90_127
N_TEST_OOD = 500
MIX_SEED = 1_729  # shuffles hidden ID and OOD test inputs together

# Letters that a pen could not confuse with a digit (no O, I, l, S, Z, B, g, q, ...).
LETTERS = "ACEFHJKLMNPRTUVWXYacdefhkmnprtuvwxy"


def _blocks(bitmap: np.ndarray) -> np.ndarray:
    """32x32 0/1 bitmap -> 8x8 counts of on-pixels per 4x4 block (0..16), as in the digits data."""
    return bitmap.reshape(8, 4, 8, 4).sum(axis=(1, 3)).astype(np.uint8)


def _fit_in_frame(glyph: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Scale a glyph's bounding box to fill most of a 32x32 frame, centred, as handwritten digits are."""
    box = glyph.getbbox()
    glyph = glyph.crop(box)
    side = int(rng.integers(22, 29))
    scale = side / max(glyph.size)
    size = (max(1, round(glyph.size[0] * scale)), max(1, round(glyph.size[1] * scale)))
    glyph = glyph.resize(size, Image.BILINEAR)
    frame = Image.new("L", (32, 32), 0)
    frame.paste(glyph, ((32 - size[0]) // 2, (32 - size[1]) // 2))
    return frame


def letters(n: int, seed: int) -> np.ndarray:
    """``n`` 8x8 letter images (uint8 0..16): random letter, size, stroke width, slant and rotation."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, 8, 8), dtype=np.uint8)
    for i in range(n):
        char = LETTERS[rng.integers(len(LETTERS))]
        font = ImageFont.load_default(size=48)
        canvas = Image.new("L", (96, 96), 0)
        ImageDraw.Draw(canvas).text((48, 48), char, fill=255, font=font, anchor="mm",
                                    stroke_width=int(rng.integers(0, 3)), stroke_fill=255)
        shear = float(rng.uniform(-0.3, 0.3))
        canvas = canvas.transform(canvas.size, Image.AFFINE, (1, shear, -48 * shear, 0, 1, 0), Image.BILINEAR)
        canvas = canvas.rotate(float(rng.uniform(-12, 12)), resample=Image.BILINEAR)
        frame = _fit_in_frame(canvas, rng)
        out[i] = _blocks((np.asarray(frame) > 110).astype(np.uint8))
    return out


def photo_patches(n: int, seed: int) -> np.ndarray:
    """``n`` 8x8 images (uint8 0..16) cut from scikit-learn's sample photographs."""
    rng = np.random.default_rng(seed)
    photos = [np.asarray(image, dtype=np.float32).mean(axis=2) for image in load_sample_images().images]
    out = np.empty((n, 8, 8), dtype=np.uint8)
    for i in range(n):
        photo = photos[rng.integers(len(photos))]
        side = int(rng.integers(16, 80))
        top = int(rng.integers(0, photo.shape[0] - side))
        left = int(rng.integers(0, photo.shape[1] - side))
        crop = Image.fromarray(photo[top:top + side, left:left + side].astype(np.uint8))
        grey = np.asarray(crop.resize((32, 32), Image.BILINEAR), dtype=np.float32)
        out[i] = _blocks((grey > np.quantile(grey, rng.uniform(0.55, 0.85))).astype(np.uint8))
    return out


def load_sets() -> dict[str, np.ndarray]:
    """Everything one run needs: the visible pool, the near-OOD val set, the hidden mixed test set.

    A ``full`` profile replaces this function (CIFAR-10 / CIFAR-100 / SVHN) and keeps the keys.
    """
    digits = load_digits()
    X = digits.images.astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(TEST_SEED).permutation(len(X))
    n_test = int(round(TEST_FRACTION * len(X)))
    test_idx, visible_idx = np.sort(order[:n_test]), np.sort(order[n_test:])

    test_ood = photo_patches(N_TEST_OOD, TEST_OOD_SEED)
    test_X = np.concatenate([X[test_idx], test_ood])
    test_y = np.concatenate([y[test_idx], np.full(len(test_ood), -1, dtype=np.int64)])
    mix = np.random.default_rng(MIX_SEED).permutation(len(test_X))
    return {
        "visible_X": X[visible_idx],
        "visible_y": y[visible_idx],
        "val_ood_X": letters(N_VAL_OOD, VAL_OOD_SEED),
        "test_X": test_X[mix],
        # class label of each test input, -1 where it is out-of-distribution
        "test_y": test_y[mix],
    }

"""The code encoder most of the suite's benchmark sessions use (FMLBENCH_ENCODER, set by conftest.py).

The real encoders load torch and a transformer at every session's end: ~6 s of processor time, then ~1 s
per distinct text, in each of the suite's few hundred child sessions. A test that is not about the
encoder or its numbers gets this one instead: the whole exploration path still runs (embedding each
step's code, the four metrics, the tables, CSVs and records that show them), on vectors that depend on
every token of the code, so different code still gets different vectors. Tests about the real encoders
or their values ask for them with the ``real_encoder`` fixture.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

DIMENSIONS = 64
TOKEN = re.compile(r"\w+|[^\w\s]")


class HashedTokens:
    """Each text as the sum of its tokens' hashed signs over 64 dimensions (a hashing-trick bag of words)."""

    name = "stand-in (hashed tokens, tests only)"

    def embed(self, texts):
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in TOKEN.findall(text or ""):
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                out[row, digest[0] % DIMENSIONS] += 1.0 if digest[1] & 1 else -1.0
        return out

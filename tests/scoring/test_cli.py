"""``fmlbench score`` on our run records: several agents side by side, seeds, encoders, CSVs."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.scoring.exploration import TransformerEncoder, embed_run
from pytest_fmlbench.record import RunStore

from .records import write_run


@pytest.fixture
def runs_dir(tmp_path):
    """Agents a and b (model m) on tasks t and u, two seeds each."""
    root = tmp_path / "runs"
    for agent, model, gain in (("a", None, 0.1), ("b", "m", 0.2)):
        for seed in (0, 1):
            for task in ("t", "u"):
                write_run(root, [(0.5 + gain, {"config.json": f'{{"lr": {seed + 1}}}'}),
                                 (None, {"algorithm.py": "oops"}),
                                 (0.5 + gain + 0.01 * seed, {"config.json": f'{{"lr": {seed + 2}}}'})],
                          agent=agent, model=model, task=task, seed=seed, test_metric=0.6 + gain + 0.02 * seed)
    return root


def test_several_agents_print_one_table_per_metric_group_with_agents_as_columns(runs_dir, tmp_path, capsys):
    assert main(["score", str(runs_dir), "--encoder", "none", "--csv-dir", str(tmp_path / "csv")]) == 0
    out = capsys.readouterr().out
    for title in ("Raw Performance (test; mean ± SEM over seeds)", "Normalized Improvement (test)", "Exploration",
                  "Generalization: Val-test gap", "Reliability: Valid ratio", "Efficiency", "Cost",
                  "AUP (MLGym performance profiles)"):
        assert title in out, title
    header = next(line for line in out.splitlines() if "Task" in line and "b / m" in line)
    assert header.index("a ") < header.index("b / m")
    assert "0.11 ± 0.01" in out  # NI of a on t: mean of 0.1 and 0.12 over the seeds, SEM 0.01
    assert "Exploration metrics: encoder: none (exploration metrics off)" in out

    csv = tmp_path / "csv"
    per_seed = pd.read_csv(csv / "a__-" / "runs.csv")
    assert len(per_seed) == 4 and sorted(per_seed["seed"]) == [0, 0, 1, 1]
    assert sorted(per_seed.loc[per_seed["task"] == "t", "ni"]) == pytest.approx([0.1, 0.12], abs=1e-12)
    ni = pd.read_csv(csv / "comparison_normalized_improvement.csv", index_col=0)
    assert list(ni.columns) == ["a", "b / m"]
    assert ni.loc["MEAN", "b / m"] == pytest.approx(0.21, abs=1e-12)
    gap = pd.read_csv(csv / "comparison_val_test_gap.csv", index_col=0)
    # a, seed 0: NI_val 0.1, NI 0.1; seed 1: NI_val 0.11, NI 0.12 -> gaps 0 and 0.01
    assert gap.loc["t", "a"] == pytest.approx(0.005, abs=1e-12)
    process = pd.read_csv(csv / "b__m" / "process_metrics.csv", index_col=0)
    assert process.loc["t", "Valid step ratio"] == pytest.approx(2 / 3) and process.loc["t", "Valid step ratio SEM"] == 0
    assert process.loc["MEAN", "First-improvement step"] == 1 and process.loc["MEAN", "Best-improvement step"] == 3
    aup = pd.read_csv(csv / "aup.csv", index_col=0)
    assert list(aup.index) == ["a", "b / m", "declared baseline"]
    assert aup.loc["b / m", "aup_final"] > aup.loc["a", "aup_final"] > aup.loc["declared baseline", "aup_final"]


def test_exploration_comes_from_the_cache_and_every_table_names_the_encoder(runs_dir, tmp_path, capsys):
    # a model folder with no weights: scoring succeeds only if every vector comes from the cache
    model = tmp_path / "tiny-encoder"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 3}))
    encoder = TransformerEncoder("tiny-encoder", model, cache_dir=tmp_path / "cache")
    rng = np.random.default_rng(0)

    class Prefill:
        name = "prefill"

        def embed(self, texts):
            vectors = rng.normal(size=(len(texts), 3)).astype(np.float32)
            for text, vector in zip(texts, vectors):
                if text.strip():
                    encoder._store(text, vector)
            return vectors

    for run_dir in sorted(p.parent for p in runs_dir.rglob("record.json")):
        store = RunStore(run_dir)
        embed_run(Prefill(), [store.read_snapshot(s.snapshot) for s in store.load_steps()],
                  store.read_snapshot("snapshots/baseline.json"))
    argv = ["score", str(runs_dir), "--encoder", str(model), "--cache-dir", str(tmp_path / "cache"),
            "--csv-dir", str(tmp_path / "csv")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert encoder._model is None
    assert "Exploration metrics: encoder: tiny-encoder" in out
    runs = pd.read_csv(tmp_path / "csv" / "runs.csv")
    assert set(runs["encoder"]) == {"tiny-encoder"} and runs["spread"].notna().all() and runs["reach"].notna().all()
    assert (runs["uniqueness"] > 0).all()
    summary = pd.read_csv(tmp_path / "csv" / "comparison_process_metrics.csv", index_col=0)
    assert summary.loc["encoder", "a"] == "tiny-encoder"
    # a second pass answers from the per-run cache with the same numbers
    assert main(argv) == 0
    capsys.readouterr()
    again = pd.read_csv(tmp_path / "csv" / "runs.csv")
    assert again["spread"].tolist() == runs["spread"].tolist()


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["score", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"fmlbench: {tmp_path / 'nowhere'} is not a directory"
    assert main(["score", str(tmp_path)]) == 2
    assert "no run records (record.json) or original results (summary.json)" in capsys.readouterr().err
    (tmp_path / "r").mkdir()
    write_run(tmp_path / "r", [(0.6, {})])
    assert main(["score", str(tmp_path / "r"), "--encoder", "bogus"]) == 2
    assert "expected graphcodebert, minilm, none, auto, a local model folder or module:factory" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "r"), "--graphcodebert", str(tmp_path / "nothing-here")]) == 2
    assert "GraphCodeBERT weights not found locally" in capsys.readouterr().err


def test_no_number_is_cut_at_any_width(runs_dir, capsys):
    """A CI log has no terminal: a table wider than the width is printed whole, never cut with '…'."""
    assert main(["score", str(runs_dir), "--encoder", "none", "--width", "170"]) == 0
    wide = capsys.readouterr().out
    assert main(["score", str(runs_dir), "--encoder", "none", "--width", "40"]) == 0
    narrow = capsys.readouterr().out
    assert "…" not in wide and "…" not in narrow
    cells = lambda text: sorted(re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]\d+)?(?: ± [\d.e+-]+)?", text))
    assert cells(narrow) == cells(wide)  # the same numbers, whole, in the same counts
    assert "Spread" in narrow and "Reach" in narrow  # the process headers are not cut either

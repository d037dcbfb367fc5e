"""On-demand benchmarks of scoring (exploration metrics included), with the offline MiniLM encoder.

    .venv/bin/python -m pytest benchmarks/test_scoring_speed.py --benchmark-only

Targets (issue 7): re-scoring an unchanged run directory takes <= 1 s; embedding a 50-step run takes
<= 30 s on 2 CPU cores. The run is the worst case for the encoder: 50 distinct snapshots of the
privacy_opacus code, each edited at the top, so no 510-token chunk is shared between steps.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_fmlbench.record import RunStore
from pytest_fmlbench.reports.runs import find_run_dirs, load_runs
from pytest_fmlbench.reports.tables import render
from pytest_fmlbench.scoring import Scores
from pytest_fmlbench.scoring.exploration import default_encoder

REPO = Path(__file__).parent.parent
TASK = REPO / "task_suites" / "privacy_opacus"
STEPS = 50


def make_run(root: Path) -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from scoring.records import record, step

    baseline = {name: (TASK / "workspace" / name).read_text()
                for name in ("algorithm.py", "config.json", "split_config.json")}
    store = RunStore(root / "privacy_opacus" / "bench__none__seed0")
    rec = record(task="privacy_opacus", agent="bench", steps_used=STEPS, valid_steps=STEPS, test_metric=0.7,
                 best_val=0.5 + STEPS / 1000)
    rec.baseline_snapshot = store.write_named_snapshot("baseline", baseline)
    store.save(rec)
    for n in range(1, STEPS + 1):
        files = {**baseline, "algorithm.py": f"# step {n}: width {8 * n}\n" + baseline["algorithm.py"]}
        name, sha = store.write_snapshot(n, files)
        s = step(n, 0.5 + n / 1000)
        s.snapshot, s.snapshot_sha256 = name, sha
        store.append_step(s)
    return root


@pytest.fixture
def run_root(tmp_path):
    return make_run(tmp_path / "runs")


def score(root: Path, cache: Path) -> Scores:
    scores = Scores.from_runs(load_runs(find_run_dirs(root)), encoder=default_encoder("minilm", cache_dir=cache))
    render(scores)
    return scores


def test_embedding_a_50_step_run(benchmark, run_root, tmp_path):
    caches = iter(tmp_path / f"cache{i}" for i in range(100))
    scores = benchmark.pedantic(lambda: score(run_root, next(caches)), rounds=1, iterations=1)
    row = scores.runs.iloc[0]
    assert row["encoder"] == "all-minilm-l6-v2" and row["spread"] > 0 and row["reach"] > 0
    assert benchmark.stats.stats.max <= 30, "target: <= 30 s for a 50-step run on 2 cores"


def test_rescoring_an_unchanged_run_dir(benchmark, run_root, tmp_path):
    cache = tmp_path / "cache"
    first = score(run_root, cache)
    again = benchmark(score, run_root, cache)
    assert again.runs["spread"].tolist() == first.runs["spread"].tolist()


def test_rescoring_with_the_command_line(benchmark, run_root, tmp_path):
    """The same, as users run it: a fresh interpreter each time (imports included)."""
    cache = tmp_path / "cache"
    score(run_root, cache)
    argv = [sys.executable, "-m", "pytest_fmlbench.cli", "score", str(run_root), "--encoder", "minilm",
            "--cache-dir", str(cache)]
    result = benchmark.pedantic(lambda: subprocess.run(argv, capture_output=True, text=True, check=True),
                                rounds=3, iterations=1)
    assert "all-minilm-l6-v2" in result.stdout

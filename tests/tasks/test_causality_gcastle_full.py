"""causality_gcastle_full: FML-bench's Causality_gcastle spec, its data drawn as the original draws them, its
metric, the baseline's published SHD, its smoke run offline and the true graph out of agent code's reach."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from full_support import (Attack, FullTask, assert_matches_original, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, copy_task, data_root, fmlbench, needs_bwrap,
                          shared_smoke_attack_run)

from pytest_fmlbench.taskkit import mlp_sem

TASK = FullTask("causality_gcastle")
SPEC = TASK.spec

# SHA-256 of the original's arrays (little-endian int64 DAG, float64 samples), computed by running its
# ml_tasks/Causality_gcastle/train_eval_baseline.py (qrzou/FML-bench d336651) with numpy 2.4.6
ORIGINAL_DAG = "a05304b1fa2ea09f236cdfa1321da94853962474ddd43f4d821a343e7cdad9c3"
ORIGINAL_SAMPLES = {"val": "b77a4a3b037d85f16a7c2ff2c741ade55e0304d334d9159b858f3dbf71ba0e32",
                    "test": "4183dc33412f73bdb4d86e2e1961a1220bc82f139318b8f9a978b32179171f35"}

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the true graph in the
# private folder and anywhere else, and turns a leaked graph into a perfect score (SHD 0).
ATTACK = Attack("algorithm.py", "import numpy as np", attack_payload(
    cache=(), private=("true_dag.npy",), secrets=("true_dag.npy",),
    leaked="true_dag.npy", write='numpy.save(_out / "estimated_dag.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def sha256(array: np.ndarray, dtype: str) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype=dtype).tobytes()).hexdigest()


def prepare(tmp_path, split: str, scale: str = "full"):
    """Run the harness's prepare.py for ``split``; returns the observations and the private true graph."""
    workspace, out, private = (tmp_path / name for name in ("workspace", "out", "private"))
    done = subprocess.run([sys.executable, str(TASK.folder / "harness" / "prepare.py"), "--split", split,
                           "--workspace", str(workspace), "--out", str(out), "--private", str(private),
                           "--scale", scale], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    observed = (workspace / "data" if split == "val" else out) / "X.npy"
    return np.load(observed), np.load(private / "true_dag.npy"), workspace


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC, cpu_only=True)
    assert SPEC.editable == ["algorithm.py"]  # the original's target file
    assert SPEC.data == [] and SPEC.upstream == []  # generated from seeds: nothing to fetch
    # the baseline was reproduced here, and is the original's published value
    assert (SPEC.baseline.source, SPEC.baseline.val, SPEC.baseline.test) == ("measured", 72.0, 71.0)
    assert [c.name for c in SPEC.constraints] == ["dag"]


@pytest.mark.parametrize("split", ["val", "test"])
def test_the_harness_draws_the_originals_graph_and_samples(tmp_path, split):
    X, dag, workspace = prepare(tmp_path, split)
    assert X.shape == (500, 50) and dag.shape == (50, 50) and dag.sum() == 100
    assert sha256(dag, "<i8") == ORIGINAL_DAG and sha256(X, "<f8") == ORIGINAL_SAMPLES[split]
    # the true graph is never written where the experiment reads
    assert not any(p.name == "true_dag.npy" for p in workspace.rglob("*"))


def test_the_smoke_scale_draws_a_small_graph_with_the_same_seeds(tmp_path):
    X, dag, _ = prepare(tmp_path, "val", "smoke")
    assert X.shape == (100, 10) and dag.sum() == 20
    assert np.array_equal(dag, mlp_sem.random_dag(10, 20, 42)) and mlp_sem.topological_order(dag)


def test_the_metric_is_the_originals_shd():
    truth = np.zeros((4, 4), dtype=int)
    truth[0, 1] = truth[1, 2] = truth[2, 3] = 1
    estimate = truth.copy()
    assert mlp_sem.edge_scores(truth, estimate)["shd"] == 0
    estimate[1, 2], estimate[2, 1] = 0, 1  # reversed: one
    assert mlp_sem.edge_scores(truth, estimate)["shd"] == 1
    estimate[0, 3] = 1  # an edge where the pair has none: one more
    assert mlp_sem.edge_scores(truth, estimate)["shd"] == 2
    estimate[0, 1] = 0  # a missing edge: one more
    scores = mlp_sem.edge_scores(truth, estimate)
    assert scores["shd"] == 3 and scores["tpr"] == pytest.approx(1 / 3) and scores["fdr"] == pytest.approx(2 / 3)
    # both directions of a true edge cost nothing more: why the evaluator requires a DAG
    both = truth.copy()
    both[1, 0] = 1
    assert mlp_sem.edge_scores(truth, both)["shd"] == 0


def test_the_evaluator_refuses_a_graph_with_both_directions(tmp_path):
    _, dag, workspace = prepare(tmp_path, "val", "smoke")
    out, result = tmp_path / "out", tmp_path / "result.json"
    out.mkdir()
    estimate = dag.copy()
    parent, child = np.argwhere(dag)[0]
    estimate[child, parent] = 1
    np.save(out / "estimated_dag.npy", estimate)
    done = subprocess.run([sys.executable, str(TASK.folder / "harness" / "evaluate.py"), "--split", "val",
                           "--workspace", str(workspace), "--out", str(out), "--private", str(tmp_path / "private"),
                           "--result", str(result)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(result.read_text())
    assert verdict["datasets"]["synthetic_dag"]["means"]["shd_mean"] == 0.0
    assert [(c["name"], c["ok"]) for c in verdict["constraints"]] == [("dag", False)]


def test_the_baseline_reproduces_the_published_validation_shd(tmp_path):
    """gCastle's NOTEARS through the protected train.py on the original's validation data: SHD 72."""
    _, dag, workspace = prepare(tmp_path, "val")
    for name in ("train.py", "algorithm.py"):
        (workspace / name).write_bytes((TASK.folder / "workspace" / name).read_bytes())
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run([sys.executable, "train.py", "--split", "val", "--out", str(out)], cwd=workspace,
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    scores = mlp_sem.edge_scores(dag, np.load(out / "estimated_dag.npy"))
    assert (scores["shd"], scores["n_est_edges"]) == (SPEC.baseline.val, 32)


def test_the_smoke_run_passes_offline(shared_run):
    # the smoke graph: 10 nodes, 20 edges; a DAG estimate misses at most those and adds at most one edge to
    # each of the other 25 pairs
    record, _ = assert_the_smoke_run_passed(TASK, shared_run, metric_range=(0, 20 + 25))
    (dag,) = record["test_constraints"]
    assert dag["name"] == "dag" and dag["ok"]


@needs_bwrap
def test_agent_code_cannot_reach_the_true_graph(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run, perfect=0.0)


def test_there_is_nothing_to_fetch(pytester, data_root):
    """The data are generated: fetching the task downloads nothing, and fixtures need nothing either."""
    copy_task(pytester, TASK.small_id)
    suite = str(pytester.path / "task_suites")
    done = fmlbench("data", "fetch", "-k", TASK.id, "--suite", suite)
    assert done.returncode == 0 and "fetching 0 artefact(s)" in done.stdout, done.stdout + done.stderr
    assert fmlbench("data", "fixtures", "-k", TASK.id, "--suite", suite, "--root", str(data_root)).returncode == 0
    assert not data_root.exists() or not any(data_root.rglob("*.npy"))

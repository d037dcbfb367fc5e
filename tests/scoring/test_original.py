"""Results folders written by the original FML-bench, built by hand and scored like our runs."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.scoring import Scores
from pytest_fmlbench.scoring.original import OriginalLayoutError, builtin_tasks, find_runs

# the original's declared baselines (ml_tasks/<task>/baseline_results)
OPACUS_VAL, OPACUS_TEST = 0.5893848545414169, 0.5877142857142857
GCASTLE_TEST = 71.0
UNLEARNING_TEST = 1.572462355189384e-167
ALGO = "workspace/Privacy_opacus/opacus/algorithm.py"
SPLIT = "workspace/Privacy_opacus/opacus/split_config.json"


def write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def summary(agent="aide", steps=(), best=None, baseline=OPACUS_VAL, tokens=2_000_000, seconds=7200.0):
    return {"agent": agent, "model": "gpt-5", "baseline_primary_metric": baseline, "total_steps": len(steps),
            "best_val_metric": best, "total_duration_seconds": seconds, "token_usage": {"total_tokens": tokens},
            "val_steps": [{"step_id": i + 1, "val_result": {"success": m is not None}, "primary_metric": m}
                          for i, m in enumerate(steps)]}


def final_test(run: Path, stamp: str, info=None, bug=False) -> None:
    execution = run / f"{stamp}_final_test" / "run_final_test" / "execution_20250101_010000"
    execution.mkdir(parents=True)
    if info is not None:
        write(execution / "test_info.json", info)
    if bug:
        write(execution / "records" / "bug_test_20250101_010001.json", {"phase": "test", "error": {"returncode": 1}})


@pytest.fixture
def results(tmp_path) -> Path:
    """aide on four tasks: a normal run, a crashed test, no valid step, and the -log10 unlearning metric."""
    root = tmp_path / "results" / "aide"
    run = root / "Privacy_opacus" / "20250101_000000"
    write(run / "summary.json", summary(steps=[0.60, None, 0.62], best=0.62))
    for i, lr in enumerate(["0.1", "0.2", "0.3"], start=1):
        write(run / "step_snapshots" / f"step_{i:04d}_code.json",
              {ALGO: f"LR = {lr}\n", SPLIT: '{"val_ratio": 0.2}'})
    final_test(run, "20250101_000000", {"cifar10_dp": {"means": {"test_acc_mean": 0.61}}})
    # an older, deprecated run folder and a later one are not the run the original scores
    write(root / "Privacy_opacus" / "20240101_000000_deprecated" / "summary.json", summary(steps=[0.99], best=0.99))
    write(root / "Privacy_opacus" / "20990101_000000" / "summary.json", summary(steps=[0.99], best=0.99))

    run = root / "Causality_gcastle" / "20250102_000000"
    write(run / "summary.json", summary(steps=[60.0, 50.0], best=50.0, baseline=72.0))
    final_test(run, "20250102_000000", {"synthetic_dag": {"means": {"shd_mean": 40.0}}}, bug=True)

    run = root / "Fairness_fairlearn" / "20250103_000000"
    write(run / "summary.json", summary(steps=[None, None], best=None, baseline=0.18663158848996153))

    run = root / "Unlearning_open_unlearning" / "20250104_000000"
    write(run / "summary.json", summary(steps=[1e-80, 1e-60], best=1e-60, baseline=2.2001332500149066e-71))
    final_test(run, "20250104_000000", {"tofu_unlearning": {"means": {"forget_quality_mean": 1e-100}}})
    return tmp_path / "results"


def by_task(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index("task")


def test_an_original_results_folder_is_scored_by_the_original_rules(results):
    runs = by_task(Scores.from_runs(find_runs(results), encoder=None).runs)
    assert set(runs.index) == {"Privacy_opacus", "Causality_gcastle", "Fairness_fairlearn", "Unlearning_open_unlearning"}

    opacus = runs.loc["Privacy_opacus"]
    assert opacus["seed"] == "20250101_000000" and opacus["agent"] == "aide" and opacus["model"] == "gpt-5"
    assert opacus["raw_test"] == 0.61 and opacus["note"] == "ok"
    assert opacus["ni"] == pytest.approx(0.61 - OPACUS_TEST, abs=1e-15)
    assert opacus["ni_val"] == pytest.approx(0.62 - OPACUS_VAL, abs=1e-15)
    assert opacus["val_test_gap"] == pytest.approx((0.62 - OPACUS_VAL) - (0.61 - OPACUS_TEST), abs=1e-15)
    assert opacus["valid_step_ratio"] == pytest.approx(2 / 3, abs=1e-15)
    g1 = 0.60 - OPACUS_VAL
    g3 = 0.62 - OPACUS_VAL
    assert opacus["auc_steps"] == pytest.approx((g1 + g1 + g3) / 3, abs=1e-15)
    assert opacus["first_improvement_step"] == 1 and opacus["best_improvement_step"] == 3
    assert opacus["late_gain_fraction"] == pytest.approx((g3 - g1) / g3, abs=1e-12)  # G_3 vs G_floor(3/2)=G_1
    assert opacus["tokens_m"] == 2.0 and opacus["wall_clock_h"] == 2.0 and math.isnan(opacus["cost_usd"])

    gcastle = runs.loc["Causality_gcastle"]  # a bug record wins over a test_info.json
    assert gcastle["raw_test"] == GCASTLE_TEST and gcastle["ni"] == 0.0
    assert gcastle["note"] == "test failed -> baseline; original: bug_test"
    assert gcastle["ni_val"] == pytest.approx((72 - 50) / 72, abs=1e-15)  # D = |0 - baseline val 72|

    fair = runs.loc["Fairness_fairlearn"]
    assert fair["note"] == "all val failed -> baseline" and fair["ni"] == 0.0 and fair["val_test_gap"] == 0.0
    assert fair["valid_step_ratio"] == 0.0 and fair["auc_steps"] == 0.0

    unlearning = runs.loc["Unlearning_open_unlearning"]
    base = -math.log10(UNLEARNING_TEST)
    assert unlearning["direction"] == "lower" and unlearning["raw_test"] == pytest.approx(100.0)
    assert unlearning["baseline_test"] == pytest.approx(base, abs=1e-12)
    assert unlearning["ni"] == pytest.approx((base - 100.0) / base, abs=1e-12)
    g = [(-math.log10(2.2001332500149066e-71) - 60) / -math.log10(2.2001332500149066e-71)]
    assert unlearning["auc_steps"] == pytest.approx(g[0] / 2, abs=1e-12)  # step 1 (80) is worse than the baseline


def test_the_ai_scientist_v2_final_test_lives_in_a_sibling_folder(tmp_path):
    task = tmp_path / "ai_scientist_v2" / "Privacy_opacus"
    write(task / "20250101_000000" / "summary.json", summary(agent="ai_scientist_v2", steps=[0.7], best=0.7))
    final_test(task / "20250101_000001", "20250101_000001", {"cifar10_dp": {"means": {"test_acc_mean": 0.65}}})
    run = find_runs(tmp_path)[0]
    assert run.test == 0.65 and run.test_reason == "ok"


def test_exploration_on_original_snapshots_uses_the_checkout_baseline(results, tmp_path):
    checkout = tmp_path / "FML-bench"
    write(checkout / "ml_tasks" / "Privacy_opacus" / "config.json",
          {"repo_dir": "workspace/Privacy_opacus/opacus", "target_files": ["algorithm.py", "split_config.json"]})
    for split, value in (("val", 0.5), ("test", 0.4)):
        write(checkout / "ml_tasks" / "Privacy_opacus" / "baseline_results" / f"{split}_info.json",
              {"cifar10_dp": {"means": {"test_acc_mean": value}}})
    write(checkout / "workspace" / "Privacy_opacus" / "opacus" / "algorithm.py", "LR = 0.0\n")

    class Recording:
        name = "recording"
        texts: list = []

        def embed(self, texts):
            self.texts.extend(texts)
            return np.array([[float(t.split("=")[1])] * 2 for t in texts], dtype=np.float32)

    encoder = Recording()
    runs = [r for r in find_runs(results, fmlbench_root=checkout) if r.task == "Privacy_opacus"]
    assert runs[0].baseline_test == 0.4 and runs[0].baseline_val == 0.5  # the checkout's declared values
    row = Scores.from_runs(runs, encoder=encoder).runs.iloc[0]
    assert encoder.texts == ["LR = 0.1\n", "LR = 0.2\n", "LR = 0.3\n", "LR = 0.0\n"]  # split config left out
    assert row["encoder"] == "recording"
    assert row["reach"] == pytest.approx(0.3 * math.sqrt(2), rel=1e-6)
    assert row["spread"] == pytest.approx((0.1 + 0 + 0.1) * math.sqrt(2) / 3, rel=1e-5)
    # without the checkout there is no baseline code: Reach is unknown, the others still computed
    plain = Scores.from_runs([r for r in find_runs(results) if r.task == "Privacy_opacus"], encoder=encoder).runs
    assert math.isnan(plain["reach"].iloc[0]) and plain["spread"].iloc[0] > 0


def test_unknown_task_is_one_clear_error(tmp_path):
    write(tmp_path / "aide" / "My_task" / "run" / "summary.json", summary(steps=[0.5], best=0.5))
    with pytest.raises(OriginalLayoutError, match="unknown task 'My_task'.*--tasks DIR"):
        find_runs(tmp_path)


def test_fmlbench_score_reads_an_original_folder_and_writes_csvs(results, tmp_path, capsys):
    shutil.copytree(results / "aide", results / "openevolve")
    # a second agent whose opacus test scored better
    info = next((results / "openevolve" / "Privacy_opacus" / "20250101_000000").glob("*_final_test/*/*/test_info.json"))
    write(info, {"cifar10_dp": {"means": {"test_acc_mean": 0.7}}})
    summary_path = results / "openevolve" / "Privacy_opacus" / "20250101_000000" / "summary.json"
    data = json.loads(summary_path.read_text())
    write(summary_path, {**data, "agent": "openevolve"})
    assert main(["score", str(results), "--encoder", "none", "--csv-dir", str(tmp_path / "csv")]) == 0
    out = capsys.readouterr().out
    assert "Normalized Improvement (test)" in out and "aide / gpt-5" in out and "openevolve / gpt-5" in out
    assert "test failed -> baseline; original: bug_test" in " ".join(out.split())
    ni = pd.read_csv(tmp_path / "csv" / "comparison_normalized_improvement.csv", index_col=0)
    assert ni.loc["Privacy_opacus", "openevolve / gpt-5"] == pytest.approx(0.7 - OPACUS_TEST, abs=1e-12)
    assert ni.loc["Privacy_opacus", "aide / gpt-5"] == pytest.approx(0.61 - OPACUS_TEST, abs=1e-12)
    process = pd.read_csv(tmp_path / "csv" / "aide__gpt-5" / "process_metrics.csv", index_col=0)
    assert process.loc["MEAN", "Valid step ratio"] == pytest.approx((2 / 3 + 1 + 0 + 1) / 4, abs=1e-12)
    assert (process["encoder"] == "none (exploration metrics off)").all()


def test_the_builtin_table_covers_the_originals_18_tasks():
    tasks = builtin_tasks()
    assert len(tasks) == 18
    assert tasks["Unlearning_open_unlearning"].transform == "neg_log10"
    assert tasks["Privacy_privacymeter"].worst == 0.5 and tasks["Causality_gcastle"].worst == "baseline"

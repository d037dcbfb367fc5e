"""privacy_privacymeter_full: FML-bench's Privacy_privacymeter spec and protocol (four targets, the original's
val/test split of them and its summary), privacy meter's RMIA, the exported model loaded without running its
code, the smoke run offline, the hidden membership out of agent code's reach, one-line preflight, and its
fetch failing closed."""

import importlib
import json
import re

import numpy as np
import pytest

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("privacy_privacymeter")
FULL, SPEC = TASK.folder, TASK.spec
# the original's train section (ml_tasks/Privacy_privacymeter/cifar10_benchmark.yaml), device aside
ORIGINAL_TRAIN = {"model_name": "wrn28-2", "batch_size": 256, "optimizer": "SGD", "learning_rate": 0.1,
                  "weight_decay": 0, "epochs": 50}

# Runs when train.py imports the trainer, in every val run (the test run imports no editable code): it looks
# for the CIFAR archive, the privacy meter checkout, the auditor's models and the cache's stamps.
ATTACK = Attack("trainers/default_trainer.py", "import torch", attack_payload(
    cache=("smoke/cifar-10-python/cifar-10-python.tar.gz", "smoke/privacy-meter/src"), private=("reference.npz",),
    secrets=("cifar-10-python.tar.gz", "reference.npz", "stamp.json")))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def workspace_driver():
    spec = importlib.util.spec_from_file_location("privacymeter_full_train", FULL / "workspace" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert_edits_the_originals_checkout(SPEC)  # privacy meter's trainer and network
    assert [c.name for c in SPEC.constraints] == ["low_fpr_leakage", "utility_floor"]
    protocol = TASK.harness_module("protocol")
    assert protocol.TRAIN_CONFIG == workspace_driver().TRAIN_CONFIG == ORIGINAL_TRAIN
    assert TASK.harness_module("evaluate").LIMITS == {"val": (0.0, 0.0, 0.610), "test": (0.02, 0.005, 0.600)}
    # run.num_experiments 4, split by postprocess.py's RandomState(42) shuffle: the first 30% val
    assert protocol.TARGETS == workspace_driver().TARGETS == 4
    assert protocol.audited_targets("val") == (1,) and protocol.audited_targets("test") == (0, 2, 3)


def test_a_split_is_summarised_as_the_original_summarises_it():
    """postprocess.py on the original's baseline run (baseline_results/test_info.json): the gap of the three test
    targets' mean AUC is the published test value, and the floor holds for the four targets' mean accuracy
    although one target alone is under it."""
    evaluate = TASK.harness_module("evaluate")
    attacks = [{"AUC": 0.5 + gap, "TPR@0.1%FPR": 0.0, "TPR@0.0%FPR": 0.0} for gap in (0.3203, 0.3180, 0.3258)]
    accuracies = [0.61992, 0.60168, 0.6138, 0.62032]
    means = evaluate.split_means(attacks, accuracies)
    assert means["AUC_gap_mean"] == pytest.approx(SPEC.baseline.test)
    assert means["test_acc_mean"] == pytest.approx(0.61393)
    leak = {"TPR@0.1%FPR": means["TPR@0.1%FPR_mean"], "TPR@0.0%FPR": means["TPR@0.0%FPR_mean"]}
    assert [c.ok for c in evaluate.constraints("val", "full", leak, means["test_acc_mean"])] == [True, True]
    assert [c.ok for c in evaluate.constraints("val", "full", leak, min(accuracies))] == [True, False]


def test_the_originals_constraints_bind_at_full_scale_only():
    constraints = TASK.harness_module("evaluate").constraints
    quiet, loud = {"TPR@0.1%FPR": 0.0, "TPR@0.0%FPR": 0.0}, {"TPR@0.1%FPR": 0.01, "TPR@0.0%FPR": 0.004}
    ok = lambda *args: [c.ok for c in constraints(*args)]  # noqa: E731
    assert ok("val", "full", quiet, 0.610) == [True, True]
    assert ok("val", "full", loud, 0.605) == [False, False]  # val is strict, as the original's postprocess.py
    assert ok("test", "full", loud, 0.605) == [True, True]  # the test tolerates a little
    assert ok("test", "full", {"TPR@0.1%FPR": 0.0, "TPR@0.0%FPR": 0.006}, 0.599) == [False, False]
    assert ok("val", "smoke", loud, 0.1) == [True, True]

def test_members_non_members_and_the_audits_are_disjoint_halves():
    protocol = TASK.harness_module("protocol")
    carving = protocol.carve(50_000, "full")
    assert len(carving.members) == len(carving.non_members) == 25_000
    assert not set(carving.members) & set(carving.non_members)
    val, test = carving.pools["val"], carving.pools["test"]
    assert len(val) == len(test) == 10_000 and not set(val) & set(test)
    trained_on = carving.trained_on(50_000)
    for pool in (val, test):
        assert trained_on[pool, 0].sum() == 5_000  # 5,000 members and 5,000 non-members per audit
    # complementary pairs: every point is inside exactly one model of each pair
    assert (trained_on[:, 0] ^ trained_on[:, 1]).all() and (trained_on[:, 2] ^ trained_on[:, 3]).all()
    assert trained_on[:, 2].sum() == 25_000
    assert np.array_equal(protocol.carve(50_000, "full").members, carving.members)  # seeded


def test_rmia_finds_a_planted_leak_and_not_a_missing_one():
    rmia = TASK.harness_module("rmia")
    rng = np.random.default_rng(0)
    n, m = 2000, 1000
    member, half = rng.random(n) < 0.5, rng.random(n) < 0.5
    trained_on = np.stack([member, ~member, half, ~half], 1)
    base = rng.uniform(0.2, 0.8, n)
    # every model gives its own members a higher probability of their label, by the same factor
    signals = np.stack([np.where(trained_on[:, c], np.minimum(base * 1.25, 1.0), base) for c in range(4)], 1)
    population = np.repeat(rng.uniform(0.2, 0.8, (m, 1)), 4, axis=1)
    a = rmia.tune_offline_a(0, signals, population, trained_on)
    leaky = rmia.attack_results(rmia.run_rmia(0, signals, population, trained_on, 1, a), member)
    assert leaky["AUC"] > 0.95
    signals[:, 0] = base  # a target that treats members like everybody else
    private = rmia.attack_results(rmia.run_rmia(0, signals, population, trained_on, 1, a), member)
    assert abs(private["AUC"] - 0.5) < 0.05


def tiny_model():
    """A small image classifier, made where a test needs it (torch is imported on use, not at collection)."""
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.norm = torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.BatchNorm2d(4)
            self.head = torch.nn.Linear(4, 10)

        def forward(self, x):
            return self.head(torch.nn.functional.gelu(self.norm(self.conv(x))).mean(dim=(2, 3)))

    return Tiny()


def test_the_exported_model_runs_without_its_code_and_unsafe_graphs_are_refused(tmp_path, monkeypatch):
    import torch

    driver, graphs = workspace_driver(), TASK.harness_module("aten_graph")
    monkeypatch.setattr(driver, "EXPORT_BATCH", 8)
    model = tiny_model().eval()
    driver.export(model, tmp_path)
    audited = graphs.AuditedModel(tmp_path, torch.device("cpu"))
    x = torch.randn(8, 3, 32, 32)
    assert audited.batch_size == 8 and torch.allclose(audited(x), model(x), atol=1e-5)

    graph = json.loads((tmp_path / "model_graph.json").read_text())
    first = graph["nodes"][0]
    for op, reason in [("aten.from_file.default", "argument filename"), ("aten.add_.Tensor", "writes to its arguments"),
                       ("aten.empty.memory_format", "uninitialised memory"), ("builtins.open", "not an ATen operator"),
                       ("aten.no_such_op.default", "not an ATen operator of this torch"),
                       ("aten.__class__.mro", "not an ATen operator of this torch")]:
        (tmp_path / "model_graph.json").write_text(json.dumps({**graph, "nodes": [{**first, "op": op}, *graph["nodes"][1:]]}))
        with pytest.raises(graphs.GraphError, match=re.escape(reason)):
            graphs.AuditedModel(tmp_path, torch.device("cpu"))
    (tmp_path / "model_graph.json").write_text(json.dumps(graph))
    torch.save({"weights": torch.nn.Linear(4, 10)}, tmp_path / "model_tensors.pt")  # a pickled module, not tensors
    with pytest.raises(graphs.GraphError, match="not a dict of tensors"):
        graphs.AuditedModel(tmp_path, torch.device("cpu"))


def test_the_smoke_run_passes_offline_on_privacy_meters_files(shared_run):
    data_root = shared_run.data_root
    record, run = assert_the_smoke_run_passed(TASK, shared_run)
    assert record["test_metric"] <= 0.5
    assert [c["name"] for c in record["test_constraints"]] == ["low_fpr_leakage", "utility_floor"]
    assert all(c["ok"] and "not binding" in c["detail"] for c in record["test_constraints"])
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    assert_workspace_holds_the_checkout(shared_run.attack, run, data_root / "smoke" / "privacy-meter" / "src",
                                        SPEC.editable)
    log = (run / "logs" / "step_0001_val.log").read_text()
    assert re.search(r"^Epoch \[1/1\] \| Train Acc: ", log, re.M) and "members: model_name=wrn28-2" in log, log
    # the agent's trainer trained the four targets; val audited target 1, the test 0, 2 and 3, and both splits'
    # utility is the mean over the four
    assert re.findall(r"^Training target model (\d) of 4 on 100 members", log, re.M) == ["0", "1", "2", "3"], log
    verdicts = {split: json.loads((run / "final" / "verdicts" / f"{split}.json").read_text())
                for split in ("val", "test")}
    assert [verdicts[split]["info"]["audited_targets"] for split in ("val", "test")] == [[1], [0, 2, 3]]
    for verdict in verdicts.values():
        accuracies, means = verdict["info"]["test_acc_per_target"], verdict["datasets"]["cifar10"]["means"]
        assert len(accuracies) == 4 and means["test_acc_mean"] == pytest.approx(np.mean(accuracies))
        assert means["AUC_gap_mean"] == pytest.approx(abs(np.mean(verdict["info"]["AUC_per_target"]) - 0.5))
    assert verdicts["val"]["info"]["test_acc_per_target"] == verdicts["test"]["info"]["test_acc_per_target"]


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_auditors_models(shared_run):
    _, run = assert_the_shared_attack_reached_nothing(shared_run, logs=("step_0001_val.log", "final_val.log"))
    assert "ATTACK" not in (run / "logs" / "final_test.log").read_text()  # the test run imports no editable code


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-10-python (CIFAR-10*; 170.5 MB)")


def test_fetch_fails_closed_then_fetches_the_archive_and_privacy_meter_at_its_commit(pytester, shared_run, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. privacy meter comes from a fixture repository: a commit it does
    not hold is refused, its own commit is checked out."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)

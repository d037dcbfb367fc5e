"""generalization_domainbed_officehome_dg_full: the twin that reproduces the original FML-bench's OfficeHome
layout (Dassl's office_home_dg renamed office_home: two folder classes), its paper baseline, the same protected
code as the 65-class task, and its harness on its own smoke fixture (train.py and the run are the 65-class
task's, which its own smoke run covers)."""

import json
import subprocess
import sys

import numpy as np

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import domainbed, officehome

from full_support import FullTask, data_root, fill_smoke_project  # noqa: F401  (data_root: a fixture)

TASK = FullTask("generalization_domainbed_officehome_dg")
SPEC = TASK.spec
DEFAULT = FullTask("generalization_domainbed_officehome")


def test_the_twin_is_the_originals_setting_with_the_papers_values():
    facts = builtin_tasks()[SPEC.original.task]
    assert SPEC.original == DEFAULT.spec.original and SPEC.metric == DEFAULT.spec.metric
    assert SPEC.baseline.source == "paper"
    assert (SPEC.baseline.val, SPEC.baseline.test) == (facts.baseline_val, facts.baseline_test)
    # one OfficeHome in the Lite tables: the 65-class task
    assert "lite" not in SPEC.markers and "lite" in DEFAULT.spec.markers and SPEC.id != DEFAULT.id
    for words in ("office_home_dg", "1gkbf_Kax", "num_classes 2", "generalization_domainbed_officehome_full"):
        assert words in SPEC.description, words
    archive = TASK.artifacts["office-home-dg-zip"]
    assert archive.unpublished and "1gkbf_KaxoBws-GWT3XIPZ7BnkqbAxIFa" in archive.urls[0]
    assert archive.file_name == "office_home_dg.zip" and archive.fixture == "office_home_dg_zip"
    # the rest is the 65-class task's: the same checkout, weights and protected code
    assert [a for a in SPEC.data if a.name != "office-home-dg-zip"] == \
        [a for a in DEFAULT.spec.data if a.name != "office-home-zip"]
    assert (SPEC.editable, SPEC.protected, SPEC.upstream, SPEC.commands) == \
        (DEFAULT.spec.editable, DEFAULT.spec.protected, DEFAULT.spec.upstream, DEFAULT.spec.commands)
    assert (TASK.folder / "workspace" / "train.py").read_bytes() == \
        (DEFAULT.folder / "workspace" / "train.py").read_bytes()


def test_the_harness_cuts_the_two_folder_classes_and_a_constant_train_scores_the_larger_folders_share(tmp_path,
                                                                                                   data_root):
    """The twin's harness on its smoke fixture (fmlbench data fixtures), without a training run: the workspace
    holds the training domains with the labels train (0) and val (1), and predicting "train" for every art image
    scores the share of art's images under train/, which is what the paper's 0.88 / 0.86 come close to."""
    full = fill_smoke_project(tmp_path / "project", TASK.small_id, data_root)
    private, workspace, out = tmp_path / "private", tmp_path / "workspace", tmp_path / "out"
    workspace.mkdir()
    harness = [sys.executable, str(full / "harness" / "prepare.py"), "--private", str(private),
               "--data", str(data_root / "smoke"), "--scale", "smoke"]
    subprocess.run([*harness, "--split", "val", "--workspace", str(workspace)], check=True)
    subprocess.run([*harness, "--split", "test", "--out", str(out)], check=True)
    layout = json.loads((workspace / "data" / "splits.json").read_text())
    assert layout["classes"] == ["train", "val"] and layout["heldout"]["name"] == "art"
    assert [env["name"] for env in layout["train_envs"]] == ["clipart", "product", "real_world"]
    for env in layout["train_envs"]:
        assert {label for part in ("in", "out") for _, label in env[part]} == {0, 1}
        assert all((workspace / "data" / path).is_file() and path.startswith(f"office_home/{env['name']}/")
                   for path, _ in env["in"] + env["out"])
    art = officehome.environments(data_root / "smoke" / "office-home-dg-zip" / "office_home_dg.zip",
                                  officehome.DASSL_DG)[0]
    art_out, art_in = domainbed.holdout_split(len(art.members), 0)
    assert len(list((workspace / "data" / "heldout").iterdir())) == len(art_out)
    assert len(list((out / "test_images").iterdir())) == len(art_in)
    np.save(out / "predictions.npy", np.zeros(len(art_in), dtype=np.int64))
    subprocess.run([sys.executable, str(full / "harness" / "evaluate.py"), "--split", "test", "--out", str(out),
                    "--private", str(private), "--result", str(tmp_path / "result.json")], check=True)
    score = json.loads((tmp_path / "result.json").read_text())["datasets"]["OfficeHome_test_env0"]["means"]
    assert score["avg_acc_mean"] == sum(art.labels[i] == 0 for i in art_in) / len(art_in) > 0.5

"""generalization_domainbed_officehome_full: FML-bench's Generalization_domainbed_officehome spec, DomainBed's
files in the workspace, OfficeHome split as DomainBed splits it, the smoke run offline, the hidden test out of
reach, one-line preflight, fetch failing closed on every artefact."""

import json
import re
import zipfile

import numpy as np

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import domainbed, officehome

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("generalization_domainbed_officehome")
SPEC, ARTIFACTS = TASK.spec, TASK.artifacts

# Runs when train.py imports DomainBed's algorithms.py, in every val and test run: it looks for the archive,
# DomainBed's checkout, the hidden labels and the cache's stamps, and turns leaked test labels into a perfect
# score.
ATTACK = Attack("domainbed/algorithms.py", "import torch.nn.functional as F", attack_payload(
    cache=("smoke/office-home-zip/office_home.zip", "smoke/domainbed/src"), private=("test_labels.npy",),
    secrets=("office_home.zip", "test_labels.npy", "val_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals_but_its_baseline_is_unmeasured():
    """The original's task, metric and bounds; the paper's 0.8832 / 0.8629 measure its two-folder-class layout
    (the twin's), so no value is declared here until `fmlbench baseline --measure` measures one."""
    facts = builtin_tasks()[SPEC.original.task]
    assert (SPEC.metric.key, SPEC.metric.direction, SPEC.original.dataset) == (facts.metric, facts.direction,
                                                                               facts.dataset)
    assert (SPEC.normalization.best, SPEC.normalization.worst) == (facts.best, facts.worst)
    assert "lite" in SPEC.markers and SPEC.id == SPEC.original.task.lower() + "_full"
    assert SPEC.resources.gpus == 1 and all(artifact.fixture for artifact in SPEC.data)
    assert SPEC.baseline.source == "unmeasured" and (SPEC.baseline.val, SPEC.baseline.test) == (None, None)
    assert "65" in SPEC.description and "office_home_dg" in SPEC.description and "num_classes 2" in SPEC.description
    assert_edits_the_originals_checkout(SPEC)  # DomainBed's algorithms.py and networks.py
    assert SPEC.constraints == []  # the original's split is fixed: nothing of it is editable


def test_every_weight_and_data_file_is_pinned_by_the_strongest_published_checksum():
    archive, torchvision_weights, timm_weights = (ARTIFACTS[n] for n in ("office-home-zip", "resnet50-torchvision",
                                                                          "resnet50-ram-timm"))
    # no SHA-256 is published for OfficeHome's archive: the MD5 published for it, nothing weaker
    assert archive.sha256 is None and archive.md5 == "b1c14819770c4448fd5b6d931031c91c"
    assert archive.file_name == "office_home.zip" and "1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC" in archive.urls[0]
    # torchvision's file name carries the first digits of the full SHA-256 declared
    assert torchvision_weights.sha256.startswith("0676ba61") and torchvision_weights.size == 102530333
    assert torchvision_weights.urls[0] == "https://download.pytorch.org/models/resnet50-0676ba61.pth"
    # timm's: only the prefix its file name carries is published
    assert timm_weights.sha256 is None and timm_weights.sha256_prefix == "a26f946b"
    assert timm_weights.file_name == "resnet50_ram-a26f946b.pth"
    # the warm parent never imports timm or huggingface_hub before train.py's settings
    assert not {"timm", "huggingface_hub"} & {name.split(".")[0] for name in SPEC.warm}


def test_the_smoke_run_passes_offline_on_domainbeds_files_and_splits(shared_run):
    data_root = shared_run.data_root
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    workspace = run / "search" / "workspace"
    assert_workspace_holds_the_checkout(shared_run.attack, run, data_root / "smoke" / "domainbed" / "src", (
        "domainbed/algorithms.py", "domainbed/networks.py", "domainbed/lib/fast_data_loader.py"))
    # the training domains and Art's out-split, cut as DomainBed cuts them; Art's in-split is not there
    envs = officehome.environments(data_root / "smoke" / "office-home-zip" / "office_home.zip")
    layout = json.loads((workspace / "data" / "splits.json").read_text())
    assert [env["name"] for env in layout["train_envs"]] == ["Clipart", "Product", "Real World"]
    for env in layout["train_envs"]:
        source = envs[env["env"]]
        held_out, held_in = domainbed.holdout_split(len(source.members), env["env"])
        assert [label for _, label in env["in"]] == [source.labels[i] for i in held_in]
        assert [path.split("/", 1)[1] for path, _ in env["out"]] == \
            [source.members[i].split("/", 1)[1] for i in held_out]
    art_out, art_in = domainbed.holdout_split(len(envs[0].members), 0)
    heldout = sorted((workspace / "data" / "heldout").iterdir())
    assert len(heldout) == len(art_out) and not (workspace / "data" / "office_home" / "Art").exists()
    with zipfile.ZipFile(data_root / "smoke" / "office-home-zip" / "office_home.zip") as zf:
        assert heldout[0].read_bytes() == zf.read(envs[0].members[art_out[0]])
    checkpoints = workspace / "data" / "torch_home" / "hub" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["resnet50-0676ba61.pth", "resnet50_ram-a26f946b.pth"]
    log = (run / "logs" / "step_0001_val.log").read_text()
    assert re.search(r"^step=2 .*env1_in_acc=.*env3_out_acc=", log, re.M), log
    # the test run predicted Art's in-split, which only its out folder held
    assert len(np.load(run / "final" / "out" / "test" / "predictions.npy")) == len(art_in)
    assert len(list((run / "final" / "out" / "test" / "test_images").iterdir())) == len(art_in)


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root,
                                    "office-home-zip (OfficeHome*; size not published)")


def test_fetch_fails_closed_on_each_checksum_then_fetches_what_matches(pytester, shared_run, data_root):
    """Every artefact served from a file:// source holding other bytes (the smoke fixtures) is refused, by the
    archive's MD5, torchvision's SHA-256, timm's SHA-256 prefix and DomainBed's commit, and nothing is kept;
    with those sources' own checksums declared, all four are fetched."""
    assert [a.name for a in SPEC.data] == ["office-home-zip", "resnet50-torchvision", "resnet50-ram-timm", "domainbed"]
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)

"""generalization_domainbed_officehome_full: FML-bench's Generalization_domainbed_officehome spec, DomainBed's
files in the workspace, OfficeHome split as DomainBed splits it, the smoke run offline, the hidden test out of
reach, one-line preflight, fetch failing closed on every artefact."""

import hashlib
import json
import re
import shutil
import zipfile

import numpy as np
import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.taskkit import domainbed, officehome

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "generalization_domainbed_officehome", "generalization_domainbed_officehome_full"
SPEC = load_task(REPO / "task_suites" / SMALL_ID / "full" / "task.yaml").spec
ARTIFACTS = {artifact.name: artifact for artifact in SPEC.data}

# Runs when train.py imports DomainBed's algorithms.py, in every val and test run: it looks for the data
# cache (the test tells it where, through a variable the sandbox lets through), the archive, the hidden
# labels and the cache's stamps, reports what it could read, and turns leaked test labels into a perfect score.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "office-home-zip" / "office_home.zip", _cache / "smoke" / "domainbed" / "src",
              Path.cwd().parent / "private", Path.cwd().parent / "private" / "test_labels.npy"]:
    try:
        _content = os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)
for _root, _dirs, _files in os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [os.path.join(_root, f) for f in _files
               if f in ("office_home.zip", "test_labels.npy", "val_labels.npy", "stamp.json")]
print("ATTACK found:", json.dumps(_found), flush=True)
_leak = next((f for f in _found if f.endswith("test_labels.npy")), None)
if _leak and "test" in sys.argv:
    import numpy
    _truth = numpy.load(_leak)
    _out = Path(sys.argv[sys.argv.index("--out") + 1])
    atexit.register(lambda: numpy.save(_out / "predictions.npy", _truth))
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("domainbed/algorithms.py", "import torch.nn.functional as F\\n",
                                           "import torch.nn.functional as F\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    facts = builtin_tasks()[SPEC.original.task]
    assert tuple(SPEC.editable) == facts.target_files  # DomainBed's algorithms.py and networks.py
    assert SPEC.constraints == []  # the original's split is fixed: nothing of it is editable
    repo = ARTIFACTS["domainbed"]
    assert repo.kind == "git" and repo.commit == SPEC.original.pinned_commit
    (copy,) = SPEC.upstream
    assert copy.artifact == repo.name and all(copy.covers(path) for path in SPEC.editable)


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


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def test_the_smoke_run_passes_offline_on_domainbeds_files_and_splits(pytester, bench, data_root):
    smoke_project(pytester, SMALL_ID, data_root)
    bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and 0 <= record["test_metric"] <= 1
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    workspace = run / "search" / "workspace"
    checkout = data_root / "smoke" / "domainbed" / "src"
    for rel in ("domainbed/algorithms.py", "domainbed/networks.py", "domainbed/lib/fast_data_loader.py"):
        assert (workspace / rel).read_bytes() == (checkout / rel).read_bytes()
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


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(pytester, bench, data_root, write_agent, monkeypatch):
    smoke_project(pytester, SMALL_ID, data_root)
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_CACHE", str(data_root))
    agent = write_agent(ATTACK_AGENT)
    bench(f"--agent={agent}", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    reports = [line for log in ("step_0001_val.log", "final_val.log", "final_test.log")
               for line in re.findall(r"^ATTACK found: (.*)$", (run / "logs" / log).read_text(), re.MULTILINE)]
    assert len(reports) == 3 and all(json.loads(found) == [] for found in reports), reports
    assert record["integrity"] == "ok" and record["test_metric"] < 1.0


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    shutil.copytree(REPO / "task_suites" / SMALL_ID, pytester.path / "task_suites" / SMALL_ID,
                    ignore=shutil.ignore_patterns("__pycache__"))
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "task_suites")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{TASK_ID}: office-home-zip (OfficeHome*; size not published) is not in the data "
                                 f"cache {data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()  # no step, no record


def test_fetch_fails_closed_on_each_checksum_then_fetches_what_matches(pytester, tmp_path, data_root):
    """Every artefact served from a file:// source holding other bytes (the smoke fixtures) is refused, by the
    archive's MD5, torchvision's SHA-256, timm's SHA-256 prefix and DomainBed's commit, and nothing is kept;
    with those sources' own checksums declared, all four are fetched."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixtures = tmp_path / "fixtures" / "smoke"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    by_name = {artifact["name"]: artifact for artifact in spec["data"]}
    for name, artifact in by_name.items():
        fixture = fixtures / name / ("src" if artifact.get("kind") == "git" else ARTIFACTS[name].file_name)
        artifact["urls"] = [fixture.as_uri()]
        if "size" in artifact:
            artifact["size"] = fixture.stat().st_size  # the recorded SHA-256 refuses it, not its size
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1
    for name, expected in (("office-home-zip", "expected b1c14819770c4448fd5b6d931031c91c"),
                           ("resnet50-torchvision", "expected " + ARTIFACTS["resnet50-torchvision"].sha256),
                           ("resnet50-ram-timm", "expected one starting a26f946b"),
                           ("domainbed", SPEC.original.pinned_commit)):
        assert re.search(rf"{name}: failed: .*{expected}", done.stdout), done.stdout
        assert {p.name for p in (data_root / name).iterdir()} <= {".lock"}  # no file, part, stamp or checkout
    for name, artifact in by_name.items():
        stamp = json.loads((fixtures / name / "stamp.json").read_text())
        if name == "office-home-zip":
            artifact["md5"] = hashlib.md5((fixtures / name / "office_home.zip").read_bytes()).hexdigest()
        elif name == "resnet50-ram-timm":  # a prefix is the one the file's name carries
            prefix = stamp["sha256"][:8]
            artifact.update(sha256_prefix=prefix, filename=f"resnet50_ram-{prefix}.pth")
        else:
            artifact.update({key: stamp[key] for key in ("sha256", "size", "commit") if key in stamp})
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(f"{name}: fetched" in done.stdout for name in by_name), done.stdout
    assert (data_root / "office-home-zip" / "office_home.zip").read_bytes() == \
        (fixtures / "office-home-zip" / "office_home.zip").read_bytes()
    assert (data_root / "domainbed" / "src" / "domainbed" / "algorithms.py").is_file()
    assert "office-home-zip: cached" in fmlbench(*args).stdout

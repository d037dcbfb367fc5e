"""privacy_privacymeter_full: FML-bench's Privacy_privacymeter spec and protocol, privacy meter's RMIA, the
exported model loaded without running its code, the smoke run offline, the hidden membership out of agent
code's reach, one-line preflight, and its fetch failing closed."""

import importlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "privacy_privacymeter", "privacy_privacymeter_full"
FULL = REPO / "task_suites" / SMALL_ID / "full"
SPEC = load_task(FULL / "task.yaml").spec
# the original's train section (ml_tasks/Privacy_privacymeter/cifar10_benchmark.yaml), device aside
ORIGINAL_TRAIN = {"model_name": "wrn28-2", "batch_size": 256, "optimizer": "SGD", "learning_rate": 0.1,
                  "weight_decay": 0, "epochs": 50}

# Runs when train.py imports the trainer, in every val run (the test run imports no editable code). It knows
# where the harness keeps the data cache (the test tells it, through a variable the sandbox lets through) and
# looks for the CIFAR archive, the privacy meter checkout, the auditor's models and the cache's own variable;
# it reports what it could read.
PAYLOAD = r'''
import json as _json, os as _os, sys as _sys
from pathlib import Path as _Path
_found = []
_cache = _Path(_os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if _os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "cifar-10-python" / "cifar-10-python.tar.gz", _cache / "smoke" / "privacy-meter" / "src",
              _Path.cwd().parent / "private", _Path.cwd().parent / "private" / "reference.npz"]:
    try:
        _content = _os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", _sys.prefix, _sys.base_prefix)
for _root, _dirs, _files in _os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [_os.path.join(_root, f) for f in _files if f in ("cifar-10-python.tar.gz", "reference.npz", "stamp.json")]
print("ATTACK found:", _json.dumps(_found), flush=True)
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("trainers/default_trainer.py", "import torch\\n",
                                           "import torch\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def harness_module(name: str):
    """One of the harness's modules, imported as the harness does; its generic names (protocol, evaluate...)
    are taken out of sys.modules again, for other tasks' tests that import their own."""
    harness = FULL / "harness"
    sys.path.insert(0, str(harness))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(harness))
        for loaded in [key for key, module in sys.modules.items() if getattr(module, "__file__", None)
                       and Path(module.__file__).parent == harness]:
            del sys.modules[loaded]


def workspace_driver():
    spec = importlib.util.spec_from_file_location("privacymeter_full_train", FULL / "workspace" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    facts = builtin_tasks()[SPEC.original.task]
    assert tuple(SPEC.editable) == facts.target_files  # privacy meter's trainer and network
    (checkout,) = [a for a in SPEC.data if a.kind == "git"]
    assert checkout.commit == SPEC.original.pinned_commit
    (copy,) = SPEC.upstream
    assert copy.artifact == checkout.name and all(copy.covers(path) for path in SPEC.editable)
    assert [c.name for c in SPEC.constraints] == ["low_fpr_leakage", "utility_floor"]
    protocol = harness_module("protocol")
    assert protocol.TRAIN_CONFIG == workspace_driver().TRAIN_CONFIG == ORIGINAL_TRAIN
    assert harness_module("evaluate").LIMITS == {"val": (0.0, 0.0, 0.610), "test": (0.02, 0.005, 0.600)}


def test_the_originals_constraints_bind_at_full_scale_only():
    constraints = harness_module("evaluate").constraints
    quiet, loud = {"TPR@0.1%FPR": 0.0, "TPR@0.0%FPR": 0.0}, {"TPR@0.1%FPR": 0.01, "TPR@0.0%FPR": 0.004}
    ok = lambda *args: [c.ok for c in constraints(*args)]  # noqa: E731
    assert ok("val", "full", quiet, 0.610) == [True, True]
    assert ok("val", "full", loud, 0.605) == [False, False]  # val is strict, as the original's postprocess.py
    assert ok("test", "full", loud, 0.605) == [True, True]  # the test tolerates a little
    assert ok("test", "full", {"TPR@0.1%FPR": 0.0, "TPR@0.0%FPR": 0.006}, 0.599) == [False, False]
    assert ok("val", "smoke", loud, 0.1) == [True, True]

def test_members_non_members_and_the_audits_are_disjoint_halves():
    protocol = harness_module("protocol")
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
    rmia = harness_module("rmia")
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


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4, 10)

    def forward(self, x):
        return self.head(torch.nn.functional.gelu(self.norm(self.conv(x))).mean(dim=(2, 3)))


def test_the_exported_model_runs_without_its_code_and_unsafe_graphs_are_refused(tmp_path, monkeypatch):
    driver, graphs = workspace_driver(), harness_module("aten_graph")
    monkeypatch.setattr(driver, "EXPORT_BATCH", 8)
    model = Tiny().eval()
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
    torch.save({"weights": Tiny()}, tmp_path / "model_tensors.pt")  # a pickled module, not tensors
    with pytest.raises(graphs.GraphError, match="not a dict of tensors"):
        graphs.AuditedModel(tmp_path, torch.device("cpu"))


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def test_the_smoke_run_passes_offline_on_privacy_meters_files(pytester, bench, data_root):
    smoke_project(pytester, SMALL_ID, data_root)
    bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and 0 <= record["test_metric"] <= 0.5
    assert [c["name"] for c in record["test_constraints"]] == ["low_fpr_leakage", "utility_floor"]
    assert all(c["ok"] and "not binding" in c["detail"] for c in record["test_constraints"])
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    checkout = data_root / "smoke" / "privacy-meter" / "src"
    for rel in SPEC.editable:
        assert (run / "search" / "workspace" / rel).read_bytes() == (checkout / rel).read_bytes()
    log = (run / "logs" / "step_0001_val.log").read_text()
    assert re.search(r"^Epoch \[1/1\] \| Train Acc: ", log, re.M) and "members: model_name=wrn28-2" in log, log


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_agent_code_cannot_reach_the_data_cache_or_the_auditors_models(pytester, bench, data_root, write_agent,
                                                                       monkeypatch):
    smoke_project(pytester, SMALL_ID, data_root)
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_CACHE", str(data_root))
    agent = write_agent(ATTACK_AGENT)
    bench(f"--agent={agent}", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    reports = [line for log in ("step_0001_val.log", "final_val.log")
               for line in re.findall(r"^ATTACK found: (.*)$", (run / "logs" / log).read_text(), re.MULTILINE)]
    assert len(reports) == 2 and all(json.loads(found) == [] for found in reports), reports
    assert "ATTACK" not in (run / "logs" / "final_test.log").read_text()  # the test run imports no editable code
    assert record["integrity"] == "ok" and record["status"] == "finished"


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    shutil.copytree(REPO / "task_suites" / SMALL_ID, pytester.path / "task_suites" / SMALL_ID,
                    ignore=shutil.ignore_patterns("__pycache__"))
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "task_suites")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{TASK_ID}: cifar-10-python (CIFAR-10*; 170.5 MB) is not in the data cache "
                                 f"{data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()  # no step, no record


def test_fetch_fails_closed_then_fetches_the_archive_and_privacy_meter_at_its_commit(pytester, tmp_path, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. privacy meter comes from a fixture repository: a commit it does
    not hold is refused, its own commit is checked out."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixtures = tmp_path / "fixtures" / "smoke"
    archive = fixtures / "cifar-10-python" / "cifar-10-python.tar.gz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    archive_spec, repo_spec = spec["data"]
    archive_spec.update(urls=[archive.as_uri()], size=archive.stat().st_size)  # the recorded checksum, other bytes
    repo_spec.update(urls=[(fixtures / "privacy-meter" / "src").as_uri()])  # the pinned commit is not in it
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1
    assert re.search(r"cifar-10-python: failed: cifar-10-python: not fetched, nothing kept: .*expected "
                     + SPEC.data[0].sha256, done.stdout), done.stdout
    assert re.search(r"privacy-meter: failed: .*" + SPEC.data[1].commit, done.stdout), done.stdout
    assert not (data_root / "cifar-10-python" / "cifar-10-python.tar.gz").exists()
    assert not (data_root / "privacy-meter" / "src").exists()
    for artifact in (archive_spec, repo_spec):
        stamp = json.loads((fixtures / artifact["name"] / "stamp.json").read_text())
        artifact.update({key: stamp[key] for key in ("sha256", "size", "commit") if key in stamp})
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0 and "cifar-10-python: fetched" in done.stdout and "privacy-meter: fetched" in done.stdout, \
        done.stdout + done.stderr
    assert (data_root / "cifar-10-python" / "cifar-10-python.tar.gz").read_bytes() == archive.read_bytes()
    assert (data_root / "privacy-meter" / "src" / "trainers" / "default_trainer.py").is_file()
    assert "privacy-meter: cached" in fmlbench(*args).stdout

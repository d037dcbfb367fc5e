"""task.yaml's ``kit``: a task folder keeps one source of the code its harness shares with its workspace.

Every fresh workspace receives the kit's modules at the paths ``kit`` names (an editable copy is the agent's
from then on, a protected one is hashed like any protected file), the task's fingerprint covers them, warm
learning counts them as the workspace's own modules, and a kit declared wrong is one line at collection.
"""

import re
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_fmlbench import spec as spec_module
from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import TASKKIT, TaskSpecError, load_task
from pytest_fmlbench.workspace import Workspace, copy_from_kit

from conftest import REPO

TOY = REPO / "tests" / "data" / "toy_task"
SMALL_TASKS = sorted(p.parent for p in (REPO / "task_suites").glob("*/task.yaml"))
KIT = {"views.py": "batched_views", "lib/encoder.py": "cifar_resnet"}


def toy_with(tmp_path: Path, **changes) -> Path:
    """The toy task in tmp_path with task.yaml's fields updated; returns its task.yaml."""
    folder = tmp_path / "toy_task"
    shutil.copytree(TOY, folder, ignore=shutil.ignore_patterns("__pycache__"))
    raw = yaml.safe_load((folder / "task.yaml").read_text())
    raw.update(changes)
    (folder / "task.yaml").write_text(yaml.safe_dump(raw))
    return folder / "task.yaml"


@pytest.fixture
def toy_kit(tmp_path):
    raw = yaml.safe_load((TOY / "task.yaml").read_text())
    return load_task(toy_with(tmp_path, kit=KIT, editable=[*raw["editable"], "views.py"],
                              protected=[*raw["protected"], "lib/*.py"]))


def test_a_fresh_workspace_holds_the_kit_copies(tmp_path, toy_kit):
    workspace = Workspace.create(toy_kit, tmp_path / "search", scrubbed_env(), tmp_path / "logs", sandboxed=False)
    for rel, module in KIT.items():
        assert (workspace.path / rel).read_bytes() == (TASKKIT / f"{module}.py").read_bytes(), rel
    assert workspace.editor.read()["views.py"] == (TASKKIT / "batched_views.py").read_text()
    manifest = workspace.take_manifest()
    assert manifest.hashes["workspace/lib/encoder.py"]  # protected, hashed like the task's own files
    assert "workspace/views.py" not in manifest.hashes  # editable: the agent's from now on


@pytest.mark.parametrize("folder", SMALL_TASKS, ids=lambda p: p.name)
def test_each_tasks_kit_copies_are_its_workspace_files(tmp_path, folder):
    """What copy_from_kit writes is what a task declares, and the task folder holds no second copy."""
    task = load_task(folder / "task.yaml")
    copy_from_kit(task, tmp_path)
    copied = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert copied == sorted(task.spec.kit)
    for rel, module in task.spec.kit.items():
        assert (tmp_path / rel).read_bytes() == (TASKKIT / f"{module}.py").read_bytes()
        assert not (folder / "workspace" / rel).exists()
        assert rel in task.spec.editable or any(Path(rel).match(glob) for glob in task.spec.protected), rel


def test_the_fingerprint_covers_the_kit_sources(tmp_path, monkeypatch, toy_kit):
    before = toy_kit.fingerprint
    kit = tmp_path / "kit"
    shutil.copytree(TASKKIT, kit, ignore=shutil.ignore_patterns("__pycache__"))
    (kit / "batched_views.py").write_text((kit / "batched_views.py").read_text() + "# changed\n")
    monkeypatch.setattr(spec_module, "TASKKIT", kit)
    assert load_task(toy_kit.root / "task.yaml").fingerprint != before


def test_warm_learning_counts_the_kit_copies_as_the_workspaces_own(toy_kit):
    learned = dict(warm.learn_imports(toy_kit.workspace_dir, toy_kit.kit_files))
    assert "torch.nn.functional" in learned and "pydantic" in learned  # what the copies import
    assert not {"views", "lib"} & {module.partition(".")[0] for module in learned}
    assert warm.kit_module_names(KIT) == {"views", "lib"}


@pytest.mark.parametrize("kit, problem", [
    ({"views.py": "no_such_module"}, "field 'kit': 'no_such_module' is not a module of pytest_fmlbench.taskkit"),
    ({"../views.py": "batched_views"}, "field 'kit': '../views.py' must be a relative path inside the workspace"),
    ({"train.py": "batched_views"}, "field 'kit': 'train.py' is also in workspace/; keep one source (the kit's)"),
])
def test_a_kit_declared_wrong_is_one_line(tmp_path, kit, problem):
    with pytest.raises(TaskSpecError, match=re.escape(f"task.yaml: {problem}")):
        load_task(toy_with(tmp_path, kit=kit))


def test_an_editable_file_must_exist_or_come_from_the_kit(tmp_path):
    raw = yaml.safe_load((TOY / "task.yaml").read_text())
    with pytest.raises(TaskSpecError, match="field 'editable': 'views.py' does not exist in workspace/"):
        load_task(toy_with(tmp_path, editable=[*raw["editable"], "views.py"]))
    shutil.rmtree(tmp_path / "toy_task")
    assert load_task(toy_with(tmp_path, editable=[*raw["editable"], "views.py"], kit={"views.py": "batched_views"}))


def test_warm_may_not_name_a_kit_copy(tmp_path):
    with pytest.raises(TaskSpecError, match="field 'warm': 'views' is a module of the task's workspace"):
        load_task(toy_with(tmp_path, warm=["numpy", "views"], kit={"views.py": "batched_views"},
                           editable=["algorithm.py", "config.json", "split_config.json", "views.py"]))

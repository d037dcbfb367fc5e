"""task.yaml validation: a malformed spec fails with one line naming the file, the field and the problem."""

import shutil

import pytest
import yaml

from pytest_fmlbench.spec import TaskSpecError, load_task

from conftest import DATA


@pytest.fixture
def task_dir(tmp_path):
    shutil.copytree(DATA / "toy_task", tmp_path / "toy_task")
    return tmp_path / "toy_task"


def mutate(task_dir, change):
    path = task_dir / "task.yaml"
    raw = yaml.safe_load(path.read_text())
    change(raw)
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_toy_spec_loads(task_dir):
    task = load_task(task_dir / "task.yaml")
    assert task.spec.metric.direction == "higher"
    assert task.spec.knobs.space["epochs"].type == "int"
    assert task.spec.baseline.tolerance is None  # a task reproduces its baseline exactly unless it says otherwise


def test_a_baseline_declares_how_far_other_cpus_may_land(task_dir):
    path = mutate(task_dir, lambda r: r["baseline"].update(tolerance={"val": 0.02, "test": 0.0}))
    tolerance = load_task(path).spec.baseline.tolerance
    assert (tolerance.val, tolerance.test) == (0.02, 0.0)


@pytest.mark.parametrize(
    "change, field, problem",
    [
        (lambda r: r.pop("metric"), "metric", "Field required"),
        (lambda r: r["metric"].update(direction="up"), "metric.direction", "'higher' or 'lower'"),
        (lambda r: r["commands"].update(val="python train.py {splitt}"), "commands.val", "unknown placeholder"),
        (lambda r: r.update(timeout_s=-1), "timeout_s", "greater than 0"),
        (lambda r: r.update(editable=["../escape.py"]), "editable", "relative path inside the workspace"),
        (lambda r: r["editable"].append("missing.py"), "editable", "does not exist in workspace/"),
        (lambda r: r.update(protected=["nothing/*.bin"]), "protected", "matches no file"),
        (lambda r: r.update(id="other_name"), "id", "must match the folder name"),
        (lambda r: r["knobs"].update(file="train.py"), "knobs", "not an editable file"),
        (lambda r: r.update(surprise=1), "surprise", "Extra inputs are not permitted"),
        (lambda r: r["knobs"]["space"]["lr"].update(low=0), "knobs.space.lr", "low > 0"),
        (lambda r: r["baseline"].update(tolerance={"val": -0.1, "test": 0.1}), "baseline.tolerance.val",
         "greater than or equal to 0"),
        (lambda r: r["baseline"].update(tolerance={"val": 0.1}), "baseline.tolerance.test", "Field required"),
    ],
)
def test_malformed_spec_is_one_line(task_dir, change, field, problem):
    path = mutate(task_dir, change)
    with pytest.raises(TaskSpecError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert f"'{field}'" in message
    assert problem in message


def test_invalid_yaml_names_the_line(task_dir):
    path = task_dir / "task.yaml"
    path.write_text("id: toy_task\nmetric: [unclosed\n")
    with pytest.raises(TaskSpecError, match=r"task.yaml: line \d+ invalid YAML"):
        load_task(path)


def test_collection_reports_a_bad_spec_in_one_line(pytester, toy, bench):
    mutate(toy, lambda r: r["metric"].update(direction="sideways"))
    result = bench("--collect-only", "-q", "--agent=baseline", "toy_task")
    result.stdout.fnmatch_lines(["*toy_task/task.yaml: field 'metric.direction': Input should be 'higher' or 'lower'*"])
    assert "Traceback" not in result.stdout.str()
    assert result.ret != 0


@pytest.fixture
def full_dir(tmp_path):
    """A copy of a full-profile task in its place: <small id>/full/."""
    from conftest import REPO

    shutil.copytree(REPO / "task_suites" / "privacy_opacus" / "full", tmp_path / "privacy_opacus" / "full",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "privacy_opacus" / "full"


def test_a_full_task_loads_with_its_artefacts(full_dir):
    spec = load_task(full_dir / "task.yaml").spec
    assert spec.id == "privacy_opacus_full" and spec.profile == "full"
    assert spec.data[0].file_name == "cifar-10-python.tar.gz" and spec.baseline.source == "paper"


@pytest.mark.parametrize(
    "change, field, problem",
    [
        (lambda r: r.pop("original"), "(top level)", "must declare original"),
        (lambda r: r["resources"].pop("gpus"), "(top level)", "must declare resources.gpus"),
        (lambda r: r["resources"].pop("gpu_memory_gb"), "(top level)", "must declare resources.gpu_memory_gb"),
        (lambda r: r["resources"].update(gpus=0), "(top level)", "uses no GPU"),
        (lambda r: r["baseline"].pop("note"), "baseline", "need a note"),
        (lambda r: r["baseline"].update(source="measured"), "(top level)", "name the hardware"),
        (lambda r: r["data"][0].pop("sha256"), "data.0", "needs sha256 and size"),
        (lambda r: r["data"][0].update(urls=["ftp://example.invalid/x"]), "data.0.urls", "scheme"),
        (lambda r: r["data"][0].update(gated=True), "data.0", "token_env"),
        (lambda r: r["data"].append(dict(r["data"][0])), "(top level)", "share a name"),
        (lambda r: r["commands"].update(val="{python} train.py --data {data}"), "commands.val", "only the harness"),
        (lambda r: r.update(id="privacy_opacus"), "id", "'privacy_opacus_full'"),
    ],
)
def test_malformed_full_spec_is_one_line(full_dir, change, field, problem):
    path = mutate(full_dir, change)
    with pytest.raises(TaskSpecError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message and f"'{field}'" in message and problem in message, message


def test_a_full_task_may_run_on_cpus(full_dir):
    """Originals such as fairlearn's run on CPUs: gpus: 0, declared, with no GPU memory, is a full task too."""
    path = mutate(full_dir, lambda r: (r["resources"].update(gpus=0), r["resources"].pop("gpu_memory_gb")))
    spec = load_task(path).spec
    assert spec.resources.gpus == 0 and spec.resources.gpu_memory_gb is None


def test_a_small_task_cannot_declare_artefacts(task_dir):
    path = mutate(task_dir, lambda r: r.update(data=[{"name": "x", "urls": ["https://example.invalid/x"],
                                                      "sha256": "0" * 64, "size": 1, "description": "x"}]))
    with pytest.raises(TaskSpecError, match="belong to full-profile tasks"):
        load_task(path)


@pytest.mark.parametrize(
    "upstream, problem",
    [
        ([{"artifact": "cifar-10-python", "paths": ["algorithm.py"]}], "not one of the task's git artefacts"),
        ([{"artifact": "cifar-10-python", "paths": ["../outside.py"]}], "relative path inside the checkout"),
        ([{"artifact": "cifar-10-python", "paths": []}], "at least 1 item"),
    ],
)
def test_upstream_files_come_from_a_git_artefact_of_the_task(full_dir, upstream, problem):
    path = mutate(full_dir, lambda r: r.update(upstream=upstream))
    with pytest.raises(TaskSpecError, match=problem) as info:
        load_task(path)
    assert "\n" not in str(info.value)


def test_editable_files_may_arrive_from_upstream_but_nothing_else_may_be_missing(full_dir):
    repo = {"name": "upstream", "kind": "git", "urls": ["https://example.invalid/upstream.git"], "commit": "0" * 40,
            "fixture": "domainbed_repo", "description": "an upstream repository"}

    def declare(editable: list[str]):
        def change(raw):
            raw["data"] = [a for a in raw["data"] if a["name"] != "upstream"] + [repo]
            raw.update(editable=editable, upstream=[{"artifact": "upstream", "paths": ["pkg/lib", "pkg/method.py"]}])
        return change

    assert load_task(mutate(full_dir, declare(["pkg/method.py", "pkg/lib/helper.py"]))).spec.upstream[0].paths
    with pytest.raises(TaskSpecError, match="'pkg/other.py' does not exist in workspace/"):
        load_task(mutate(full_dir, declare(["pkg/method.py", "pkg/other.py"])))

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

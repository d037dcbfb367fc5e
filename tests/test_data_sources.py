"""Data sets that ship inside installed packages stay out of the experiment's reach.

Many tasks carve their hidden test split out of scikit-learn's bundled digits (or its sample photos,
or statsmodels' tables). Inside the sandbox those files must be unreadable, by every route: the
library's loader, the file's path, a search of site-packages. The harness, outside, still reads them.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import REPO, load_record
from pytest_fmlbench import isolation, scratch
from pytest_fmlbench.isolation import package_data
from pytest_fmlbench.isolation.package_data import Resource, ResourceError
from pytest_fmlbench.spec import TaskSpecError, load_task

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

DIGITS = "sklearn:datasets/data/digits.csv.gz"


def _sklearn_file(*parts: str) -> str:
    import importlib.util

    root = importlib.util.find_spec("sklearn").submodule_search_locations[0]
    return os.path.realpath(os.path.join(root, *parts))


# ---------------------------------------------------------------- resources and their validation

@pytest.mark.parametrize("text, message", [
    ("sklearn", "is not 'package:path/inside/it'"),
    ("sklearn:", "is not 'package:path/inside/it'"),
    ("scikit-learn:datasets", "is not 'package:path/inside/it'"),
    ("sklearn:/etc/passwd", "must be relative and inside the package"),
    ("sklearn:datasets/../../numpy", "must be relative and inside the package"),
])
def test_malformed_resources_are_refused(text, message):
    with pytest.raises(ResourceError, match=re.escape(message)):
        Resource.parse(text)


def test_a_resource_is_found_where_the_interpreter_imports_the_package():
    assert package_data.locate(Resource.parse(DIGITS)) == [_sklearn_file("datasets", "data", "digits.csv.gz")]


@pytest.mark.parametrize("text, message", [
    ("no_such_package_zz:data.csv", "unknown package 'no_such_package_zz'"),
    ("sklearn:datasets/data/no_such_file.csv", "no file or folder 'datasets/data/no_such_file.csv' in package 'sklearn'"),
    ("typing_extensions:x.csv", "'typing_extensions' is a single module, not a package holding files"),
])
def test_unknown_packages_and_missing_resources_are_one_line(text, message):
    with pytest.raises(ResourceError, match=re.escape(message)) as info:
        package_data.check(text)
    assert "\n" not in str(info.value)


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An importable package with code and data files, shown to the sandbox as if installed."""
    site = tmp_path / "site"
    pkg = site / "fakepkg"
    (pkg / "data" / "sub").mkdir(parents=True)
    (pkg / "code_only").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "__init__.py").write_text("LOADER = 1\n")
    (pkg / "data" / "table.csv").write_text("1,2,3\n")
    (pkg / "data" / "sub" / "images.npy").write_bytes(b"\x93NUMPY")
    (pkg / "data" / "_native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (pkg / "code_only" / "__init__.py").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.csv").write_text("labels\n")
    (pkg / "data" / "linked").symlink_to(elsewhere)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(package_data, "_visible_trees", lambda: (str(tmp_path),))
    return pkg


def test_a_folder_keeps_its_code_and_loses_its_data(fake_package):
    masks = package_data.masks(["fakepkg:data"])
    assert str(fake_package / "data") in masks.folders
    # a file inside a hidden folder needs no mask of its own
    assert package_data.masks(["fakepkg:data", "fakepkg:data/table.csv"]).files == masks.files
    args = masks.binds()
    copy = Path(args[args.index(str(fake_package / "data")) - 1])
    kept = sorted(str(p.relative_to(copy)) for p in copy.rglob("*"))
    assert kept == ["__init__.py", "_native.cpython-311-x86_64-linux-gnu.so", "sub"]
    assert (copy / "__init__.py").read_text() == "LOADER = 1\n"


def test_a_code_file_named_on_its_own_is_unreadable_even_inside_a_hidden_folder(fake_package):
    masks = package_data.masks(["fakepkg:data", "fakepkg:data/__init__.py"])
    assert str(fake_package / "data") in masks.folders
    assert str(fake_package / "data" / "__init__.py") in masks.files


def test_a_file_is_made_unreadable(fake_package):
    masks = package_data.masks(["fakepkg:data/table.csv"])
    assert masks.files == (str(fake_package / "data" / "table.csv"),)
    args = masks.binds()
    i = args.index(str(fake_package / "data" / "table.csv"))
    assert args[i - 2:i] == ["--ro-bind", "/dev/null"]


def test_a_shadowed_copy_of_the_package_is_hidden_too(fake_package, tmp_path, monkeypatch):
    second = tmp_path / "second_site" / "fakepkg" / "data"
    shutil.copytree(fake_package / "data", second, symlinks=True)
    monkeypatch.syspath_prepend(str(tmp_path / "second_site"))
    assert set(package_data.locate(Resource.parse("fakepkg:data"))) == {str(fake_package / "data"), str(second)}
    assert {str(fake_package / "data"), str(second)} <= set(package_data.masks(["fakepkg:data"]).folders)


def test_a_folder_of_code_only_is_a_declaration_error(fake_package):
    with pytest.raises(ResourceError, match="a folder of code only, no data to hide"):
        package_data.check("fakepkg:code_only")


def test_bundled_data_sets_are_hidden_by_default():
    folders = package_data.masks().folders
    assert _sklearn_file("datasets", "data") in folders
    assert _sklearn_file("datasets", "images") in folders


def test_the_masks_come_after_every_bind_that_could_show_the_data_again(tmp_path):
    workspace, out = tmp_path / "w", tmp_path / "o"
    view = isolation.ExperimentView(workspace, out, [workspace / "train.py"], [], hide_data=(DIGITS, "sklearn:datasets/descr/digits.rst"))
    argv = isolation.bwrap_argv(view, ["true"])
    digits_folder = argv.index(_sklearn_file("datasets", "data"))
    descr = argv.index(_sklearn_file("datasets", "descr", "digits.rst"))
    assert argv[descr - 2:descr] == ["--ro-bind", "/dev/null"]
    last_bind = max(i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind") and argv[i + 1] != "/dev/null"
                    and not argv[i + 1].startswith(scratch.folder()))
    assert argv[last_bind + 1] == str(out)
    assert last_bind < digits_folder < argv.index("--remount-ro") and descr < argv.index("--remount-ro")


def test_a_declared_resource_that_vanished_refuses_the_sandbox(tmp_path):
    view = isolation.ExperimentView(tmp_path, tmp_path, [], [], hide_data=("sklearn:datasets/data/gone.csv",))
    with pytest.raises(isolation.SandboxUnavailable, match="the task's data cannot be hidden from the experiment"):
        isolation.bwrap_argv(view, ["true"])


def _toy_with_sandbox(tmp_path: Path, sandbox) -> Path:
    task = tmp_path / "toy_task"
    shutil.copytree(REPO / "tests" / "data" / "toy_task", task)
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["sandbox"] = sandbox
    (task / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return task / "task.yaml"


@pytest.mark.parametrize("sandbox, message", [
    ({"hide": ["sklearn"]}, "field 'sandbox.hide': 'sklearn' is not 'package:path/inside/it'"),
    ({"hide": ["no_such_package_zz:data.csv"]}, "field 'sandbox.hide': no_such_package_zz:data.csv: unknown package"),
    ({"hide": ["sklearn:datasets/data/digitz.csv.gz"]}, "field 'sandbox.hide': sklearn:datasets/data/digitz.csv.gz: no file or folder"),
    ({"hidden": []}, "field 'sandbox.hidden': Extra inputs are not permitted"),
])
def test_task_yaml_errors_are_one_line(tmp_path, sandbox, message):
    with pytest.raises(TaskSpecError) as info:
        load_task(_toy_with_sandbox(tmp_path, sandbox))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_valid_declaration_loads(tmp_path):
    task = load_task(_toy_with_sandbox(tmp_path, {"hide": [DIGITS, "sklearn:datasets/images"]}))
    assert task.spec.sandbox.hide == [DIGITS, "sklearn:datasets/images"]


# the calls and names by which a harness reads bundled data, and the resource each one reads
HARNESS_READS = {
    r"load_digits|digits\.csv": DIGITS,
    r"load_sample_images?": "sklearn:datasets/images",
    r"statsmodels\.datasets import (\w+)": "statsmodels:datasets/{0}",
}


@pytest.mark.parametrize("task_yaml", sorted((REPO / "task_suites").glob("*/task.yaml")), ids=lambda p: p.parent.name)
def test_every_task_declares_the_bundled_data_its_harness_reads(task_yaml):
    raw = yaml.safe_load(task_yaml.read_text())
    assert "sandbox" in raw and "hide" in raw["sandbox"], "declare sandbox.hide (an empty list if nothing is bundled)"
    declared = load_task(task_yaml).spec.sandbox.hide
    source = "\n".join(p.read_text() for p in sorted((task_yaml.parent / "harness").glob("*.py")))
    for pattern, resource in HARNESS_READS.items():
        for match in re.finditer(pattern, source):
            expected = resource.format(*match.groups())
            assert expected in declared, f"harness reads {match.group(0)!r}: declare {expected!r}"


# ---------------------------------------------------------------- inside a real sandbox

@needs_bwrap
def test_inside_the_sandbox_bundled_data_is_gone_and_its_packages_still_import(tmp_path):
    workspace, out = tmp_path / "workspace", tmp_path / "out"
    workspace.mkdir()
    out.mkdir()
    view = isolation.ExperimentView(workspace, out, [], [REPO], hide_data=(DIGITS, "sklearn:datasets/descr/digits.rst"))
    probe = textwrap.dedent(f"""
        import sklearn.datasets as d, statsmodels.datasets.anes96 as anes
        for name, load in [("digits", d.load_digits), ("photos", d.load_sample_images), ("anes96", anes.load_pandas)]:
            try:
                load()
                print("READ", name)
            except OSError as exc:
                print("refused", name, type(exc).__name__)
        for path in [{_sklearn_file("datasets", "data", "digits.csv.gz")!r}, {_sklearn_file("datasets", "descr", "digits.rst")!r}]:
            try:
                open(path, "rb").read()
                print("READ", path)
            except OSError as exc:
                print("refused", type(exc).__name__)
    """)
    argv = isolation.bwrap_argv(view, [sys.executable, "-c", probe])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=isolation.sandbox_env(dict(os.environ)))
    assert done.returncode == 0, done.stderr
    assert "READ" not in done.stdout
    assert done.stdout.split("\n")[:5] == [
        "refused digits FileNotFoundError", "refused photos FileNotFoundError", "refused anes96 FileNotFoundError",
        "refused FileNotFoundError", "refused PermissionError"]
    # outside the sandbox (where the harness runs) nothing changed
    from sklearn.datasets import load_digits

    assert load_digits().data.shape == (1797, 64)


# Appended to algorithm.py: runs in every val and test experiment, before the method. It tries every
# route to the bundled originals of the hidden test split (the digits, and the photographs the hidden
# OOD inputs are cut from) and prints what it could read. Documentation and code files are not data.
PROBE = r'''
import importlib.util as _ilu, os as _os, site as _site, sys as _sys
_found = []
try:
    from sklearn.datasets import load_digits as _ld, load_sample_images as _ls
    _found.append(f"load_digits {_ld().data.shape}")
except Exception as _exc:
    print("PROBE load_digits refused:", type(_exc).__name__)
try:
    _found.append(f"load_sample_images {len(_ls().images)}")
except Exception as _exc:
    print("PROBE load_sample_images refused:", type(_exc).__name__)
_root = _ilu.find_spec("sklearn").submodule_search_locations[0]
for _rel in ("datasets/data/digits.csv.gz", "datasets/images/china.jpg", "datasets/images/flower.jpg"):
    try:
        with open(_os.path.join(_root, _rel), "rb") as _fh:
            _found.append(f"{_rel} {len(_fh.read())} bytes")
    except OSError as _exc:
        print("PROBE open refused:", _rel, type(_exc).__name__)
_not_data = (".py", ".pyc", ".pyi", ".rst", ".html", ".h")
for _top in sorted({*_site.getsitepackages(), _sys.prefix, _sys.base_prefix, *[p for p in _sys.path if p]}):
    for _dir, _dirs, _files in _os.walk(_top, onerror=lambda e: None):
        for _name in _files:
            # "digital" is not the digits (mkdocs-material ships digitalocean.svg icons)
            if (("digit" in _name.lower().replace("digital", "")) or _name in ("china.jpg", "flower.jpg")) \
                    and not _name.endswith(_not_data):
                try:
                    with open(_os.path.join(_dir, _name), "rb") as _fh:
                        if _fh.read(1):
                            _found.append(_os.path.join(_dir, _name))
                except OSError:
                    pass
print("PROBE found:", sorted(set(_found)) or "nothing", flush=True)
'''

PROBE_AGENT = '''
from pytest_fmlbench import Agent, WholeFile

PROBE = {probe!r}


class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([WholeFile("algorithm.py", session.files["algorithm.py"] + "\\n" + PROBE)])
        assert edit.applied, edit.error
        session.run_step("look for the bundled originals", edit=edit)
'''


def test_the_probe_finds_the_originals_outside_the_sandbox(tmp_path):
    """The probe is able: run plainly, as the harness runs, it reads every original."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    found = [line for line in done.stdout.splitlines() if line.startswith("PROBE found:")]
    assert len(found) == 1 and "load_digits (1797, 64)" in found[0] and "digits.csv.gz" in found[0], done.stdout
    assert "china.jpg" in found[0] and "load_sample_images 2" in found[0]


@needs_bwrap
def test_agent_code_cannot_read_the_bundled_originals_of_a_real_task(pytester, bench, write_agent):
    """robustness_openood carves its hidden test digits out of sklearn's digits and its hidden OOD
    inputs out of sklearn's photographs: inside the sandbox, no route reaches either, and the score
    is the baseline's."""
    task = "robustness_openood"
    shutil.copytree(REPO / "task_suites" / task, pytester.path / task)
    agent = write_agent(PROBE_AGENT.replace("{probe!r}", repr(PROBE)))
    result = bench(f"--agent={agent}", task)
    result.assert_outcomes(passed=1)
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / task).glob("*"))
    logs = {p.name: p.read_text(errors="replace") for p in sorted((run / "logs").glob("*.log"))}
    probed = {name: text for name, text in logs.items() if "PROBE found:" in text}
    # the step's val run, and the final val and test runs with the best code
    assert len(probed) == 3 and any("test" in name for name in probed), sorted(logs)
    for name, text in probed.items():
        assert "PROBE found: nothing" in text, (name, [l for l in text.splitlines() if l.startswith("PROBE")])
        assert "PROBE load_digits refused: FileNotFoundError" in text
        assert "PROBE load_sample_images refused: FileNotFoundError" in text
    record = load_record(pytester.path, task)
    spec = load_task(pytester.path / task / "task.yaml").spec
    assert record["sandbox"] == "bwrap" and record["integrity"] == "ok" and record["steps_used"] == 1
    # the harness, outside the sandbox, still built the data from the originals: the baseline's score
    room = spec.baseline.tolerance.test if spec.baseline.tolerance else 0.0  # another CPU's kernels round otherwise
    assert record["test_metric"] == pytest.approx(spec.baseline.test, rel=0, abs=max(1e-9, room))

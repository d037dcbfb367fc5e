"""The agents/ folder: discovery, our own import namespace, no clash with an installed `agents`, the wheel."""

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from pytest_fmlbench.agentkit import NAMESPACE, agents_dir, builtin_names, load_agent_class, parse_agent_options
from pytest_fmlbench.agentkit.catalog import catalog, render
from pytest_fmlbench.agentkit.loading import AgentLoadError

REPO = Path(__file__).parents[2]
FAKE_SDK = '"""A stand-in for the OpenAI Agents SDK, which installs a top-level `agents` package."""\nWHO = "sdk"\n'


def test_every_module_of_the_folder_is_one_agent_named_after_it():
    assert agents_dir() == REPO / "agents" and not (REPO / "agents" / "__init__.py").exists()
    names = builtin_names()
    assert {"aide", "baseline", "random-search"} <= set(names)
    for name in names:
        cls = load_agent_class(name)
        assert cls.name == name and cls.__module__ == f"{NAMESPACE}.{name.replace('-', '_')}"
    infos = catalog()
    assert [i.name for i in infos] == names and not [i.error for i in infos if i.error]
    assert all(i.summary != "(no description)" for i in infos)


def test_the_catalog_gives_summary_options_with_types_and_defaults_and_the_llm_need():
    text = render(catalog())
    assert "aide  [needs an LLM (--model, --provider)]" in text and "baseline  [no LLM]" in text
    assert "    num_drafts: int = 5 " in text and "    review: bool = true " in text
    assert "random-search  [no LLM]\n  Samples the hyper-parameter knobs" in text


def test_unknown_names_and_options_are_one_line_naming_the_valid_ones():
    with pytest.raises(AgentLoadError, match=r"^unknown agent 'nope'; built-in agents: .*aide, .*random-search"):
        load_agent_class("nope")
    with pytest.raises(AgentLoadError, match=r"^agent aide has no option bogus; options: analysis_temperature, "):
        parse_agent_options(load_agent_class("aide"), ["bogus=1"])
    options = parse_agent_options(load_agent_class("aide"), ["num_drafts=2", "review=false"])
    assert (options.num_drafts, options.review) == (2, False)
    # 'none' unsets an optional option, and stays a word where the option is a string
    options = parse_agent_options(load_agent_class("adaptive-search"), ["edit_temperature=none", "encoder=none"])
    assert (options.edit_temperature, options.encoder) == (None, "none")


def _python(code: str, cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_an_installed_agents_package_neither_shadows_nor_is_shadowed(tmp_path):
    sdk = tmp_path / "site" / "agents"
    sdk.mkdir(parents=True)
    (sdk / "__init__.py").write_text(FAKE_SDK)
    # the checkout first on the path, the SDK after it, the working directory the checkout itself
    done = _python("""
        import sys
        from pytest_fmlbench.agentkit import load_agent_class
        aide = load_agent_class("aide")
        import agents
        print(agents.WHO, aide.__module__, sorted(m for m in sys.modules if m.split(".")[0] == "agents"))
    """, cwd=REPO, pythonpath=[REPO, tmp_path / "site"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split(maxsplit=2) == ["sdk", f"{NAMESPACE}.aide", "['agents']"]


def test_a_run_beside_the_sdk_uses_our_agent_and_a_user_agent_still_gets_the_sdk(pytester, toy, monkeypatch):
    sdk = pytester.path / "site" / "agents"
    sdk.mkdir(parents=True)
    (sdk / "__init__.py").write_text(FAKE_SDK)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(pytester.path / "site")]))
    (pytester.path / "sdk_user.py").write_text(textwrap.dedent("""
        import agents
        from pytest_fmlbench import Agent

        class SdkUser(Agent):
            name = "sdk-user"

            def run(self, session):
                session.run_step("baseline", plan=agents.WHO)
    """))
    listed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fmlbench-agents")
    assert listed.ret == 0
    listed.stdout.fnmatch_lines(["aide  [[]needs an LLM*", "baseline  [[]no LLM]"])
    for spec in ("baseline", "sdk_user.py:SdkUser"):
        # imports are under test, not isolation: unsandboxed, the experiment sees the same sys.path
        pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--agent={spec}", "--no-sandbox",
                                      "toy_task").assert_outcomes(passed=1)
    plans = [p.read_text() for p in pytester.path.glob("reports/fmlbench/runs/toy_task/sdk-user*/steps.jsonl")]
    assert len(plans) == 1 and '"plan":"sdk"' in plans[0]


def test_every_package_folder_is_listed_for_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    # taskkit/standins/ holds stand-ins of upstream repositories: package data written out as a git fixture
    standins = REPO / "pytest_fmlbench" / "taskkit" / "standins"
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "pytest_fmlbench").rglob("__init__.py")
               if standins not in p.parents}
    assert on_disk | {NAMESPACE} == listed


def test_the_wheel_ships_the_agents_and_works_installed_from_any_directory(tmp_path):
    pytest.importorskip("setuptools")
    # a copy of what the wheel is built from: setuptools writes build/ and *.egg-info into the source
    source = tmp_path / "source"
    source.mkdir()
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / part, source / part)
    for part in ("pytest_fmlbench", "agents"):
        shutil.copytree(REPO / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"{NAMESPACE}/{n.replace('-', '_')}.py" for n in builtin_names()} <= names
    assert not any(n.startswith("agents/") for n in names)
    package_files = {p.relative_to(REPO).as_posix() for p in (REPO / "pytest_fmlbench").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts}
    assert package_files <= names
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _python("""
        import pytest_fmlbench
        from pytest_fmlbench.agentkit import agents_dir, load_agent_class
        from pytest_fmlbench.cli import main
        print(pytest_fmlbench.__file__, agents_dir(), load_agent_class("aide").__module__)
        main(["agents"])
    """, cwd=elsewhere, pythonpath=[target])
    assert done.returncode == 0, done.stderr
    package_file, folder, module = done.stdout.splitlines()[0].split()
    assert Path(package_file).is_relative_to(target) and Path(folder) == target / NAMESPACE
    assert module == f"{NAMESPACE}.aide"
    assert "random-search  [no LLM]" in done.stdout


def test_fmlbench_agents_command(pytester):
    result = pytester.run(Path(sys.executable).parent / "fmlbench", "agents")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["aide  [[]needs an LLM*", "  Tree search over whole solutions*",
                                 "    num_drafts: int = 5 *", "baseline  [[]no LLM]", "  options: none"])


BUILT_IN = {"aide": True, "aira-mcts": True, "ai-scientist-v1": True, "ai-scientist-v2": True, "autoresearch": True,
            "openevolve": True, "adaptive-search": True, "baseline": False, "random-search": False,
            "claude-code": True, "codex": True, "mini-swe-agent": True, "human": False, "human-assisted": True}


@pytest.mark.parametrize("how", ["fmlbench agents", "pytest --fmlbench-agents"])
def test_both_listings_give_every_built_in_agent_with_summary_typed_options_and_llm_need(pytester, how):
    if how == "fmlbench agents":
        result = pytester.run(Path(sys.executable).parent / "fmlbench", "agents")
    else:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fmlbench-agents")
    assert result.ret == 0
    lines = result.stdout.lines
    heads = {line.split("  [")[0]: line for line in lines if line and not line.startswith(" ") and "  [" in line}
    assert set(heads) == set(BUILT_IN)
    for name, llm in BUILT_IN.items():
        assert heads[name].endswith("[needs an LLM (--model, --provider)]" if llm else "[no LLM]")
        at = lines.index(heads[name])
        assert lines[at + 1].startswith("  ") and len(lines[at + 1].strip()) > 20  # the one-line summary
        options = []
        for line in lines[at + 3:]:
            if not line.startswith("    "):
                break
            options.append(line)
        cls = load_agent_class(name)
        assert len(options) == len(cls.Options.model_fields)
        for line, (option, field) in zip(options, cls.Options.model_fields.items()):
            assert line.split()[0] == option + ":" and " = " in line  # name: type = default
    # each agent's options as typed: a sample of every LLM agent's distinctive one
    text = "\n".join(lines)
    for option in ("uct_c: float = 1.41", "num_ideas: int = 25", "stage_budgets: tuple[float, float, float, float] = "
                   "0.1,0.2,0.5,0.2", "max_debug_retries: int = 3", "num_islands: int = 3",
                   "migration_interval: int = 10", "p1_window: int = 50", "p1_epsilon: float = 0.0005",
                   "catalog_model: str = gpt-5.5", "config: 'mini' | 'mini_textbased' = mini"):
        assert option in text, option
    # a coding tool's own flags that may be passed are named
    assert "only these: --effort VALUE, --max-budget-usd VALUE" in text and "-c KEY=VALUE (--config)" in text


"""No import circles in the package: the modules' imports form a graph without a cycle.

The graph's nodes are the modules of ``pytest_fmlbench`` and of the built-in agents (``agents/``, shipped as
``pytest_fmlbench_agents``); ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
``pkg``. Two rules, both checked:

- module-level imports (those that run when a module is imported: at module level, also inside module-level
  ``if``/``try``/``with`` blocks and class bodies, but not under ``if TYPE_CHECKING:``) form no cycle: a
  cycle there is a half-initialised module at import time;
- imports inside functions count too, and form no cycle either: an import moved into a function keeps a
  heavy or optional library off the import path, it is not a way to let two modules lean on each other.

Not counted: the implicit import of a module's parent package (every submodule would otherwise circle with
an ``__init__`` that re-exports it, which Python handles).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = {"pytest_fmlbench": REPO / "pytest_fmlbench", "pytest_fmlbench_agents": REPO / "agents"}


def module_files(name: str, folder: Path) -> dict[str, Path]:
    """Module name -> file, for every .py file under a package folder (``__init__.py`` names the package)."""
    modules = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((name, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: not in functions, not under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)
                for case in getattr(node, "cases", []) or []:
                    visit(case.body)

    visit(tree.body)
    return found


def targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The known modules one import statement loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    if node.level:
        # relative: a package's own name is its anchor; a plain module's anchor is its parent package
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    out = set()
    for alias in node.names:
        child = f"{base}.{alias.name}"
        if child in known:
            out.add(child)
        elif base in known:
            out.add(base)
    return out


Graph = dict[str, set[str]]  # module -> the modules it imports


@functools.lru_cache(maxsize=None)
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def import_graph(roots: dict[str, Path], import_time_only: bool = True) -> Graph:
    files = {name: path for root, folder in roots.items() for name, path in module_files(root, folder).items()}
    known = set(files)
    graph: Graph = {module: set() for module in known}
    for module, path in files.items():
        tree = _parsed(path)
        nodes = import_time_imports(tree) if import_time_only else [
            n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in nodes:
            graph[module] |= targets(node, module, path.name == "__init__.py", known) - {module}
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """Each group of modules that import each other (directly or round a longer loop), as one of its loops:
    the strongly connected components (Tarjan) of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while not group or member != module:
                member = stack.pop()
                group.add(member)
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [loop_through(graph, group) for group in groups]


def loop_through(graph: Graph, group: set[str]) -> list[str]:
    """One loop inside a strongly connected group, from its first module back to it (breadth first)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        module = frontier.pop(0)
        for target in sorted(graph[module] & group):
            if target == start:
                path = [module]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in came_from:
                came_from[target] = module
                frontier.append(target)
    raise AssertionError(f"{sorted(group)} is not strongly connected")


def test_package_has_no_import_circle_at_import_time():
    graph = import_graph(ROOTS)
    assert sum(map(len, graph.values())) > 100  # the parse found the package's imports at all
    found = circles(graph)
    assert not found, "import circles (module-level imports):\n" + "\n".join(" -> ".join(c) for c in found)


def test_package_has_no_import_circle_through_function_level_imports():
    graph = import_graph(ROOTS, import_time_only=False)
    found = circles(graph)
    assert not found, "import circles (function-level imports counted):\n" + "\n".join(" -> ".join(c) for c in found)


def test_slurm_options_and_controller_share_their_config_module():
    """The controller reads what the options build from slurm/config.py; the options load the controller
    only when --slurm is given (a function-level import), and the controller never imports the options."""
    graph = import_graph(ROOTS)
    everything = import_graph(ROOTS, import_time_only=False)
    options, controller = "pytest_fmlbench.slurm.options", "pytest_fmlbench.slurm.controller"
    assert options not in everything[controller] and controller not in graph[options]
    assert "pytest_fmlbench.slurm.config" in graph[controller] and "pytest_fmlbench.slurm.config" in graph[options]


def test_the_check_finds_a_circle(tmp_path):
    """The check itself: a package whose modules import each other, at module level or through an
    ``__init__`` and a ``from . import``, is reported; the same import moved into a function is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("from __future__ import annotations\ntry:\n    from . import a\nexcept ImportError:\n"
                                  "    pass\nthing = 1\n")
    (package / "sub" / "__init__.py").write_text("from .c import x\n")
    (package / "sub" / "c.py").write_text("from .. import sub\nx = 1\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import e\n")
    (package / "e.py").write_text("def later():\n    from . import d\n")
    found = {frozenset(loop) for loop in circles(import_graph({"pkg": package}))}
    assert found == {frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.sub", "pkg.sub.c"})}
    assert {frozenset(loop) for loop in circles(import_graph({"pkg": package}, import_time_only=False))} == {
        frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.sub", "pkg.sub.c"}), frozenset({"pkg.d", "pkg.e"})}


@pytest.mark.parametrize("entry, absent", [
    # every pytest and every xdist worker: the tables' libraries load where a session reports
    ("import pytest_fmlbench.plugin", ("numpy", "pandas", "rich.table")),
    # each agent step's host (hundreds per session) and the records and editor it reads
    ("import pytest_fmlbench.agent_host.child", ("numpy", "pandas")),
    # `fmlbench data fixtures` runs once per task's fixtures: only its own command's module
    ("from pytest_fmlbench.cli.commands import command; command('data')", ("numpy", "pandas", "pytest_fmlbench.options")),
    # harness scripts that only read and write files
    ("from pytest_fmlbench.evalkit import read_json, write_json, EvalResult", ("numpy",)),
], ids=["plugin", "agent-host", "fmlbench-data", "evalkit"])
def test_processes_started_many_times_per_session_load_no_heavy_library(entry, absent):
    """Start-up is paid per process: these stay free of the libraries the tables and the options need."""
    import subprocess
    import sys

    probe = f"import sys; {entry}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_a_session_that_runs_no_task_loads_no_table_library(tmp_path):
    """A benchmark session that ends before any run (nothing chosen, a setup problem) never pays for pandas: the
    compare gate and the reports load it where a session saves, compares or reports runs."""
    import subprocess
    import sys

    probe = ("import sys, pytest; code = pytest.main(['-q', '-p', 'no:cacheprovider', '--agent=baseline', '.']); "
             "print('LOADED', int(code), sorted(m for m in ('numpy', 'pandas', 'rich.table') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "LOADED 5 []", done.stdout + done.stderr


# what the suite's test modules may not import when they are collected (they load in the tests that use them)
HEAVY_AT_COLLECTION = {"torch", "torchvision", "transformers", "anthropic", "openai", "sklearn", "scipy"}
TESTS = REPO / "tests"


def external_imports(tree: ast.Module) -> set[str]:
    """The top-level names of the libraries a module imports when it is imported (absolute imports only)."""
    names = set()
    for node in import_time_imports(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _package_heavy(module: str, package: Graph, package_files: dict[str, Path],
                   known: dict[str, dict[str, list[str]]]) -> dict[str, list[str]]:
    """Library -> the package's modules through which importing ``module`` imports it (``known``: the answers so
    far, for this graph; the import-time graph has no cycle, a test above says so)."""
    if module not in known:
        own = external_imports(_parsed(package_files[module])) & HEAVY_AT_COLLECTION
        heavy = {library: [module] for library in own}
        for imported in sorted(package[module]):
            for library, path in _package_heavy(imported, package, package_files, known).items():
                heavy.setdefault(library, [module, *path])
        known[module] = heavy
    return known[module]


def collection_imports(test_file: Path, package: Graph, package_files: dict[str, Path],
                       known: dict[str, dict[str, list[str]]] | None = None) -> dict[str, list[str]]:
    """Library -> the chain of modules through which collecting ``test_file`` imports it: the test module's and
    its local helpers' import-time imports (``from full_support import ...``, ``from .conftest import ...``),
    and those of the package's modules they reach (the import graph at import time)."""
    found: dict[str, list[str]] = {}
    seen: set[str] = set()
    known = {} if known is None else known

    def local(name: str, folder: Path, level: int) -> Path | None:
        base = folder
        for _ in range(max(level - 1, 0)):
            base = base.parent
        for root in ([base] if level else [folder, TESTS, TESTS / "tasks"]):
            for candidate in (root / f"{name}.py", root / name / "__init__.py"):
                if candidate.is_file():
                    return candidate
        return None

    def visit_package(module: str, chain: list[str]) -> None:
        for library, path in _package_heavy(module, package, package_files, known).items():
            found.setdefault(library, [*chain, *path])

    def visit_file(path: Path, chain: list[str]) -> None:
        if str(path) in seen:
            return
        seen.add(str(path))
        here = [*chain, str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name]
        for node in import_time_imports(_parsed(path)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top in HEAVY_AT_COLLECTION:
                    found.setdefault(top, here)
                elif top in ROOTS:
                    known = [m for m in (name, *(f"{name}.{a.name}" for a in getattr(node, "names", [])))
                             if m in package]
                    for module in known:
                        visit_package(module, here)
                elif name or isinstance(node, ast.ImportFrom):
                    level = node.level if isinstance(node, ast.ImportFrom) else 0
                    helper = local(top, path.parent, level) if top else None
                    if helper is not None:
                        visit_file(helper, here)

    visit_file(test_file, [])
    return found


def test_collecting_the_suite_loads_no_model_or_sdk_library():
    """Each of `make test`'s xdist workers collects every test module first, all at once on a busy machine:
    torch, the LLM SDKs and scikit-learn load in the tests that use them, not at collection (read from the
    modules' import-time imports, through the package's import graph and the tests' own helper modules)."""
    package = import_graph(ROOTS)
    package_files = {name: path for root, folder in ROOTS.items() for name, path in module_files(root, folder).items()}
    collected = [p for p in sorted(TESTS.rglob("*.py")) if "data" not in p.relative_to(TESTS).parts[:1]
                 and "__pycache__" not in p.parts and (p.name.startswith("test_") or p.name == "conftest.py")]
    assert len(collected) > 100
    known: dict[str, dict[str, list[str]]] = {}
    heavy = {str(p.relative_to(REPO)): found for p in collected
             if (found := collection_imports(p, package, package_files, known))}
    assert heavy == {}, heavy


def test_the_collection_check_follows_helpers_and_the_package(tmp_path, monkeypatch):
    """A heavy import two steps away (a test's helper module, a package module it imports) is found."""
    package_files = {name: path for root, folder in ROOTS.items() for name, path in module_files(root, folder).items()}
    package = import_graph(ROOTS)
    monkeypatch.setattr(__import__(__name__), "TESTS", tmp_path)
    (tmp_path / "helper.py").write_text("import json\nfrom pytest_fmlbench.taskkit import digit_convnets\n")
    (tmp_path / "test_a.py").write_text("import pytest\nfrom helper import thing\n\ndef test():\n    import openai\n")
    (tmp_path / "test_b.py").write_text("import pytest\n\ntry:\n    import anthropic\nexcept ImportError:\n    pass\n")
    found = collection_imports(tmp_path / "test_a.py", package, package_files)
    assert set(found) == {"torch"} and found["torch"][-1] == "pytest_fmlbench.taskkit.digit_convnets", found
    assert set(collection_imports(tmp_path / "test_b.py", package, package_files)) == {"anthropic"}

"""What a warm parent imports: the installed modules a task's files import (learnt from them, or declared
in ``task.yaml``'s ``warm:``), and what those libraries import on their first use."""

from __future__ import annotations

import ast
import importlib.machinery
import os
import sys
from pathlib import Path


_MODULE_SUFFIXES = tuple(sorted(set(importlib.machinery.all_suffixes()), key=len, reverse=True))


def learn_imports(folder: Path, kit: dict[str, Path] | None = None) -> list[tuple[str, list[str]]]:
    """The installed modules the Python files under ``folder`` import, as ``(module, from-names)``.

    Imports of the folder's own modules, relative imports and the standard library are left out (the
    latter costs little, and the parent must stay close to a fresh interpreter). ``kit`` maps the paths
    a fresh workspace receives from the task kit to their sources: they are the folder's own too. Sorted,
    so that the same files always give the same parent.
    """
    kit = kit or {}
    local = local_module_names(folder) | kit_module_names(kit)
    found: dict[str, set[str]] = {}
    for path in [*sorted(folder.rglob("*.py")), *(kit[rel] for rel in sorted(kit) if rel.endswith(".py"))]:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name, set())
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.setdefault(node.module, set()).update(a.name for a in node.names if a.name != "*")
    return [(module, sorted(names)) for module, names in sorted(found.items())
            if _wanted(module.partition(".")[0], local)]


def _wanted(top: str, local: set[str]) -> bool:
    return top not in local and top not in sys.stdlib_module_names and top != "__future__"


def local_module_names(folder: Path) -> set[str]:
    """Top-level names a script in ``folder`` imports from ``folder`` itself (its ``sys.path[0]``):
    modules, bytecode, extensions and folders (packages or namespace portions)."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return names
    for entry in entries:
        name = entry.name
        if entry.is_dir():
            if name.isidentifier():
                names.add(name)
            continue
        for suffix in _MODULE_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)].isidentifier():
                names.add(name[: -len(suffix)])
                break
    return names


def kit_module_names(paths) -> set[str]:
    """Top-level names that the workspace paths a task receives from the kit (``task.yaml``'s ``kit``) give
    a script in the workspace: ``encoder.py`` gives ``encoder``, ``pkg/mod.py`` gives ``pkg``."""
    names = set()
    for path in paths:
        first = Path(path).parts[0]
        name = first.removesuffix(".py") if len(Path(path).parts) == 1 else first
        if name.isidentifier():
            names.add(name)
    return names


def declared_imports(modules: list[str]) -> list[tuple[str, list[str]]]:
    return [(module, []) for module in modules]


# what a library imports on its first use rather than at its own import, at a cost every command would
# pay again: torch imports torch._dynamo (some 600 modules, half a second) when an optimizer is made,
# numpy its random module (and the Cython runtime) when it is first named
FIRST_USE_IMPORTS = {"numpy": ("numpy.random",), "torch": ("torch._dynamo",)}

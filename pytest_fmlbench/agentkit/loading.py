"""Finding agents: the built-in ones in the top-level ``agents/`` folder, and users' own.

The built-in agents are one module each in ``agents/`` (beside ``task_suites/`` in a checkout; installed
as the ``pytest_fmlbench_agents`` folder by a wheel). They are imported under our own package name,
``pytest_fmlbench_agents.<module>``, from the folder's path, never as ``agents``: the OpenAI Agents SDK
installs a top-level ``agents`` package, and neither may shadow the other. The folder has no
``__init__.py``, so even with the checkout on ``sys.path`` it cannot shadow an installed ``agents``.

An agent's name is its module's name with dashes (``random_search.py`` -> ``random-search``); the module
defines one ``Agent`` subclass whose ``name`` is that. Adding an agent = adding a module.
A user's agent is ``package.module:Class`` or ``path/to/file.py:Class``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
import typing
from pathlib import Path
from types import ModuleType

from pydantic import ValidationError

from .base import Agent, AgentOptions

NAMESPACE = "pytest_fmlbench_agents"
# where a wheel installs the agents folder, beside the pytest_fmlbench package
_INSTALLED_NAME = NAMESPACE


class AgentLoadError(ValueError):
    """One line: which agent and why it cannot be used."""


# set in an agent's own process, whose sandbox shows the folder but not the checkout around it
_FOLDER: list[Path] = []


def use_agents_dir(folder: Path) -> None:
    """Take the built-in agents from ``folder``, as the harness found it."""
    _FOLDER[:] = [Path(folder)]


def agents_dir() -> Path:
    """The built-in agents' folder, found from this package's location (never the working directory)."""
    if _FOLDER:
        return _FOLDER[0]
    root = Path(__file__).resolve().parents[2]
    installed = root / _INSTALLED_NAME
    if installed.is_dir():
        return installed
    # a checkout (editable install or PYTHONPATH): the folder beside the package. In site-packages a
    # folder named 'agents' belongs to someone else (the OpenAI Agents SDK), hence the checkout test.
    checkout = root / "agents"
    if checkout.is_dir() and (root / "pyproject.toml").is_file():
        return checkout
    raise AgentLoadError(f"the built-in agents folder is missing (looked for {installed} and {checkout})")


def builtin_names() -> list[str]:
    """Every built-in agent's name, from the folder's file names (nothing is imported)."""
    try:
        folder = agents_dir()
    except AgentLoadError:
        return []
    return sorted(p.stem.replace("_", "-") for p in folder.glob("*.py") if not p.stem.startswith("_"))


def _namespace() -> ModuleType:
    """The package the built-in agents are imported into, pointing at the agents folder."""
    module = sys.modules.get(NAMESPACE)
    if module is None:
        spec = importlib.machinery.ModuleSpec(NAMESPACE, None, is_package=True)
        spec.submodule_search_locations = [str(agents_dir())]
        module = importlib.util.module_from_spec(spec)
        sys.modules[NAMESPACE] = module
    return module


def builtin_module(name: str) -> ModuleType:
    _namespace()
    return importlib.import_module(f"{NAMESPACE}.{name.replace('-', '_')}")


def agents_in(module: ModuleType) -> list[type[Agent]]:
    """The named Agent subclasses a module defines (not those it imports)."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Agent) and obj.__module__ == module.__name__ and obj.name]


def load_builtin(name: str) -> type[Agent]:
    if name not in builtin_names():
        raise AgentLoadError(
            f"unknown agent {name!r}; built-in agents: {', '.join(builtin_names())} "
            "(or give package.module:Class or path/to/file.py:Class)"
        )
    try:
        module = builtin_module(name)
    except Exception as exc:  # one broken module must not hide why
        raise AgentLoadError(f"agent {name!r}: cannot import its module: {type(exc).__name__}: {exc}") from None
    matching = [cls for cls in agents_in(module) if cls.name == name]
    if len(matching) != 1:
        raise AgentLoadError(f"agent {name!r}: its module must define one Agent subclass with name = {name!r}, "
                             f"found {len(matching)}")
    return matching[0]


def load_agent_class(spec: str, base_dir: Path | None = None) -> type[Agent]:
    """A built-in name, ``package.module:Class`` or ``path/to/file.py:Class`` (relative to ``base_dir``)."""
    if ":" not in spec:
        return load_builtin(spec)
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            module = _load_file(Path(where) if base_dir is None else Path(base_dir) / where, where)
        else:
            module = importlib.import_module(where)
    except AgentLoadError:
        raise
    except Exception as exc:  # a user's module may fail in any way while importing
        raise AgentLoadError(f"agent {spec!r}: cannot import {where!r}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise AgentLoadError(f"agent {spec!r}: {where!r} has no attribute {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise AgentLoadError(f"agent {spec!r}: {attr} must subclass pytest_fmlbench.Agent")
    return cls


def _load_file(path: Path, shown: str) -> ModuleType:
    if not path.is_file():
        raise AgentLoadError(f"agent file {shown!r} does not exist")
    name = f"fmlbench_user_agent_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def parse_agent_options(cls: type[Agent], pairs: list[str]) -> AgentOptions:
    """``name=value`` strings, typed and validated against the agent's declared options."""
    raw: dict[str, str | None] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise AgentLoadError(f"--agent-opt {pair!r}: expected name=value")
        raw[name.strip()] = value.strip()
    known = set(cls.Options.model_fields)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise AgentLoadError(
            f"agent {cls.name or cls.__name__} has no option {', '.join(unknown)}; "
            f"options: {', '.join(sorted(known)) or '(none)'}"
        )
    for name, value in raw.items():
        # 'none' sets an optional option (e.g. a temperature) back to 'not sent'
        if value.lower() in ("none", "null") and _accepts_none(cls.Options.model_fields[name].annotation):
            raw[name] = None
    try:
        return cls.Options.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise AgentLoadError(f"--agent-opt {err['loc'][0]}: {err['msg']}") from None


def _accepts_none(annotation) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)

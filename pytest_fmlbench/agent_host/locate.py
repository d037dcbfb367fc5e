"""Where an agent's code is, found without running it: what its own process imports and must see.

A user's agent (``path/to/file.py:Class``, ``package.module:Class``) is never imported by the harness:
its module's top-level code could patch the harness as easily as its ``run`` could. The harness only
looks up where the code lives; the agent's process (``child``) imports it. A class the harness was
handed already imported (``RunSettings(agent_cls=...)`` in a test) is located from its module.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..agentkit.base import Agent
from ..agentkit.loading import NAMESPACE, AgentLoadError, agents_dir, load_agent_class, use_agents_dir

# modules loaded by path get this prefix (agentkit.loading._load_file)
_FILE_MODULE_PREFIX = "fmlbench_user_agent_"


@dataclass(frozen=True)
class AgentLocator:
    """What ``load_agent_class`` is given in the agent's process, and the code that process must see."""

    spec: str                       # a built-in name, package.module:Class or path/to/file.py:Class
    base_dir: str                   # where a relative file path in ``spec`` is resolved
    sys_path: tuple[str, ...] = ()  # folders put first on the process's sys.path
    code: tuple[str, ...] = ()      # the agent's own files and folders, shown read-only in its sandbox
    builtin_dir: str | None = None  # the built-in agents' folder

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentLocator:
        return cls(spec=data["spec"], base_dir=data["base_dir"], sys_path=tuple(data["sys_path"]),
                   code=tuple(data["code"]), builtin_dir=data["builtin_dir"])

    def load(self) -> type[Agent]:
        """In the agent's process: import the agent's module and return its class."""
        for folder in reversed(self.sys_path):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        if self.builtin_dir:
            use_agents_dir(Path(self.builtin_dir))
        return load_agent_class(self.spec, base_dir=Path(self.base_dir))


def locate_spec(spec: str, base_dir: Path) -> AgentLocator:
    """The --agent value as typed, resolved against ``base_dir`` (the directory pytest was started in)."""
    if ":" not in spec:
        folder = str(agents_dir())
        return AgentLocator(spec, str(base_dir), code=(folder,), builtin_dir=folder)
    where = spec.rpartition(":")[0]
    if where.endswith(".py"):
        return AgentLocator(spec, str(base_dir), code=(os.path.abspath(Path(base_dir) / where),))
    root, code = _top_level(where.split(".")[0])
    return AgentLocator(spec, str(base_dir), sys_path=(root,) if root else (), code=code)


def locate_class(cls: type[Agent]) -> AgentLocator:
    """An agent class already imported here (by a test, or a built-in)."""
    name = cls.name or cls.__name__
    if "." in cls.__qualname__:
        raise AgentLoadError(f"agent {name}: {cls.__qualname__} is not defined at the top level of its module, so "
                             "its own process cannot import it; move it there, or pass --agent-in-process")
    module = sys.modules.get(cls.__module__)
    if cls.__module__.startswith(NAMESPACE + "."):
        folder = str(agents_dir())
        return AgentLocator(cls.name, "/", code=(folder,), builtin_dir=folder)
    path = getattr(module, "__file__", None)
    if not path:
        raise AgentLoadError(f"agent {name}: module {cls.__module__} has no file, so its own process cannot "
                             "import it; pass --agent-in-process")
    path = os.path.abspath(path)
    if cls.__module__ == "__main__" or cls.__module__.startswith(_FILE_MODULE_PREFIX):
        return AgentLocator(f"{path}:{cls.__qualname__}", "/", code=(path,))
    depth = cls.__module__.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    root = str(Path(path).parents[depth])
    top = cls.__module__.split(".")[0]
    code = os.path.join(root, top) if os.path.isdir(os.path.join(root, top)) else path
    return AgentLocator(f"{cls.__module__}:{cls.__qualname__}", "/", sys_path=(root,), code=(code,))


def _top_level(name: str) -> tuple[str | None, tuple[str, ...]]:
    """(the folder to import it from, its files) for a top-level module, found without importing it."""
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return None, ()  # the agent's process reports the import error in its own words
    if found.submodule_search_locations:
        folders = tuple(os.path.abspath(p) for p in found.submodule_search_locations)
        return os.path.dirname(folders[0]), folders
    if found.origin and os.path.isfile(found.origin):
        origin = os.path.abspath(found.origin)
        return os.path.dirname(origin), (origin,)
    return None, ()

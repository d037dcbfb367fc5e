"""Data sets that ship inside installed packages, hidden inside the sandbox.

Several tasks carve their splits, the hidden test split included, out of data that ships with a pip
package: scikit-learn's 8x8 digits stand in for MNIST, its two sample photographs for an OOD source,
statsmodels' survey tables for real covariates. The interpreter's trees are visible (read-only) inside
the sandbox, so without a mask an experiment could load the originals and look up every hidden label.

A resource is written ``package:path/inside/it`` (``sklearn:datasets/data/digits.csv.gz``): the part
before the colon is a top-level import name, the rest a file or folder inside that package. Tasks name
the resources their data comes from in ``task.yaml`` (``sandbox.hide``); ``DEFAULT_HIDE`` adds the data
folders of packages that ship well-known data sets, for every task, so that no task can be beaten with
a bundled set it did not declare. Inside the sandbox a hidden folder keeps its code (its packages still
import) but none of its other files, and a hidden file cannot be opened (``Permission denied``).
Harness commands run outside the sandbox and read everything as before.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from .. import scratch
from . import mounts

# data folders hidden from every experiment; a package that is not installed is skipped
DEFAULT_HIDE = (
    "sklearn:datasets/data",             # iris, digits, wine, breast cancer, diabetes, linnerud
    "sklearn:datasets/images",           # the two sample photographs (china.jpg, flower.jpg)
    "statsmodels:datasets",              # about 30 survey, economic and medical tables
    "plotly:package_data/datasets",      # gapminder, iris, tips, ...
    "matplotlib:mpl-data/sample_data",   # sample images and tables
)
# what a hidden folder keeps, so that the packages inside it still import
_CODE = re.compile(r"\.(py|pyc|pyi|pyd|so(\.[0-9]+)*)$")
# bound without device access (bwrap binds are nodev), the null device refuses every open
_UNREADABLE = "/dev/null"

_RESOURCE = re.compile(r"^(?P<package>[A-Za-z_][A-Za-z0-9_]*):(?P<path>\S+)$")


class ResourceError(ValueError):
    """A resource that cannot be hidden; the message is one line naming it and the problem."""


@dataclass(frozen=True)
class Resource:
    package: str
    path: PurePosixPath

    @classmethod
    def parse(cls, text: str) -> Resource:
        match = _RESOURCE.match(text)
        if match is None:
            raise ResourceError(f"{text!r} is not 'package:path/inside/it' (e.g. 'sklearn:datasets/data/digits.csv.gz')")
        path = PurePosixPath(match["path"])
        if path.is_absolute() or ".." in path.parts or path == PurePosixPath("."):
            raise ResourceError(f"{text!r}: the path must be relative and inside the package")
        return cls(match["package"], path)

    def __str__(self) -> str:
        return f"{self.package}:{self.path}"


def locate(resource: Resource) -> list[str]:
    """Every copy of ``resource`` this interpreter could import (real paths): the package as imported
    and any copy of it that another import location shadows. Raises ResourceError with one line."""
    try:
        spec = importlib.util.find_spec(resource.package)
    except (ImportError, ValueError) as exc:
        raise ResourceError(f"{resource}: package {resource.package!r} cannot be located ({exc})") from None
    if spec is None:
        raise ResourceError(f"{resource}: unknown package {resource.package!r} (not importable by {sys.executable})")
    if not spec.submodule_search_locations:
        raise ResourceError(f"{resource}: {resource.package!r} is a single module, not a package holding files")
    roots = list(spec.submodule_search_locations)
    roots += [os.path.join(entry, resource.package) for entry in (*sys.path, *mounts.python_paths())
              if os.path.isabs(entry)]
    found: list[str] = []
    for root in roots:
        candidate = os.path.join(root, *resource.path.parts)
        if os.path.exists(candidate):
            real = os.path.realpath(candidate)
            if real not in found:
                found.append(real)
    if not found:
        where = ", ".join(spec.submodule_search_locations)
        raise ResourceError(f"{resource}: no file or folder {str(resource.path)!r} in package {resource.package!r} ({where})")
    return found


def _data_files(folder: str) -> list[str]:
    return [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names
            if not _CODE.search(name)]


def check(text: str) -> list[str]:
    """The real paths of the declared ``text``; ResourceError (one line) unless it names data that can be hidden."""
    resource = Resource.parse(text)
    paths = locate(resource)
    if all(os.path.isdir(p) and not _data_files(p) for p in paths):
        raise ResourceError(f"{resource}: a folder of code only, no data to hide")
    return paths


@dataclass(frozen=True)
class Masks:
    folders: tuple[str, ...]  # replaced by a copy holding only their code
    files: tuple[str, ...]    # made unreadable

    def binds(self) -> list[str]:
        """bwrap arguments; they must come after the binds of the trees that hold these paths."""
        args: list[str] = []
        for folder in self.folders:
            copy = _code_only_copy(folder)
            if not os.path.isdir(copy):  # a cleaner emptied the host's /tmp during a long session
                _code_only_copy.cache_clear()
                copy = _code_only_copy(folder)
            args += ["--ro-bind", copy, folder]
        for path in self.files:
            args += ["--ro-bind", _UNREADABLE, path]
        return args


def masks(declared: tuple[str, ...] | list[str] = ()) -> Masks:
    """What hides ``DEFAULT_HIDE`` and the ``declared`` resources inside the sandbox.

    A declared resource that cannot be found raises ResourceError (its data might have moved where no
    mask covers it); a default one whose package is not installed is skipped.
    """
    paths = set(_default_paths())
    for text in declared:
        paths.update(check(text))
    # only what the sandbox shows at all: a bind onto an absent path would create it
    paths = {p for p in paths if _visible(p)}
    folders = sorted(p for p in paths if os.path.isdir(p))
    folders = [f for f in folders if not any(_under(f, g) for g in folders if g != f)]
    # a data file inside a hidden folder is absent from its copy; a code file named on its own is not
    files = sorted(p for p in paths if not os.path.isdir(p)
                   and not (any(_under(p, g) for g in folders) and not _CODE.search(p)))
    return Masks(tuple(folders), tuple(files))


@lru_cache(maxsize=1)
def _default_paths() -> tuple[str, ...]:
    paths: list[str] = []
    for text in DEFAULT_HIDE:
        try:
            paths += locate(Resource.parse(text))
        except ResourceError:
            continue
    return tuple(paths)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@lru_cache(maxsize=1)
def _visible_trees() -> tuple[str, ...]:
    trees = [os.path.realpath(t) for t in mounts.SYSTEM_TREES if os.path.isdir(t)]
    return tuple(sorted({*trees, *mounts.python_paths()}))


def _visible(path: str) -> bool:
    return any(_under(path, tree) for tree in _visible_trees())


@lru_cache(maxsize=None)
def _code_only_copy(folder: str) -> str:
    """A private copy of ``folder`` with its sub-folders and code files only (one mount instead of one
    per data file: bubblewrap's cost grows with the number of mounts). Timestamps are kept, so the
    copied bytecode stays valid for the copied sources."""
    copy = scratch.mkdtemp(prefix="code-only-")
    for root, dirs, names in os.walk(folder):
        target = os.path.join(copy, os.path.relpath(root, folder))
        os.makedirs(target, exist_ok=True)
        for name in names:
            source = os.path.join(root, name)
            if _CODE.search(name) and os.path.isfile(source) and not os.path.islink(source):
                shutil.copy2(source, os.path.join(target, name))
        # a link to a folder elsewhere would show that folder's data again: leave it out
        dirs[:] = [name for name in dirs if not os.path.islink(os.path.join(root, name))]
    return copy

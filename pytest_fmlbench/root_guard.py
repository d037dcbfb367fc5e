"""Stops a session whose root directory an option's value moves, before anything is collected.

pytest decides its root directory (and so its configuration file, ``testpaths`` and ``addopts``) before it
loads plugins from entry points: it does not know this plugin's options then, so the value of
``--fmlbench-out DIR`` written as a separate word, once DIR exists, is taken for a test path. Where DIR lies
outside the project, the root becomes DIR or a folder above both, the project's configuration no longer
applies and its own tests are collected: on a resume, and already in the first run's xdist workers, which
start after the controller made DIR. ``--fmlbench-out=DIR`` is one word and not affected. No plugin can run
before that decision, so the case is detected once the options are known and stopped with one line naming
the fix, whether the path exists yet or not: the first run is refused as the second would be.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from .safe_text import printable

# options whose path the session itself creates: the run records' folder, the HTML report
CREATED_BY_THE_SESSION = ("--fmlbench-out", "--fmlbench-html")


def plugin_value_options(parser: pytest.Parser) -> set[str]:
    """The long names of this plugin's options (its ``--help`` section), whatever their arity: a switch
    never takes the next word, so only an option that takes a value can have moved the root."""
    group = parser.getgroup("fmlbench")
    return {name for option in group.options for name in option.names() if name.startswith("--")}


def two_word_values(args: list[str], options: set[str], file_or_dir: list[str]) -> list[tuple[str, str]]:
    """(option, value) pairs given as two words among ``args`` (the full parse did not keep the value as a
    test path): once the value exists as a path, pytest takes it for a test path while deciding the root."""
    kept = set(file_or_dir)
    return [(option, value) for option, value in zip(args, args[1:])
            if option in options and not value.startswith("-") and value not in kept]


def _as_it_will_exist(option: str, value: str, invocation_dir: Path) -> Path:
    """The path that stands for ``value`` in pytest's root search once this session has run: the path itself,
    or, for a path the session creates (an xdist worker, or the next run, then finds it), its nearest
    existing folder above: a new folder holds no configuration, so the root found is the same. Any other
    value that is no path now never becomes one, and pytest passes it over."""
    path = invocation_dir / value
    while option in CREATED_BY_THE_SESSION and not path.exists() and path != path.parent:
        path = path.parent
    return path


def _setup(args: list[str], namespace, invocation_dir: Path) -> tuple[Path, Path | None]:
    """(root, configuration file) as pytest decides them for these test paths and these options."""
    # pytest's own root finder (there since pytest 6), imported only where a value may move the root
    from _pytest.config.findpaths import determine_setup

    accepted = inspect.signature(determine_setup).parameters
    arguments = {"inifile": namespace.inifilename, "args": args, "rootdir_cmd_arg": namespace.rootdir or None,
                 "invocation_dir": invocation_dir}
    if "override_ini" in accepted:
        arguments["override_ini"] = namespace.override_ini
    found = determine_setup(**arguments)
    return found[0], found[1]


def check_root(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Raises one line (pytest.UsageError) where a value of this plugin's options given as a separate word
    moves pytest's root, now or once the path exists: the first run is stopped as the second would be."""
    invocation_dir = Path(config.invocation_params.dir)
    namespace = config.known_args_namespace
    test_paths = [str(invocation_dir / arg) for arg in namespace.file_or_dir]
    pairs = two_word_values(list(args), plugin_value_options(parser), list(namespace.file_or_dir))
    if not pairs:
        return
    project = _setup(test_paths, namespace, invocation_dir)
    moving = [(option, value, moved[0]) for option, value in pairs
              if (moved := _setup([*test_paths, str(_as_it_will_exist(option, value, invocation_dir))], namespace,
                                  invocation_dir)) != project]
    if not moving:
        return  # every value lies inside the project: the root stays the project's own
    given = ", ".join(printable(f"{option} {value}") for option, value, _ in moving)
    fixes = " and ".join(printable(f"{option}={value}") for option, value, _ in moving)
    raise pytest.UsageError(
        f"[fmlbench] {given}: pytest takes a separate value that is a path for a test path before this plugin "
        f"is loaded, which moves its root to {printable(moving[0][2])} (the project's is {printable(project[0])}) "
        f"and collects other tests; write {fixes} (one word)")

"""The warm parent's script: ``python [flags] main.py FD`` (see ``__init__`` beside it, the mechanism).

Kept to a few lines on purpose. CPython keeps the syntax tree of the script it runs until that script
returns, and every command is a fork of this one that returns from it: freeing the tree of the whole
mechanism (thousands of small blocks, on pages shared with the parent) took 3-4 ms of every command's
end. The mechanism's parts are compiled here, each tree freed before anything is forked; they are not
imported (no module of this package may be in a command's ``sys.modules``).
"""

import sys

# this folder is not the command's: no module of it may be importable as a top-level name
del sys.path[0]

_FOLDER = __file__[: -len("main.py")]
# in the order a command goes through them; each part's names are the others' globals (see __init__)
_PARTS = ("syscalls", "import_guard", "startup", "fork_server", "sandbox_entry", "command_process", "page_copies",
          "exit_handler_probe", "ending", "memory_keeper", "finalizer_checks", "ending_checks")
# named as a script's top level (its classes are a script's, as the command's own are)
_parent = {"__name__": "__main__", "__builtins__": __builtins__}
for _part in _PARTS:
    _parent["__file__"] = _FOLDER + _part + ".py"
    with open(_parent["__file__"], "rb") as _fh:
        exec(compile(_fh.read(), _parent["__file__"], "exec", dont_inherit=True), _parent)
_job = _parent["_main"]()
# only a child that became a command gets here
try:
    _code = _job.code if _job.code is not None else compile(_job.source, _job.filename, "exec", dont_inherit=True)
    exec(_code, sys.modules["__main__"].__dict__)
    _parent["_Ending"].status = 0
except BaseException as _exc:
    _parent["_Ending"].status = _parent["_Ending"].status_of(_exc)
    # the command's traceback starts in its script, as it would in a fresh interpreter
    if _exc.__traceback__ is not None and _exc.__traceback__.tb_frame.f_code.co_filename == __file__:
        _exc.__traceback__ = _exc.__traceback__.tb_next
    raise

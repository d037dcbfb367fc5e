"""What the interpreter's teardown of a command would do that could be seen (``_left_to_see``): threads,
trace functions, audit hooks, objects with finalizers, and libraries loaded since the fork.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import ctypes
import gc
import importlib.machinery
import itertools
import struct


def _left_to_see():
    """What the interpreter's teardown of this command would do that could be seen, or None."""
    if len(sys._current_frames()) != 1:
        return "a thread still runs"
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return "a trace or profile function is set"
    if gc.callbacks or gc.get_debug():
        return "the collector reports"
    if _Ending.hooked:
        return "an audit hook was added"
    if _Ending.finalizers is not None and not _Ending.finalizers._shutdown:
        return "the libraries' weakref.finalize objects were not called at exit"
    if _WRITING_MODULES & sys.modules.keys():
        return "sqlite3 or dbm is imported"
    if not _resource_warnings_ignored():
        return "ResourceWarning is shown"
    new_code = _new_code()
    if new_code is not None:
        return new_code
    for ref, idle in _Ending.watched:
        obj = ref()
        if obj is not None and not idle(obj):
            return f"the libraries' {type(obj).__qualname__} would finalize"
    objects, codes = gc.get_objects(), _dropping_codes()
    # each kind judged once; the objects of the kinds that need a look, picked out without a loop of
    # Python code over them all (a command leaves thousands)
    tests = {}
    for kind in set(map(type, objects)):
        verdict = _verdict(kind, codes)
        if isinstance(verdict, str):
            return verdict
        if verdict is not None:
            tests[kind] = verdict
    for obj in itertools.compress(objects, map(tests.__contains__, map(type, objects))) if tests else ():
        if not tests[type(obj)](obj):
            return f"a {type(obj).__qualname__} would finalize"
    return None


def _verdict(kind, codes):
    """For an object the command made: None (freeing it is unseen), a test, or why it could be seen."""
    if _is_weak(kind):
        return lambda ref: _unseen_when_freed(ref, _weak_callback(ref), codes)
    if getattr(kind, "__del__", None) is not None:
        return _finalizer_check(kind)
    tests = []
    for base in kind.__mro__:
        name = base.__module__ if isinstance(base.__module__, str) else ""
        top = name.partition(".")[0]
        if top in _WRITING_MODULES:
            return f"a {base.__qualname__} is alive"
        if name == "builtins" or top in sys.stdlib_module_names or _defined_in_python(base, name):
            continue
        if name.startswith(_FREES_MEMORY_ONLY_IN):
            continue
        if (name, base.__qualname__) not in _FREES_MEMORY_ONLY:
            return f"an object of an extension type ({name}.{base.__qualname__}) is alive"
        test = _FREES_MEMORY_ONLY[name, base.__qualname__]
        if test is not None:
            tests.append(test)
    if not tests:
        return None
    return lambda obj: all(test(obj) for test in tests)


def _defined_in_python(kind, module_name):
    if not kind.__flags__ & _PY_TPFLAGS_HEAPTYPE:
        return False
    path = getattr(sys.modules.get(module_name), "__file__", None)
    return isinstance(path, str) and not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def _resource_warnings_ignored():
    """Whether the warnings filters ignore every ResourceWarning (a socket or scandir iterator left open
    warns when freed)."""
    warnings = sys.modules.get("warnings") or sys.modules.get("_warnings")
    for action, message, category, module, lineno in getattr(warnings, "filters", None) or ():
        if not (isinstance(category, type) and issubclass(ResourceWarning, category)):
            continue
        if action != "ignore":
            return False
        if (message is None or message.pattern in ("", ".*")) and (module is None or module.pattern in ("", ".*")) \
                and not lineno:
            return True
    return False


def _code_files():
    """The executable files mapped into this process."""
    files = set()
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) > 5 and "x" in parts[1] and parts[5].startswith("/"):
                files.add(parts[5].rstrip("\n"))
    return files


# dl_iterate_phdr's callback, made once here (making one maps memory for its trampoline)
_PHDR_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_ADDS_OFFSET = 32  # of dlpi_adds in glibc's struct dl_phdr_info on 64-bit targets


def _first_object(info, size, _data):
    _loading.append(ctypes.c_ulonglong.from_address(info + _ADDS_OFFSET).value if size >= _ADDS_OFFSET + 8 else None)
    return 1  # one object is enough: the counter is the dynamic linker's


_loading = []
_first_object_callback = _PHDR_CALLBACK(_first_object)


def _objects_loaded():
    """How many libraries the dynamic linker has loaded in all (glibc's counter); None if unknown."""
    _loading.clear()
    if ctypes.sizeof(ctypes.c_void_p) != 8 or not hasattr(_LIBC, "dl_iterate_phdr"):
        return None
    _LIBC.dl_iterate_phdr(_first_object_callback, None)
    return _loading[0] if _loading else None


def _no_code_since_the_fork():
    loaded = _objects_loaded()
    if loaded is not None and _Ending.objects_loaded is not None:
        return loaded == _Ending.objects_loaded
    return _code_files() <= _Ending.code_files


def _new_code():
    """Why a library loaded since the parent's imports ended could make the ending visible, or None. One
    installed with the interpreter or the system (as the parent's are; a step cannot write there) is
    taken as the parent's libraries are, unless it registers ``Py_AtExit`` functions; one from anywhere
    else (a step's own build, say) turns the short ending off."""
    if _no_code_since_the_fork():
        return None
    for path in sorted(_code_files() - _Ending.code_files):
        if not any(_under(os.path.realpath(path), tree) for tree in _installed_trees()):
            return f"a library was loaded after the fork from {path}"
        if _registers_at_exit(path):
            return f"{path}, loaded after the fork, registers Py_AtExit functions"
    return None


def _installed_trees():
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return {os.path.realpath(tree) for tree in prefixes} | {"/usr", "/lib", "/lib32", "/lib64"}


def _registers_at_exit(path):
    """Whether a mapped library imports Py_AtExit (its dynamic symbols name it; the interpreter itself
    defines it). What cannot be read as a 64-bit ELF file is searched whole."""
    if "libpython" in os.path.basename(path) or os.path.realpath(path) == os.path.realpath(sys.executable):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                fh.seek(0)
                return b"Py_AtExit\0" in fh.read()
            order = "<" if head[5] == 1 else ">"
            table_at, = struct.unpack_from(order + "Q", head, 0x28)
            entry_size, count = struct.unpack_from(order + "HH", head, 0x3A)
            fh.seek(table_at)
            table = fh.read(entry_size * count)
            # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
            sections = [struct.unpack_from(order + "IIQQQQIIQQ", table, i * entry_size) for i in range(count)]
            for section in sections:
                if section[1] == 11:  # SHT_DYNSYM, whose names are in the section it links to
                    names = sections[section[6]]
                    fh.seek(names[4])
                    return b"\0Py_AtExit\0" in b"\0" + fh.read(names[5])
            return False  # no dynamic symbols: it calls nothing of the interpreter's
    except (OSError, struct.error, IndexError):
        return True

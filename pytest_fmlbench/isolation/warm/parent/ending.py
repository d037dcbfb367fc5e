"""A command's ending (``_Ending``): where nothing of the interpreter's teardown could be seen, the
command ends after its atexit handlers, as the C library's ``exit`` does, without freeing every object
it shares with the parent; otherwise it finalizes as a script does. The checks it makes are in
``finalizer_checks`` and ``ending_checks``.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import gc
import io
import types
import _thread
import _weakref

_PY_TPFLAGS_HEAPTYPE = 1 << 9
# the standard library's types whose objects do more, when freed, than free memory, close descriptors
# and unmap memory (which a process's exit does just the same): sqlite3's connections (they roll back
# and remove their journal), dbm's databases (they write)
_WRITING_MODULES = frozenset({"sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm"})
_IO_TYPES = frozenset({io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair,
                       io.TextIOWrapper})
_MEMORY_IO_TYPES = frozenset({io.BytesIO, io.StringIO})
# finalizers of a library's own objects that do nothing while their object is in the state named
_IDLE_WHEN_STOPPED = {
    # its finalizer stops the tracker process it started, if one runs
    ("joblib.externals.loky.backend.resource_tracker", "ResourceTracker"): lambda tracker: tracker._fd is None,
    ("multiprocessing.resource_tracker", "ResourceTracker"): lambda tracker: tracker._fd is None,
}
# extension types whose objects, freed, release memory and nothing else (the collector tracks them; a
# Python subclass's __del__ is looked at as any finalizer is), with a test where that holds in a state
# only: torch's tensors and storages, the classes and descriptors that pybind11 and torch make (a bound
# library loaded after the fork makes some), numpy's arrays (those the collector tracks: a Python
# subclass's, np.memmap's) and generators, numba's compiled functions, pandas' and pydantic's objects
# that scripts keep
_FREES_MEMORY_ONLY = {
    ("torch._C", "TensorBase"): None, ("torch._C", "StorageBase"): None, ("torch._C", "_TensorMeta"): None,
    ("pybind11_builtins", "pybind11_type"): None, ("pybind11_builtins", "pybind11_static_property"): None,
    # its release would copy back what a C extension forgot to write back, and warn
    ("numpy", "ndarray"): lambda array: not array.flags.writebackifcopy,
    ("numpy.random._generator", "Generator"): None, ("numpy.random.mtrand", "RandomState"): None,
    ("numpy.random.bit_generator", "BitGenerator"): None, ("numpy.random.bit_generator", "SeedSequence"): None,
    ("numpy.random._pcg64", "PCG64"): None, ("numpy.random._pcg64", "PCG64DXSM"): None,
    ("numpy.random._mt19937", "MT19937"): None, ("numpy.random._philox", "Philox"): None,
    ("numpy.random._sfc64", "SFC64"): None,
    # numba's compiled functions: their dispatchers, closures and environments
    ("_dispatcher", "Dispatcher"): None, ("_dynfunc", "_Closure"): None, ("_dynfunc", "Environment"): None,
}
# and every type of these libraries' compiled cores (pandas' Cython internals, pydantic's Rust core)
_FREES_MEMORY_ONLY_IN = ("pandas._libs.", "pydantic_core.")

# context managers that a library enters for good while it imports, whose exit (run when the generator
# is closed at the interpreter's teardown) only sets a flag of its own extension back: the generator's
# (module, function) -> the lock and the extension module its exit uses, by their global names
_MODE_SESSIONS = {
    # torch.utils._cxx_pytree keeps torch's namespace of optree insertion-ordered
    ("optree.registry", "dict_insertion_ordered"): ("__REGISTRY_LOCK", "_C", "set_dict_insertion_ordered"),
}


def _sets_a_mode_back(generator):
    """Whether closing ``generator`` (suspended, one the libraries made while importing) only sets a
    library's flag back, as its code and the globals it uses stand."""
    frame = generator.gi_frame
    if frame is None or not generator.gi_suspended:
        return False
    names = _MODE_SESSIONS.get((frame.f_globals.get("__name__"), generator.gi_code.co_name))
    if names is None:
        return False
    lock_name, extension_name, setter = names
    lock, extension = frame.f_globals.get(lock_name), frame.f_globals.get(extension_name)
    # what a command could have put in their place (a Python function, a lock of its own) is not taken
    return type(lock) in (_thread.LockType, _thread.RLock) and type(extension) is types.ModuleType \
        and type(getattr(extension, setter, None)) is types.BuiltinFunctionType


class _Ending:
    """A command's interpreter ends by freeing every object, the parent's included: that writes to nearly
    every page it shares with the parent (copy on write), a tenth of a second and more per command.
    Where nothing of that can be seen, the command ends after the atexit handlers, as the C library's
    ``exit`` does, without the interpreter's teardown; otherwise it finalizes as a script's does.

    Up to this handler (registered before any library's, so called after all of them), the ending is the
    interpreter's own: the exception printed, non-daemon threads joined, atexit handlers run. Then
    ``sys.stdout`` and ``sys.stderr`` are flushed as the interpreter does next, and ``exit(status)`` runs
    the C library's handlers and flushes its buffers as at the end of a script. Those handlers (the
    libraries' C++ static destructors among them: torch's unregister its kernels, a tenth of a second
    and more) are skipped, the buffers flushed and the process ended (``_exit``), where a fork of the
    parent ran them under a filter that stops any system call but those that release memory
    (``_c_exit_handlers_seen``), no library was loaded since the fork, and the command looked up none
    of the C functions that register a handler through ctypes; the command's memory is then handed to
    a keeper, released after the exit is seen (``_memory_kept_past_the_exit``). A handler that a library the parent
    holds registers later, on first use (a C++ function's static), is taken as that library's
    objects are: to release memory only. What is skipped is the release of every object still alive
    and the interpreter's own state (it calls ``Py_AtExit`` functions and audit hooks too). Releasing an object can be seen only through

    * a finalizer (``__del__``, every io object, generator, coroutine, socket, ``os.scandir`` iterator):
      none may be alive among the objects the collector tracks, the parent's (listed when its imports
      end) and the command's, except the standard streams (flushed; never closed: the interpreter made
      them with closefd off), closed or read-only io objects, in-memory buffers, generators never
      started or finished, sockets, the library objects of ``_IDLE_WHEN_STOPPED`` in the state named
      there, and the libraries' own generators of ``_MODE_SESSIONS`` (a mode entered for good while
      importing, whose exit sets a flag back); the finalizers of sockets and of scandir iterators (the
      only untracked objects that have one) only warn, with a ResourceWarning (which must be ignored),
      and close;
    * a weak reference's callback: only those that merely drop an entry of a weak container (the
      standard library's weak dictionaries and sets, abc's registries, thread locals, logging's handler
      list, ctypes' caches), pybind11's on the types it watches (it forgets them), and
      ``weakref.finalize``'s after atexit (inert from then on; the libraries' own are looked at then);
    * what the collector itself does (callbacks, debug output), a trace or profile function, an audit
      hook added after the parent's (but the task kit's data guard's, ``_QUIET_HOOK_ADDERS``): none
      may be set; a Python thread still running: none may run;
    * what freeing does beyond memory, descriptors and mappings, which exit releases just the same:
      of the standard library's types only sqlite3's and dbm's do more (neither may be imported); the
      command's tracked objects may be of Python classes, the standard library's types and those of
      ``_FREES_MEMORY_ONLY`` (torch's tensors, numpy's arrays and generators, ...) and
      ``_FREES_MEMORY_ONLY_IN`` (pandas', pydantic's) only; the extension types' untracked objects
      (numpy's arrays) and those the parent's libraries made while importing are taken to free memory
      only. So is a library loaded after the fork that is installed with the interpreter or the
      system; one from anywhere else turns the short ending off, as does any whose dynamic symbols
      name ``Py_AtExit``.

    A status that the interpreter sets at its very end (KeyboardInterrupt: a signal; a stream that
    cannot flush: 120) turns it off too."""

    status = None            # what the command's interpreter exits with, where plainly known
    refusal = None           # why no command of this parent ends short (set when its imports end)
    watched = ()             # (weak reference, whether its finalizer is idle) for the parent's objects
    streams = frozenset()    # ids of the standard streams' layers
    code_files = frozenset()  # executable files mapped when the imports ended
    objects_loaded = None    # libraries the dynamic linker had loaded by then (glibc's count)
    hooked = False           # an audit hook was added after the parent's guard
    finalizers = None        # weakref.finalize, if the libraries made any: inert once its atexit has run
    c_handlers = "not probed"  # what the C library's exit handlers were seen to do beyond releasing memory
    c_registered = False     # a C exit handler may have been registered through ctypes since the probe
    sandboxed = False        # the command is pid 2 of its own namespace, whose init kills all that is left
    llvmlite = None          # llvmlite's finalizers and shutdown flag as the parent's imports made them
    grouped = False          # the command is in a control group of the step's
    tasks_max = None         # that group's limit on tasks (cgroup's pids.max), where there is one
    written = ()             # (address, pages) of this parent's memory that a command's ending writes to
    probe = None             # in the probe that finds them: (pagemap, pipe, the spans to look at)

    @staticmethod
    def status_of(exc):
        """The exit status the interpreter gives a script that raised ``exc`` (None: it ends by a signal)."""
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None:
                return 0
            if isinstance(code, int):
                return int(code) if -(1 << 31) <= code < (1 << 31) else None
            return 1  # printed by the interpreter, before it finalizes
        return None if isinstance(exc, KeyboardInterrupt) else 1

    @classmethod
    def prepare(cls):
        """In the parent, its imports done: what of its own objects could make an ending visible."""
        layers = set()
        for stream in (sys.__stdin__, sys.__stdout__, sys.__stderr__):
            buffer = getattr(stream, "buffer", None)
            layers |= {id(stream), id(buffer), id(getattr(buffer, "raw", None))}
        cls.streams = frozenset(layers - {id(None)})
        watched, refusal = [], cls.hooked and "an audit hook was added while importing"
        seen, codes = {}, _dropping_codes()
        cls.llvmlite = _llvmlite_as_made()
        for obj in gc.get_objects():
            kind = type(obj)
            if _is_weak(kind):
                callback = _weak_callback(obj)
                weakref = sys.modules.get("weakref")
                if weakref is not None and isinstance(callback, weakref.finalize):
                    # called by weakref's atexit handler, registered after this one's, before it: the
                    # command's ending looks (_left_to_see) that it did run and left them all inert
                    cls.finalizers = weakref.finalize
                elif not _unseen_when_freed(obj, callback, codes):
                    refusal = refusal or f"a weak reference of the libraries calls back {callback!r}"[:200]
                continue
            if kind not in seen:
                seen[kind] = _finalizer_check(kind) if getattr(kind, "__del__", None) is not None else None
                if kind is types.GeneratorType:
                    # the libraries' own generators only: their code is the library's, as a command's need not be
                    seen[kind] = lambda g, idle=seen[kind]: idle(g) or _sets_a_mode_back(g)
            check = seen[kind]
            if check is None:
                continue
            if isinstance(check, str):
                refusal = refusal or f"the libraries hold {check}"
                continue
            try:
                watched.append((_weakref.ref(obj), check))
            except TypeError:
                # one without weak references (its class has __slots__): judged now, as its library made it
                if check not in _UNSEEN_FINALIZERS.values() or not check(obj):
                    refusal = refusal or f"the libraries hold an object with a finalizer ({kind.__qualname__})"
        cls.watched = tuple(watched)
        cls.code_files = frozenset(_code_files())
        cls.objects_loaded = _objects_loaded()
        refusal = refusal or next((f"{path} registers Py_AtExit functions" for path in sorted(cls.code_files)
                                   if _registers_at_exit(path)), None)
        cls.refusal = refusal or None

    @classmethod
    def at_exit(cls):
        """The last atexit handler of a command: end here where the rest could not be seen."""
        try:
            status = cls.status
            if status is None or cls.refusal is not None or _left_to_see() is not None:
                return
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name, None)
                if stream is not None and not _closed(stream):
                    stream.flush()  # as the interpreter does next: one that cannot flush ends in full
            for stream in (sys.__stdout__, sys.__stderr__):
                if stream is not None and not _closed(stream):
                    stream.flush()  # what their release would have flushed
            if cls.probe is not None:
                _PYTHON_LIBC.fflush(None)
                _report_written(*cls.probe)
            if cls.c_handlers is None and not cls.c_registered and _no_code_since_the_fork():
                # what the C library's exit would do last (its handlers, probed, only release memory)
                _PYTHON_LIBC.fflush(None)
                _memory_kept_past_the_exit()
                os._exit(status)
            # holding the interpreter's lock, as a finalizing interpreter keeps other threads out of it
            _PYTHON_LIBC.exit(status)
        except BaseException:  # noqa: BLE001 - whatever happens here, the interpreter ends as usual
            return


def _closed(stream):
    """The interpreter's test before it flushes a standard stream: an error reads as open."""
    try:
        return bool(stream.closed)
    except Exception:  # noqa: BLE001
        return False

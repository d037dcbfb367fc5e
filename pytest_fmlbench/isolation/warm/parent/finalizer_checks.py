"""What freeing an object could show: weak references' callbacks and finalizers, each judged to do
nothing that could be seen (drop a container's entry, release memory) or not.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import sys
import ctypes
import _socket
import types
import _weakref


def _weak_callback(ref):
    if type(ref) in (_weakref.ProxyType, _weakref.CallableProxyType):
        # a proxy does not show its callback: read it where CPython's PyWeakReference keeps it
        slot = id(ref) + 3 * ctypes.sizeof(ctypes.c_void_p)
        if not ctypes.c_void_p.from_address(slot).value:
            return None
        return ctypes.py_object.from_address(slot).value
    return ref.__callback__


def _dropping_codes():
    """The code of the callbacks that only drop an entry of the standard library's weak containers."""
    codes = set()
    for module, owner in (("weakref", "WeakValueDictionary"), ("weakref", "WeakKeyDictionary"),
                          ("_weakrefset", "WeakSet")):
        init = getattr(getattr(sys.modules.get(module), owner, None), "__init__", None)
        codes |= {c for c in getattr(getattr(init, "__code__", None), "co_consts", ()) if isinstance(c, types.CodeType)}
    logging = sys.modules.get("logging")
    if logging is not None and hasattr(logging, "_removeHandlerRef"):
        codes.add(logging._removeHandlerRef.__code__)
    return codes


def _callback_drops_an_entry(callback, codes):
    """Whether a weak reference's callback only removes an entry of a container (or does nothing)."""
    if callback is None:
        return True
    kind = type(callback)
    if kind is types.BuiltinMethodType:
        # abc's registries and caches, threading.local's per-thread dictionaries
        return callback.__name__ in ("_destroy", "_localdummy_destroyed") and callback.__module__ is None and \
            isinstance(callback.__self__, _weakref.ref)
    if (kind.__module__, kind.__qualname__) == ("_ctypes", "DictRemover"):
        return True  # ctypes' caches
    weakref = sys.modules.get("weakref")
    if weakref is not None and isinstance(callback, weakref.finalize):
        return weakref.finalize._shutdown  # set once atexit has called the finalizers: inert from then on
    return getattr(callback, "__code__", None) in codes


def _unseen_when_freed(ref, callback, codes):
    """Whether what a weak reference calls back when its referent is freed could not be seen."""
    return _callback_drops_an_entry(callback, codes) or _forgets_a_type(ref, callback) or _pops_from_a_dict(ref, callback)


def _function_code(source):
    return next(const for const in compile(source, "<reference>", "exec").co_consts if isinstance(const, types.CodeType))


# the whole of a callback that drops its reference from a dictionary through a bound ``pop`` it was given
# as a default argument, numba's two: its interned types (``def _on_type_disposal(wr, _pop=_typecache.pop):
# _pop(wr, None)``) and its typing context's globals (``def on_disposal(wr, pop=self._globals.pop): pop(wr)``,
# which raises, printed, where the entry is gone)
_POPS_ITS_DEFAULT = _function_code("def _(ref, _pop=None):\n    _pop(ref, None)\n")
_POPS_ITS_DEFAULT_OR_RAISES = _function_code("def _(ref, _pop=None):\n    _pop(ref)\n")
_CODE_FIELDS = ("co_code", "co_consts", "co_names", "co_argcount", "co_kwonlyargcount", "co_nlocals", "co_freevars")
_CO_NESTED = 0x10  # a function defined in another: the same code


def _pops_from_a_dict(ref, callback):
    """Whether a weak reference's callback is a function whose only statement calls its last default, a
    dictionary's own bound ``pop``, with the reference (and None, or the reference is in it): it drops
    an entry, memory only."""
    if type(callback) is not types.FunctionType or callback.__kwdefaults__:
        return False
    code = callback.__code__
    shape = next((reference for reference in (_POPS_ITS_DEFAULT, _POPS_ITS_DEFAULT_OR_RAISES)
                  if all(getattr(code, name) == getattr(reference, name) for name in _CODE_FIELDS)
                  and code.co_flags & ~_CO_NESTED == reference.co_flags), None)
    pop = (callback.__defaults__ or (None,))[-1]
    if shape is None or type(pop) is not types.BuiltinMethodType or pop.__name__ != "pop" \
            or not isinstance(pop.__self__, dict):
        return False
    return shape is _POPS_ITS_DEFAULT or dict.__contains__(pop.__self__, ref)


def _forgets_a_type(ref, callback):
    """pybind11 (torch's bindings, among others) watches each Python type it has met with a weak
    reference whose callback, a lambda of its own, erases the type from its caches: memory only. Its
    other weak references with a lambda (``keep_alive``) watch instances, not types. The lambda is bound
    to its function record: an object of pybind11's own type, or before pybind11 2.12 a capsule, unnamed
    or named by pybind11 (TensorFlow's bindings)."""
    if type(callback) is not types.BuiltinMethodType or callback.__name__ != "":
        return False
    record = callback.__self__
    kind = type(record)
    if kind.__module__ == "pybind11_builtins" and kind.__name__.startswith("pybind11_detail_function_record"):
        return isinstance(ref(), type)
    if (kind.__module__, kind.__qualname__) == ("builtins", "PyCapsule"):
        return _capsule_name(record) in (None, b"pybind11_function_record_capsule") and isinstance(ref(), type)
    return False


def _capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule)


def _is_weak(kind):
    return issubclass(kind, _weakref.ref) or kind in (_weakref.ProxyType, _weakref.CallableProxyType)


def _finalizer_check(kind):
    """For a type with a finalizer: a test that an object's finalizer would do nothing, or why not."""
    if kind in _IO_TYPES:
        return lambda f: id(f) in _Ending.streams or f.closed or not f.writable()
    if kind in _MEMORY_IO_TYPES:
        return lambda f: True
    if issubclass(kind, _socket.socket) and kind.__del__ is _socket.socket.__del__:
        return lambda s: True  # it warns (ResourceWarning, ignored or no short ending) and closes
    if kind is types.GeneratorType:
        # closing a generator that never started or has finished runs none of its code
        return lambda g: not g.gi_running and (not g.gi_suspended or _closes_quietly(g))
    if kind is types.CoroutineType:
        return lambda c: c.cr_frame is None  # one never awaited warns
    if kind is types.AsyncGeneratorType:
        return lambda a: a.ag_frame is None
    idle = _IDLE_WHEN_STOPPED.get((kind.__module__, kind.__qualname__))
    if idle is not None:
        return idle
    owner = next((base for base in kind.__mro__ if "__del__" in base.__dict__), None)
    releases = _UNSEEN_FINALIZERS.get((owner.__module__, owner.__qualname__)) if owner is not None else None
    if releases is not None and getattr(sys.modules.get(owner.__module__), owner.__qualname__, None) is owner:
        return releases
    if _does_nothing(kind.__del__):
        return lambda obj: _does_nothing(type(obj).__del__)  # numba's environments: it may be replaced since
    return f"an object with a finalizer ({kind.__module__}.{kind.__qualname__})"


_RETURNS = _function_code("def _(self):\n    return\n")


def _does_nothing(finalizer):
    """Whether a finalizer is a function whose whole body is ``return`` (or ``pass``)."""
    if type(finalizer) is not types.FunctionType:
        return False
    code = finalizer.__code__
    return all(getattr(code, name) == getattr(_RETURNS, name) for name in _CODE_FIELDS) \
        and code.co_flags & ~_CO_NESTED == _RETURNS.co_flags


def _deletes_its_tf_metric(metric):
    """TensorFlow's ``Metric.__del__`` returns at once where the metric lacks its methods or its C++
    metric (AttributeError), and otherwise calls the delete method of its arity on it: it must be a
    ``TFE_MonitoringDelete<Kind>`` of TensorFlow's bindings, and the metric one of that kind (deleting
    it unregisters it from the process's registry of metrics: memory only)."""
    try:
        methods, arity, held = metric._metric_methods, metric._label_length, metric._metric
    except AttributeError:
        return True
    except Exception:  # noqa: BLE001 - the finalizer would raise it: printed
        return False
    if type(methods) is not list or type(arity) is not int or not 0 <= arity < len(methods):
        return False
    monitoring = sys.modules.get("tensorflow.python.eager.monitoring")
    if type(methods[arity]) is not getattr(monitoring, "_MetricMethod", None):
        return False
    deleter = methods[arity].delete
    name = getattr(deleter, "__name__", "")
    bindings = sys.modules.get("tensorflow.python._pywrap_tfe")
    return type(deleter) is types.BuiltinFunctionType and name.startswith("TFE_MonitoringDelete") \
        and getattr(bindings, name, None) is deleter and type(held).__module__ == "tensorflow.python._pywrap_tfe" \
        and type(held).__name__ == "TFE_Monitoring" + name[len("TFE_MonitoringDelete"):]


def _llvmlite_shut_down(obj):
    """llvmlite's objects (numba's compiled code, its LLVM modules and target machines) dispose of
    their LLVM resource when freed, unless llvmlite's atexit handler has run: it sets the flag their
    finalizer looks at first, through a function bound as its default. By a command's ending it has
    run; the finalizer, that function and the flag must be the ones llvmlite made as the parent
    imported it."""
    made = _Ending.llvmlite
    common = sys.modules.get("llvmlite.binding.common")
    if made is None or common is None:
        return False
    finalizers, test, test_code, flag = made
    finalizer = type(obj).__del__
    return any(finalizer is function and finalizer.__code__ is code for function, code in finalizers) \
        and finalizer.__defaults__ == (test,) and test.__code__ is test_code and test.__defaults__ == (flag,) \
        and common._shutting_down is flag and type(flag) is list and flag[:1] == [True]


def _llvmlite_as_made():
    """What ``_llvmlite_shut_down`` compares with, as the parent's imports left it."""
    common, ffi = sys.modules.get("llvmlite.binding.common"), sys.modules.get("llvmlite.binding.ffi")
    test = getattr(common, "_is_shutting_down", None)
    if ffi is None or type(test) is not types.FunctionType:
        return None
    finalizers = tuple((kind.__dict__["__del__"], kind.__dict__["__del__"].__code__)
                       for kind in (getattr(ffi, "ObjectRef", None), getattr(ffi, "OutputString", None))
                       if isinstance(kind, type) and type(kind.__dict__.get("__del__")) is types.FunctionType)
    return finalizers, test, test.__code__, getattr(common, "_shutting_down", None)


# finalizers of a library's classes that could not be seen at a command's end, with a test of the
# object: (module, class that defines __del__) -> test
_UNSEEN_FINALIZERS = {
    # they release what their object holds in TensorFlow's C++ core and nothing else
    ("tensorflow.python.eager.monitoring", "Metric"): _deletes_its_tf_metric,
    # they do nothing once llvmlite's atexit handler has run
    ("llvmlite.binding.ffi", "ObjectRef"): _llvmlite_shut_down,
    ("llvmlite.binding.ffi", "OutputString"): _llvmlite_shut_down,
}


def _closes_quietly(generator):
    """Whether closing a suspended generator runs none of its code: no handler of its frame (a try,
    except, with or finally) covers the point where it is suspended, so the GeneratorExit raised there
    leaves it at once (numba's ``stream_list``, suspended in ``while True: ... yield``). The handler
    the compiler wraps around every generator's body from Python 3.12 (it turns a StopIteration into a
    RuntimeError and re-raises anything else) is no code of the generator's. One suspended in a
    ``yield from`` closes what it delegates to first (its ``close``: any code)."""
    if generator.gi_yieldfrom is not None or not hasattr(generator.gi_code, "co_exceptiontable"):
        return False  # (before 3.11 handlers were set up as the code ran, not in a table)
    frame, code = generator.gi_frame, generator.gi_code
    targets = [target for start, end, target in _exception_table(code) if start <= frame.f_lasti < end]
    if not targets:
        return True
    import dis

    at = {instruction.offset: instruction for instruction in dis.get_instructions(code)}
    return all(target in at and at[target].opname == "CALL_INTRINSIC_1"
               and "STOPITERATION_ERROR" in at[target].argrepr for target in targets)


def _exception_table(code):
    """(start, end, target) in bytes of every entry of a code object's exception table (Python 3.11
    and later: each entry four numbers, each in 6-bit groups, most significant first, 64 marking that
    another group follows, 128 the first byte of an entry; offsets in 2-byte code units)."""
    numbers, value, entries = [], 0, []
    for byte in code.co_exceptiontable:
        value = (value << 6) | (byte & 63)
        if not byte & 64:
            numbers.append(value)
            value = 0
    for i in range(0, len(numbers) - 3, 4):
        start, length, target = numbers[i] * 2, numbers[i + 1] * 2, numbers[i + 2] * 2
        entries.append((start, start + length, target))
    return entries

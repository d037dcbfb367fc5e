"""Warm interpreters (isolation.warm), a command's ending: where nothing of the interpreter's teardown could
be seen, a warm command ends short (and the pages its ending writes are copied ahead); where something
could, it ends as a script does."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.isolation.warm import built_ahead

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def _ending_usage(tmp_path: Path, scripts: dict[str, str], imports=(("numpy", []),),
                  lib: Path | None = None) -> tuple[dict, str]:
    """Each script run as a harness command forked from one parent that imported ``imports`` (numpy), or
    with ``lib`` as an experiment whose parent imports them from there: its usage, and the parent's log."""
    from pytest_fmlbench.workspace import HARNESS_PYTHON

    wanted = [(module, list(names)) for module, names in imports]
    pool = warm.WarmPool(wanted if lib else [], [] if lib else wanted, False, tmp_path / "logs", [].append)
    env = scrubbed_env({"PYTHONPATH": str(lib)} if lib else {})
    kind, python = ("experiment", [sys.executable]) if lib else ("harness", HARNESS_PYTHON)
    usage = {}
    try:
        for name, source in scripts.items():
            script = tmp_path / f"{name}.py"
            script.write_text(source)
            proc = pool.launcher(kind, [*python, str(script)], tuple(python[1:]), tmp_path, env)(None)
            assert proc is not None, name
            proc.stdout.read()
            assert proc.wait(120) == 0, proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
            usage[name] = proc.usage
    finally:
        pool.close()
    return usage, "".join(p.read_text() for p in (tmp_path / "logs").glob("warm_parent_*.log"))


def test_a_command_whose_end_nobody_could_see_skips_the_teardown(tmp_path):
    """Freeing the parent's objects at exit writes to the pages the command shares with the parent (each
    copied on write): a command that leaves nothing whose end could be seen skips that, one that leaves
    a finalizer to run (a generator suspended in a try on a library: closing it runs its finally) ends
    in full. One suspended outside any try is closed without running anything of its own."""
    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\n"
    usage, log = _ending_usage(tmp_path, {
        "short": work,
        "short-generator": work + "import json\ndef gen():\n    while True:\n        yield 1\n"
                                  "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n",
        "full": work + ("import json\ndef gen():\n    try:\n        yield 1\n    finally:\n        print('closed')\n"
                        "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n"),
        # no try around its yield from, but what it delegates to is closed first
        "full-delegating": work + ("import json\nclass Closes:\n    def __iter__(self):\n        return self\n"
                                   "    def __next__(self):\n        return 1\n    def close(self):\n"
                                   "        print('closed')\ndef gen():\n    yield from Closes()\n"
                                   "json._fmlbench_gen = gen()\nnext(json._fmlbench_gen)\n"),
        # no ending at all: what the fork and the work cost
        "none": work + "import os\nos._exit(0)\n",
    })
    assert "short endings: on" in log, log
    faults = {name: u.minor_faults for name, u in usage.items()}
    for short in ("short", "short-generator"):
        for full in ("full", "full-delegating"):
            assert faults[short] - faults["none"] < (faults[full] - faults["none"]) / 3, faults


def _check_short_and_full(tmp_path: Path, scripts: dict[str, str], imports=(("numpy", []),),
                          lib: Path | None = None) -> None:
    """Run ``scripts`` as ``_ending_usage`` does: the parent ends its commands short, and those named
    ``short*`` skipped the teardown where those named ``full*`` did not."""
    usage, log = _ending_usage(tmp_path, scripts, imports, lib)
    assert "short endings: on" in log, log
    ok, faults = _short_and_full(usage)
    assert ok, faults


def _short_and_full(usage: dict) -> bool:
    """Whether the commands named ``short*`` skipped the teardown and those named ``full*`` did not, by
    the pages each wrote (a teardown writes to nearly every page shared with the parent)."""
    faults = {name: u.minor_faults - usage["none"].minor_faults for name, u in usage.items() if name != "none"}
    fewest_full = min(f for name, f in faults.items() if name.startswith("full"))
    return all(f < fewest_full / 2 for name, f in faults.items() if name.startswith("short")), faults


def test_the_data_guard_s_hook_and_numpy_s_generators_leave_the_ending_short(tmp_path):
    """The task kit's data guard adds an audit hook (called at the interpreter's end, where it looks at
    nothing but "open" events): a command that sealed its data with it, or holds numpy generators,
    skips the teardown; one that adds a hook of its own, even the guard's with a line changed, ends in
    full."""
    guard = (REPO / "pytest_fmlbench" / "taskkit" / "data_guard.py").read_text()
    (tmp_path / "data_guard.py").write_text(guard)
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "data_guard.py").write_text(guard.replace("    sys.addaudithook(hook)", "    hook.changed = True\n    sys.addaudithook(hook)"))
    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\nrng = numpy.random.default_rng(0)\nold = numpy.random.RandomState(1)\n"
    seal = "import sys\nsys.path.insert(0, {folder!r})\nimport data_guard\ndata_guard.seal([{folder!r} + '/sealed'])\n"
    _check_short_and_full(tmp_path, {
        "short-sealed": work + seal.format(folder=str(tmp_path)),
        "full-own-hook": work + "import sys\nsys.addaudithook(lambda event, args: None)\n",
        "full-changed-guard": work + seal.format(folder=str(changed)),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("numpy.random", [])])


def test_arrays_frames_and_models_left_alive_leave_the_ending_short(tmp_path):
    """What scripts keep in their globals to the end (a memory-mapped array, which the collector tracks,
    a pandas frame, a pydantic model) frees memory only: the teardown is skipped. A finalizer beside
    them ends it in full."""
    pytest.importorskip("pandas")
    pytest.importorskip("pydantic")
    (tmp_path / "data.npy").write_bytes(b"")
    work = ("import numpy, pandas, pydantic, sys\n"
            f"numpy.save({str(tmp_path / 'data.npy')!r}, numpy.arange(12.0))\n"
            f"mapped = numpy.load({str(tmp_path / 'data.npy')!r}, mmap_mode='r')\n"
            "frame = pandas.DataFrame({'x': mapped, 'y': mapped * 2}).groupby(mapped > 5).mean()\n"
            "class Config(pydantic.BaseModel):\n    lr: float = 0.1\nconfig = Config(lr=0.5)\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + "class Noisy:\n    def __del__(self):\n        sys.stderr.write('freed')\nkept = Noisy()\n",
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("pandas", []), ("pydantic", [])])


def test_a_library_loaded_after_the_fork_ends_short_only_if_it_is_installed(tmp_path):
    """A module of the standard library or of site-packages that the parent had not loaded is taken as
    the parent's libraries are; a library from anywhere else (a step's own build, say) could do anything
    when its objects are freed: that command ends in full."""
    import _statistics

    work = "import numpy\nnumpy.linalg.inv(numpy.eye(3))\n"
    built = tmp_path / "built" / Path(_statistics.__file__).name
    built.parent.mkdir()
    shutil.copy(_statistics.__file__, built)
    _check_short_and_full(tmp_path, {
        "short": work + "import _statistics, termios\n",
        "full": work + f"import ctypes\nctypes.CDLL({str(built)!r})\n",
        # a library loaded since the fork: the C library's exit handlers run in every ending
        "none": work + "import ctypes\nctypes.PyDLL(None).exit(0)\n",
    })


def test_numba_s_interned_types_leave_the_ending_short(tmp_path):
    """numba interns its types with weak references whose callback drops the type from a dictionary
    (``_pop(wr, None)``, ``_pop`` a default bound to the dictionary's pop): memory only. A parent that
    imported numba ends its commands short, one that made numba types too; a callback of the same
    shape whose pop is a dictionary subclass's own (it prints) ends in full."""
    pytest.importorskip("numba")
    work = "import numba\nkind = numba.types.Array(numba.types.float64, 2, 'C')\n"
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + ("import weakref\nclass Loud(dict):\n    def pop(self, *args):\n        print('popped')\n"
                        "        return super().pop(*args)\ncache = Loud()\n"
                        "def gone(ref, _pop=cache.pop):\n    _pop(ref, None)\n"
                        "class Kept:\n    pass\nkept = Kept()\ncache[weakref.ref(kept, gone)] = 1\n"),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("numba", [])])


JITTED = """
import numba

@numba.njit("int64(int64)")
def step(x):
    return x + 1
"""


def test_numba_s_compiled_code_leaves_the_ending_short(tmp_path):
    """A library that compiles with numba as it is imported (ART's harness does) leaves llvmlite's
    objects (their finalizers do nothing once llvmlite's atexit handler has run) and numba's typing
    context's weak references (their callback pops them from its globals) in the parent: its commands
    end short, one that compiles code of its own too. One that replaced llvmlite's finalizer (it prints)
    ends in full."""
    pytest.importorskip("numba")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fmlbench_jitted.py").write_text(JITTED)
    work = ("import numba, fmlbench_jitted\nfmlbench_jitted.step(1)\n"
            "@numba.njit\ndef twice(x):\n    return 2 * x\ntwice(3)\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + "import llvmlite.binding.ffi as ffi\nffi.ObjectRef.__del__ = lambda self: print('disposed')\n",
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("fmlbench_jitted", [])], lib=lib)


def test_tensorflow_s_bindings_and_metrics_leave_the_ending_short(tmp_path):
    """TensorFlow's bindings (an older pybind11) watch their types with weak references whose callback is
    bound to a capsule; its monitoring metrics (classes with __slots__, no weak reference) delete their
    C++ metric when freed: both memory only. A parent that imported TensorFlow's dtypes ends its commands
    short, one that made a metric of its own too; one whose metric's delete method was replaced (it
    prints) ends in full."""
    pytest.importorskip("tensorflow")
    work = ("from tensorflow.python.eager import monitoring\n"
            "gauge = monitoring.BoolGauge('/fmlbench/test/gauge', 'a gauge of the test')\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full": work + ("gauge._metric_methods = [method._replace(delete=lambda metric: print('deleted'))\n"
                        "                        for method in gauge._metric_methods]\n"),
        "none": work + "import os\nos._exit(0)\n",
    }, imports=[("numpy", []), ("tensorflow.python.framework.dtypes", []), ("tensorflow.python.eager.monitoring", [])])


def test_a_torch_command_ends_short(tmp_path):
    """torch's bindings watch their types with weak references whose callbacks only forget them; its
    pytree module keeps a mode entered for good; its tensors and the classes pybind11 makes free memory
    only. A command that leaves a model and tensors behind skips the teardown; one that enters such a
    mode itself, replaces what that mode's exit calls, keeps weakref's finalizers from being called at
    exit or leaves a tensor with a finalizer ends in full. (torch's C++ static destructors run in every ending, as the C library's
    exit runs them: the reference here.)"""
    pytest.importorskip("torch")
    pytest.importorskip("optree")  # torch's pytree module enters its mode when optree is there
    work = ("import torch\nmodel = torch.nn.Linear(4, 2)\nloss = model(torch.randn(8, 4)).pow(2).mean()\n"
            "loss.backward()\n")
    _check_short_and_full(tmp_path, {
        "short": work,
        "full-own-mode": work + ("import optree\nmode = optree.dict_insertion_ordered(True, namespace='x')\n"
                                 "mode.__enter__()\n"),
        "full-a-tensor-s-finalizer": work + ("class Noisy(torch.Tensor):\n    def __del__(self):\n        print('freed')\n"
                                             "kept = torch.randn(2).as_subclass(Noisy)\n"),
        "full-mode-s-exit-replaced": work + ("import optree.registry, types\n"
                                             "optree.registry._C = types.SimpleNamespace(set_dict_insertion_ordered="
                                             "lambda *args: print('set back'))\n"),
        "full-finalizers-not-called": work + "import atexit, weakref\natexit.unregister(weakref.finalize._exitfunc)\n",
        "none": work + "import ctypes\nctypes.PyDLL(None).exit(0)\n",
    }, imports=[("torch", []), ("torch.utils._cxx_pytree", [])])


EXIT_WRITER = """
import ctypes
_libc = ctypes.CDLL(None)
_libc.strdup.restype = ctypes.c_void_p
_libc.__cxa_atexit(_libc.puts, ctypes.c_void_p(_libc.strdup(b"library exit handler ran")), None)
"""


def _warm_outputs(tmp_path: Path, module: str, source: str, script: str, runs: int) -> tuple[list[str], str, int]:
    """Run ``script`` ``runs`` times from a plain warm pool whose parent imports ``module``: the commands'
    outputs, the parent's log and how many were built ahead."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"{module}.py").write_text(source)
    path = tmp_path / "script.py"
    path.write_text(script)
    env = scrubbed_env({"PYTHONPATH": str(lib)})
    pool = warm.WarmPool([(module, [])], [], False, tmp_path / "logs", [].append)
    outputs = []
    try:
        for _ in range(runs):
            proc = pool.launcher("experiment", [sys.executable, str(path)], (), tmp_path, env)(None)
            assert proc is not None
            outputs.append(proc.stdout.read().decode())
            assert proc.wait(60) == 0, proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
    finally:
        pool.close()
    log = "".join(p.read_text() for p in (tmp_path / "logs").glob("warm_parent_*.log"))
    return outputs, log, pool.ahead_used


def test_a_library_whose_c_exit_handlers_do_more_than_release_memory_has_them_run(tmp_path):
    """The C library's exit handlers of the parent's libraries are skipped at a command's end only if a
    fork of the parent, running them under a filter that stops any other system call, saw them release
    memory and nothing else (torch's take a tenth of a second and more). A library whose handler writes
    has it run at every command's end, as a cold start does."""
    script = "import fmlbench_exit_writer\nprint('script ran', flush=True)\n"
    [out], log, _ = _warm_outputs(tmp_path, "fmlbench_exit_writer", EXIT_WRITER, script, 1)
    env = scrubbed_env({"PYTHONPATH": str(tmp_path / "lib")})
    cold = subprocess.run([sys.executable, str(tmp_path / "script.py")], env=env, capture_output=True, text=True,
                          check=True)
    assert cold.stdout == "script ran\nlibrary exit handler ran\n", cold
    assert "the C library's exit handlers: they make other system calls" in log, log
    assert out == cold.stdout


ENDING_WRITES = """
import atexit

# objects of the parent that every command's ending writes to (their reference counts)
BIG = [[] for _ in range(20000)]


def _look():
    for item in BIG:
        pass


atexit.register(_look)
"""

# which pages of those objects this process holds alone, looked at without writing to them (their
# addresses read from the list's item array)
OWNED = """
import ctypes, mmap, fmlbench_ending_writes
big = fmlbench_ending_writes.BIG
items = (ctypes.c_void_p * len(big)).from_address(ctypes.c_void_p.from_address(id(big) + 24).value)
pages = sorted({address // mmap.PAGESIZE for address in items})
owned = 0
with open("/proc/self/pagemap", "rb") as pagemap:
    for page in pages:
        pagemap.seek(page * 8)
        entry = int.from_bytes(pagemap.read(8), "little")
        owned += bool(entry >> 63 & 1 and entry >> 56 & 1)
print(f"OWNED {owned} {len(pages)}", flush=True)
"""


def test_a_command_built_ahead_copies_the_pages_its_ending_writes_before_go(tmp_path, monkeypatch):
    """A command's ending writes to pages it shares with the parent (reference counts of the parent's
    objects, in the atexit handlers and this mechanism's look at what is left): each write copies a
    page, a fault of 10-20 us. A fork of the parent ends as an empty script does and reports those
    pages; a command built ahead copies them while it waits for go. The first command, not built
    ahead, shares them still; the one built ahead owns them (with nothing else of the parent copied
    ahead here, as when it is built beside another command)."""
    monkeypatch.setattr(built_ahead, "OWN_PAGES_MAX", 0)
    outputs, log, used_ahead = _warm_outputs(tmp_path, "fmlbench_ending_writes", ENDING_WRITES, OWNED, 2)
    assert used_ahead == 1
    (first_owned, pages), (second_owned, same) = [map(int, out.split()[1:]) for out in outputs]
    assert pages == same and pages > 200
    assert first_owned < pages / 10 and second_owned > pages * 9 / 10, (first_owned, second_owned, pages)
    learnt = int(re.search(r"pages an ending writes, copied ahead: (\d+)", log).group(1))
    assert learnt >= pages, log


EXIT_FILE_WRITER = """
import atexit


def _write():
    with open(FILE, "a") as fh:
        fh.write("handler ran\\n")


atexit.register(_write)
"""


def test_finding_the_pages_an_ending_writes_does_nothing_else(tmp_path):
    """The fork that ends as an empty script does runs the libraries' atexit handlers: under a filter
    that ends it at any system call but those of memory and its own report, so a handler that does more
    (here, one that writes a file) is stopped before it does: nothing is copied ahead, and the
    commands' own endings run the handler as a cold start does, once each."""
    written = tmp_path / "exit.txt"
    source = f"FILE = {str(written)!r}\n" + EXIT_FILE_WRITER
    outputs, log, _ = _warm_outputs(tmp_path, "fmlbench_exit_file", source, "import fmlbench_exit_file\n", 2)
    assert "pages an ending writes, copied ahead: 0" in log, log
    assert written.read_text() == "handler ran\n" * 2


# an atexit handler that tries an import that finds nothing (as torch._dynamo's does at every exit: it
# tries ``import tabulate``), and writes to a table of its own
EXIT_IMPORT_TRIER = """
import atexit

TABLE = [[0] * 64 for _ in range(4096)]


def _dump():
    try:
        import fmlbench_not_installed  # noqa: F401
    except ImportError:
        pass
    for row in TABLE:
        row[0] += 1


atexit.register(_dump)
"""


def test_an_ending_that_tries_an_import_that_finds_nothing_has_its_pages_copied_ahead(tmp_path):
    """An import that finds nothing only looks at files' metadata along sys.path: the probe lets it
    through, learns the pages the ending writes (the handler's table among them), and the commands
    still end as a cold one does."""
    script = "import fmlbench_exit_import\nprint('script ran', flush=True)\n"
    outputs, log, ahead = _warm_outputs(tmp_path, "fmlbench_exit_import", EXIT_IMPORT_TRIER, script, 3)
    assert outputs == ["script ran\n"] * 3 and ahead == 2
    copied = int(re.search(r"pages an ending writes, copied ahead: (\d+)", log).group(1))
    assert copied >= 4096 // 8, log  # the table's rows, a few to a page, beside the ending's own

"""Warm interpreters: a step costs its compute, not Python's start-up.

Importing numpy, pandas, scikit-learn and fairlearn takes seconds; forking a process that holds them
takes milliseconds. Each run keeps two *warm parents* (``parent/``): one for its experiments and
one for its harness commands (prepare, evaluate). Each is an interpreter started with exactly the
environment and flags its commands get, that imported the task's heavy libraries and nothing else (no
task or agent code, not even this package), and that forks one child per command (while idle, ahead of
the request, so that a request costs no fork). A child is never reused: every command starts from the
same clean image.

What an experiment sees stays what it sees without warm starts
--------------------------------------------------------------
The harness builds every step's bubblewrap sandbox exactly as before, with the same arguments (binds,
masks, tmpfs for ``/tmp``, ``$HOME``, ``/dev/shm``, no network, the same user namespace), except that
its command is a holder (``sh`` waiting on a pipe). A child of the warm parent then

1. joins the step's control group (its memory and process limits) or applies the rlimits;
2. joins the sandbox's user, mount, IPC, UTS and network namespaces (``setns``), the holder is let go;
3. unshares a private copy of the mounts, a new PID namespace and a cgroup namespace rooted at the
   step's group, and forks the namespace's init (pid 1): it mounts a fresh ``/proc`` with bubblewrap's
   read-only covers, drops every capability (bounding and ambient sets too), sets no_new_privs, makes
   itself undumpable and handles no signal (so nothing inside can signal it), then forks the command;
4. the command (pid 2, parent 1, in the init's session, as bubblewrap runs it) closes every inherited
   descriptor, takes the step's stdin/stdout/stderr, working directory, environment, ``sys.argv``,
   ``sys.orig_argv`` and ``sys.path[0]``, shows its own ``/proc/self/cmdline`` and ``environ`` (and the
   init shows bubblewrap's), reseeds numpy's global generator (Python's own reseeds itself at fork),
   and runs the script as ``__main__`` at the top level of the interpreter, so its traceback, exit
   code, atexit handlers and thread joins are a script's. The task's editable modules are imported
   fresh: the parent never imported them. The command then ends as a script does: after its atexit
   handlers, where nothing the interpreter's teardown would still do could be seen (no finalizer left
   to run, no weak reference to call back, no new library loaded, ...: ``_Ending`` (``parent/ending.py``) lists
   what is checked and why), it calls the C library's ``exit`` at once, since freeing the objects it
   shares with the parent would copy nearly every page of them; otherwise the interpreter finalizes.
   The C library's exit handlers of the parent's libraries are skipped too where a fork of the parent
   saw them release memory and nothing else (``parent/exit_handler_probe.py``). Such a short
   ending also hands the command's memory to a keeper (``parent/memory_keeper.py``): a
   process made with that memory (CLONE_VM) and nothing else, no descriptor, every signal blocked,
   waiting in ``pause``. Its exit then releases no memory and is seen at once; the namespace's init
   (or, in plain mode, the parent, by the command's process group) kills the keeper once it has
   reaped the command, and the init reports the step's end once every other process of the namespace
   is reaped or is ending with no descriptor open (a keeper releasing memory runs nothing of its own).
   The release, 15-20 ms of a small task's step, then overlaps what comes next instead of delaying it.
   The keeper is one task more in the step's control group at its very end: none is made where that
   would pass the group's task limit.

Each parent then imports what the libraries it holds (those it was asked for and theirs) import on
their first use (``FIRST_USE_IMPORTS``: torch._dynamo, which torch imports when an optimizer is made,
half a second in every command otherwise; numpy.random). One that fails is left to the command.

What a warm step sees differently, on purpose: the parent's modules are already in ``sys.modules``
(with the warnings filters they installed), the collector's frozen generation holds them (at exit they
are cleared as modules, never collected as cyclic garbage: a weak reference the command hangs on one
may call back where a cold start's collector would drop it unnoticed), OpenBLAS's
thread pool starts at the first BLAS call rather than at import, the memory layout is the parent's
(the same in every step), and the sandbox's init cannot be traced or read (bubblewrap's can).
``tests/test_warm*.py`` compare everything else a script can observe, cold against warm.

Nothing a step does reaches a later one: every step gets a fresh sandbox (files in ``/tmp``,
``/dev/shm``, ``$HOME``), a fresh fork (modules, monkeypatches, environment, threads), a PID namespace
whose init takes everything the command left with it (child processes), and a copy-on-write copy of
the parent's memory that it cannot write back. The parent is out of reach: it is in no namespace of
the step (no pid to signal or trace, no ``/proc`` entry), it is undumpable, and it listens only on a
socket pair whose other end the harness alone holds. It never receives anything a step produced: the
child that stays outside the step's PID namespace reports the exit to the harness itself.

Harness commands run from their own warm parent, started with ``-s -E -B`` like them and importing
only what the harness's own code imports (pristine code; never the experiments' parent).

The next command, built ahead of its request
--------------------------------------------
A search repeats the same requests: the same validation command in the same workspace, then the same
evaluator. Once a command has ended, the pool builds the next one like it in a thread, when nothing
else runs or beside the other kind's command (``built_ahead.BuildTimes``): for an experiment, a fresh bubblewrap
sandbox built with the same arguments, a fresh control group with the same limits, the child that
joins them, the namespace's init and the process that becomes the command, which sets up everything
of the request that is not the script's own (descriptors, working directory, environment,
``sys.argv``, what ``/proc`` shows, numpy's generator seeded afresh), compiles the script (used at go
if the script reads the same then and its compilation warned of nothing, every warning an error
meanwhile) and reports ``ready``. Built while nothing runs, it then copies, while it waits for
``go``, the pages it shares with the parent (present in its private writable mappings; at most a
quarter of the step's memory limit and 1 GiB), so that the command's writes to them cost no copy in
its own time: without this, every first write to a shared page (a reference count, an allocator's
free list) is a copy-on-write fault in the middle of the command. Built beside a running command
(steps that follow one another at once), it copies nothing: that copy, of every page rather than
those the command will write, took a processor from the running command, and was seldom done by go.
Either way, before it reports ``ready``, it copies the pages that an ending writes to (a hundred or
more, each a fault of 10-20 us in the command's ending otherwise): the parent learns them once, from
a fork of itself that ends as an empty script does under a filter that allows nothing but memory and
its report (``parent/page_copies.py``), never from a command.
When the request comes and matches it exactly (the same request, the
same bubblewrap arguments and limits, and every path bubblewrap binds still the same file or folder,
held open since the build so that a new one cannot take its inode number: one replaced since would
show its old self inside, one removed nothing), the harness says go and the script starts;
otherwise what was built is discarded, unrun, and the request served as above. A run's end discards
what is left. ``out`` is emptied in place between steps (``artifacts.emptied``), not replaced, so
that the sandbox built ahead binds the folder the step uses.

What such a step sees that one built on request does not: its processes, its sandbox and its
``/tmp`` were made earlier (their start and creation times), and its memory is its own copy already.
Nothing of the previous step reaches it: it is built after that step's namespace has ended, from the
same clean parent, and nothing of the command runs before go (the workspace's modules are imported
by the script).

The parent imports on the host, not in a sandbox (a sandboxed parent could not enter the steps'
sandboxes, which are no descendants of its user namespace; bubblewrap inside bubblewrap cannot mount
/proc). So that its imports could not have gone otherwise inside, an audit hook refuses, while they
run, reading an existing file outside the trees the sandbox shows or a hidden data file, listing such
a folder, writing, starting a program from elsewhere than those trees and using the network; module
and mapped files must lie inside the visible trees. In the sandbox's private scratch folders (``/tmp``,
``/var/tmp``, ``/dev/shm``, ``$HOME``) a file may be made if it is gone again when the imports end
(tempfile's check that /tmp is writable), and a folder may be made where its parent exists (torch's
cache folder in /tmp): every child makes it again in its own fresh /tmp, as a cold import would have.
This sees what Python code does, not what a C extension or a program it runs (ctypes.util runs gcc)
does on its own at import, which the harness's evaluators, importing the same libraries outside any
sandbox, do today as well.

When warm starts are not safe, commands start cold, with one line in the log
------------------------------------------------------------------------------
The ready report says what forking could break or leak: a thread that keeps running across a fork
(a library's own pool that stops in its fork handler, as OpenBLAS's does, is fine), a GPU device
mapped (CUDA initialised), a writable shared mapping (children would share it), a descriptor left
open by a library, an import that failed or did something the guard refused. Any of these turns warm
starts off for that parent. A command whose form is not ``{python} script.py ARGS`` starts cold, as
does one whose script's folder holds a module of a name the parent has imported (a cold start would
import the local file instead). A failure of the mechanism itself (before the script's first line)
is retried cold. ``--cold-start`` turns all of it off.

Where each part lives, in the order a command goes through them
---------------------------------------------------------------
The harness's side (imported; ``WarmPool`` is what the runner and the workspaces use):

* ``imports``: what a parent imports (learnt from the task's files, or ``task.yaml``'s ``warm:``);
* ``sandbox_view``: what the sandbox shows, for the parent's import guard;
* ``parent_link``: starting one parent, its ready report, asking it to fork (the control socket);
* ``command``: one command started warm (its status lines, the holder of its sandbox, ``WarmProcess``);
* ``built_ahead``: the next command, built before its request;
* ``pool``: the parents of one run, and what run_command calls to start a command warm.

The parent's side, ``parent/``: a program of its own, compiled and run by ``parent/main.py``, never
imported (its ``__init__`` lists its parts and the messages between the two sides).
"""

from __future__ import annotations

from .command import HOLDER, CommandUsage, WarmProcess, child_env, script_command
from .imports import FIRST_USE_IMPORTS, declared_imports, kit_module_names, learn_imports, local_module_names
from .parent_link import PARENT_SCRIPT, ParentKey, StartsCold, WarmParent
from .pool import WARM_LOG, WarmPool, pool_for
from .sandbox_view import SandboxTrees, sandbox_trees

__all__ = ["FIRST_USE_IMPORTS", "HOLDER", "PARENT_SCRIPT", "WARM_LOG", "CommandUsage", "ParentKey", "SandboxTrees",
           "StartsCold", "WarmParent", "WarmPool", "WarmProcess", "child_env", "declared_imports", "kit_module_names",
           "learn_imports", "local_module_names", "pool_for", "sandbox_trees", "script_command"]

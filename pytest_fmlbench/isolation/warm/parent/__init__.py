"""A warm parent's program: an interpreter that has imported a task's heavy libraries and forks one child
per command.

Run by its script, ``main.py`` (never imported), which the harness (``warm.parent_link``) starts as
``python [flags] .../warm/parent/main.py FD``, FD one end of a SOCK_SEQPACKET socket pair whose other
end only the harness holds. It imports nothing of this package and no task or agent code, only the
standard library and the modules the harness names. See ``warm``'s docstring for the design and the
guarantees; this folder is the mechanism.

``main.py`` compiles the parts below, in this order, into one namespace (a script's top level: their
names are each other's globals, as in one file), then runs ``_main``. The order follows a command's way
through the parent:

* ``syscalls``: the C library's calls and the constants every part uses;
* ``import_guard``: the audit hook that keeps the imports to what the sandbox would have allowed;
* ``startup``: the imports, then the ready report of what could make a fork unsafe;
* ``fork_server``: the parent's loop, one fork per request, and the child up to the command's process;
* ``sandbox_entry``: joining the step's sandbox and becoming its PID namespace's init;
* ``command_process``: the process that becomes the command (what ``/proc`` shows, ``__main__``);
* ``page_copies``: a step built ahead copies the parent's pages before ``go``, and the probe that
  learns which pages an ending writes;
* ``exit_handler_probe``: the C library's exit handlers, run in a fork under a seccomp filter;
* ``ending``: a command's short ending (``_Ending``), where the teardown could not be seen;
* ``memory_keeper``: the process that holds a command's memory past its exit;
* ``finalizer_checks`` and ``ending_checks``: what freeing an object, and the teardown, could show.

This ``__init__`` describes the folder, for readers and for packaging: the parent never runs it.

Messages (JSON, one per packet; file descriptors ride along as SCM_RIGHTS):

* harness -> parent, first: ``{"imports": [[module, [from-names]], ...], "optional": bool, "guard": {...}|null}``
* parent -> harness: the ready report (what was imported, and what would make forking it unsafe)
* harness -> parent, per command: ``{"mode": "sandbox"|"plain", "script", "argv", "orig_argv", "cwd", "env",
  "ns_pid", "cgroup_procs", "tasks_max", "rlimits", "ahead"}`` with fds [stdout, stderr, status], in sandbox mode then
  [go]: a pipe on which the harness writes the pid of the process holding the step's sandbox once it is
  ready (``ns_pid`` null), or which it closes unwritten if the sandbox did not start. With ``ahead``
  (a command built before its request) last [start]: the command's process gets everything ready, reports
  ``ready`` and waits for ``go`` on that pipe before its script begins; an end without it (the harness
  discarded the step) ends the process and nothing of the script runs
* parent -> harness: ``{"pid": N}`` (the child's pid on the host) or ``{"error": "..."}``
* on the status socket: ``joined`` (sandbox mode: the child is in the step's sandbox, whose holder the
  harness may now let go), ``started`` (the next thing this process runs is the command's script),
  ``ready`` (ahead: waiting for ``go``), ``failed REASON`` (the mechanism failed; no code of the command
  ran), ``exit CODE USER_S SYSTEM_S MINOR_FAULTS`` (the code as subprocess reports it, in sandbox mode as
  bubblewrap reports its command's exit; then the command's CPU time and page faults, in sandbox mode
  with its namespace's init's). In sandbox mode the namespace's init reports the exit once it has
  ended and reaped every other process of the namespace, or sees it ending with no descriptor open
  (nothing of the step runs any more); the child
  that stayed outside reports it again once the init has ended (the only report if the init was killed
  first): the first one counts. The command itself never holds the
  status socket: it could otherwise write any of these lines.
"""

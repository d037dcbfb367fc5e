"""Start-up: import the libraries the harness names, then report what could make a fork unsafe
(threads, GPU devices, shared writable mappings, open descriptors, files the sandbox does not show).

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import atexit
import gc
import json
import signal


def _threads():
    return len(os.listdir("/proc/self/task"))


def _fd_targets(keep):
    found = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in keep:
            continue
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass  # the descriptor listdir itself used
    return found


def _mapped():
    files, shared_writable, devices = set(), [], []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) > 5 else ""
            if path.startswith("/dev/nvidia"):
                devices.append(path)
            if "w" in parts[1] and parts[1].endswith("s"):
                shared_writable.append(path or "[anonymous]")
            # anonymous memory with a name (/memfd:..., /SYSV...) is no file the sandbox could hide
            if path.startswith("/") and not path.endswith(" (deleted)") and os.path.isfile(path):
                files.add(path)
    return files, shared_writable, devices


def _start(control):
    config = json.loads(control.recv(1 << 20))
    # registered before any library's handler, so that a command's interpreter calls it after all of them
    atexit.register(_Ending.at_exit)
    global _QUIET_HOOK_ADDERS
    _QUIET_HOOK_ADDERS = _quiet_hook_adders()  # before the guard: the package's own file, read once
    guard = _Guard(config.get("guard"))
    sys.addaudithook(guard)
    imported, skipped, failed = [], [], []
    import importlib.util

    for module, names in config["imports"]:
        top = module.partition(".")[0]
        try:
            if config.get("optional") and importlib.util.find_spec(top) is None:
                skipped.append(module)  # not installed: the command would not find it either
                continue
            __import__(module, fromlist=names or ())
            imported.append(module)
        except BaseException as exc:  # noqa: BLE001 - an import may raise anything, SystemExit included
            failed.append(f"{module} failed: {type(exc).__name__}: {exc}"[:300])
            break
    if not failed:
        # what the libraries now held import on their first use, which every command would import again
        for library, modules in sorted((config.get("first_use") or {}).items()):
            for module in modules if library in sys.modules else ():
                if module in sys.modules:
                    continue
                try:
                    __import__(module)
                    imported.append(module)
                except Exception:  # noqa: BLE001 - the command imports it itself, as a cold one would
                    skipped.append(module)
    guard.active = False
    guard.refused += [f"left {path} behind" for path in sorted(guard.created)]
    # the libraries' own thread pools (OpenBLAS) stop in their fork handlers; a thread that survives a
    # fork keeps running in the parent only and leaves its locks and state torn in every child
    probe = os.fork()
    if probe == 0:
        os._exit(0)
    os.waitpid(probe, 0)
    files, shared_writable, devices = _mapped()
    read = tuple((config.get("guard") or {}).get("read", ()))
    outside = []
    if read:
        real_folders = {}
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            # a relative __file__ names no file (torch.ops says "_ops.py")
            if isinstance(path, str) and os.path.isabs(path):
                real = _real_path(path, real_folders)
                if not any(_under(real, tree) for tree in read):
                    outside.append(f"module {name} from {path}")
        outside += [f"mapped file {path}" for path in sorted(files)
                    if not any(_under(path, tree) for tree in read)]
    report = {
        "imported": imported, "skipped": skipped, "failed": failed, "refused": guard.refused[:20],
        "threads": _threads(), "shared_writable": shared_writable[:20], "devices": sorted(set(devices))[:5],
        "fds": [f"{fd} -> {target}" for fd, target in sorted(_fd_targets({0, 1, 2, control.fileno()}).items())],
        "outside": outside[:20], "made": guard.made[:20], "started": guard.started[:20],
        "top_level": sorted({name.partition(".")[0] for name in sys.modules}),
    }
    control.send(json.dumps(report).encode())
    # the collector would walk (and so copy, page by page) every object of this image in every child,
    # at its exit above all: what is here now lives as long as the child anyway (gc.freeze's purpose)
    gc.collect()
    _Ending.prepare()
    _Ending.c_handlers, _Ending.c_registered = _c_exit_handlers_seen(), False
    gc.freeze()
    _Ending.written = _pages_an_ending_writes()
    print(f"short endings: {_Ending.refusal or 'on'}; the C library's exit handlers: "
          f"{_Ending.c_handlers or 'release memory only'}; pages an ending writes, copied ahead: "
          f"{sum(pages for _, pages in _Ending.written)}", flush=True)
    return {sig: signal.getsignal(sig) for sig in _catchable()}, guard.made


def _catchable():
    return [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]

"""How a run ends when its process does (docs/protocol.md "Run status").

A client that starts a run (not `join=True`) and is still open when its process ends sends
`run.end` itself, waiting at most its `atexit_timeout` (2 s) so the exit is never held long:

- an uncaught exception (`sys.excepthook`, `KeyboardInterrupt` from an unhandled Ctrl-C
  included) → `failed`;
- a SIGTERM the program has no handler of its own for → `failed`, then the signal's default
  action, so the process still dies of SIGTERM (its exit status unchanged);
- a normal exit → `finished`, or `failed` when it came through `sys.exit` with a non-zero or
  non-integer code (the `sys.exit` wrapper records it: Python tells an atexit hook nothing).

A process killed outright (SIGKILL, power loss) sends nothing: the server shows its run
`crashed` once its trainer has not been alive for TELESCOPE_CRASH_SECONDS.

The hooks are installed once per process, chain to what was there before, and act on the
clients registered here (weakly: a client closed or collected is left alone).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from types import TracebackType
from typing import Any, Protocol


class Ending(Protocol):
    def end_with_process(self, status: str) -> None: ...


_clients: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
_installed = False
_exit_code: list[object] = []  # what sys.exit was last called with


def register(client: Ending) -> None:
    """End `client`'s run when the process ends (see the module docstring)."""
    global _installed
    with _lock:
        _clients.add(client)
        if not _installed:
            _installed = True
            _install()


def unregister(client: Ending) -> None:
    with _lock:
        _clients.discard(client)


def _end_all(status: str) -> None:
    with _lock:
        clients = list(_clients)
        _clients.clear()
    for client in clients:
        client.end_with_process(status)


def _install() -> None:
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException,
                   tb: TracebackType | None) -> None:
        _end_all("failed")
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook
    previous_exit = sys.exit

    def exit_(code: Any = None) -> Any:
        _exit_code.append(code)
        return previous_exit(code)

    sys.exit = exit_
    atexit.register(_at_exit)
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _at_exit() -> None:
    code = _exit_code[-1] if _exit_code else None
    _end_all("finished" if code in (None, 0) else "failed")


def _on_sigterm(signum: int, frame: Any) -> None:
    _end_all("failed")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)

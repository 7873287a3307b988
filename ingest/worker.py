"""What an aggregation worker process runs at start (pure: no Django, importable by `spawn`)."""

from __future__ import annotations

import os
import threading
import time

POLL_SECONDS = 0.5


def die_with_parent() -> None:
    """End this worker soon after the server process dies, even by SIGKILL, so no orphan
    outlives it (multiprocessing's resource tracker then sees its pipes close and exits too).

    A watchdog thread notices the worker being re-parented. (Linux's PR_SET_PDEATHSIG would
    fire when the *thread* that spawned the worker ends — a request thread — not the server.)"""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(POLL_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()

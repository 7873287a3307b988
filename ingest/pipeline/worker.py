"""What the pipeline's worker process runs at start (ingest.pipeline.materialize.worker_pool):
it dies with the server and sets Django up for itself (its own database connection),
aggregating in its own process rather than starting workers of its own."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, cast

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


def start_worker(database_name: str, write_lock: Any = None) -> None:
    """The worker's initializer: `database_name` is the server's (settings it changed at run
    time, such as a test database's name, do not reach a spawned process otherwise), and
    `write_lock` the server's SQLite write lock when it has one (telescope_ui.sqlite3)."""
    die_with_parent()
    os.environ["TELESCOPE_AGGREGATE_WORKERS"] = "0"  # it is the worker
    import django

    django.setup()
    from django.db import connections

    connections["default"].settings_dict["NAME"] = database_name
    if write_lock is not None:  # the embedded backend's (telescope_ui.sqlite3)
        cast(Any, connections["default"]).install_write_lock(write_lock)

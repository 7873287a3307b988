"""What an aggregation worker process runs at start (pure: no Django, importable by `spawn`)."""

from __future__ import annotations

import os


def die_with_parent() -> None:
    """Be killed when the server process dies, even by SIGKILL (Linux PR_SET_PDEATHSIG), so no
    orphan outlives it; multiprocessing's resource tracker then sees its pipe close and exits
    too."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(0)
    except (OSError, AttributeError):  # not Linux: workers end when the server exits
        pass

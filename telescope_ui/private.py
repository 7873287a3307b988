"""The install's private files: owner only, whatever the umask.

The embedded SQLite database holds the session keys of signed-in users and the token digests,
and TELESCOPE_DATA_DIR/secret_key signs the sessions: the database file and its -wal and -shm
are mode 0600, the data directory 0700 (the key is made 0600 by telescope_ui.settings). The
data directory is made 0700 when it is created, so no one else can open the database in the
moment between SQLite creating it and it being tightened; every process tightens the files
(and the directory) when it connects — the server starting, `migrate`, any command — so what
an older version or a hand left wider is fixed too. SQLite gives -wal and -shm the database
file's mode.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path
from typing import Any

from django.conf import settings

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

log = logging.getLogger(__name__)


def tighten(path: Path, mode: int) -> None:
    """Give `path`, when it exists, no more than `mode`; one we may not change (another owner, a
    read-only mount) is logged, not fatal: the dashboard still runs."""
    try:
        current = path.stat().st_mode & 0o777
        if current & ~mode:
            path.chmod(current & mode)  # (takes away, never adds: a read-only file stays so)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot make %s private (mode %o): %s", path, mode, exc)


def sqlite_file(database: dict[str, Any]) -> Path | None:
    """The file of a SQLite database setting; None for another database or one in memory."""
    name = str(database.get("NAME") or "")
    if not database.get("ENGINE", "").endswith("sqlite3") or name in ("", ":memory:") \
            or name.startswith("file:"):
        return None
    return Path(name)


def tighten_database(path: Path) -> None:
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        tighten(file, PRIVATE_FILE)
    folder = path.resolve().parent
    # Only the data directory, and never a shared one (sticky, like /tmp: made private it would
    # lock everyone else out).
    if folder == Path(settings.DATA_DIR).resolve() and not folder.stat().st_mode & stat.S_ISVTX:
        tighten(folder, PRIVATE_DIR)


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Django's connection_created: a SQLite database's files (test databases in memory are
    skipped)."""
    if connection.vendor == "sqlite":
        path = sqlite_file(connection.settings_dict)
        if path is not None:
            tighten_database(path)

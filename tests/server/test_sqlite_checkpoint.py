"""SQLite's write-ahead log is checkpointed by the pipeline's sweep (`checkpoint`), not inside
ingest commits: a commit only appends to the log (up to a 64 MiB backstop; SQLite's default
checkpoints every 1,000 pages, in whichever commit crosses that)."""

from __future__ import annotations

import pytest
from django.db import connection

from ingest.models import Project
from ingest.pipeline.materialize import checkpoint
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


def test_commits_leave_the_log_to_the_sweep() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    checkpoint()  # the log starts over with the next commit
    pid = Project.objects.create(name="p").pk
    for step in range(200):  # ~2,400 pages of log (points packed in ~16 bytes each)
        handle_object(pid, {"v": 1, "id": f"s{step}", "type": "step", "run": "r", "step": step,
                            "metrics": {f"k{i}": float(i) for i in range(1000)}})
    with connection.cursor() as cur:
        cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _, log_pages, _ = cur.fetchone()
    assert log_pages > 2000  # no commit checkpointed (and restarted) the log


def test_a_delete_does_not_write_the_freed_pages_again() -> None:
    """Debian's SQLite zeroes freed pages by default (secure_delete), so folding point blocks
    into chunks, or deleting a run, would write everything it frees to the log once more."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cur:
        cur.execute("PRAGMA secure_delete")
        assert cur.fetchone()[0] == 0
        cur.execute("CREATE TABLE t_freed (id INTEGER PRIMARY KEY, data BLOB)")
        cur.execute("INSERT INTO t_freed (data) VALUES (randomblob(1048576))")
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.execute("DELETE FROM t_freed")
        cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _, log_pages, _ = cur.fetchone()
        cur.execute("DROP TABLE t_freed")
    assert log_pages < 16, log_pages  # the b-tree and freelist pages, not 256 zeroed ones

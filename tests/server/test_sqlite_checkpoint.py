"""SQLite's write-ahead log is checkpointed by the pipeline's sweep (`checkpoint`), not inside
ingest commits: a commit only appends to the log (up to a 64 MiB backstop)."""

from __future__ import annotations

import os

import pytest
from django.db import connection

from ingest.materialize import checkpoint
from ingest.models import Project
from ingest.service import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


def test_commits_leave_the_log_to_the_sweep() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    checkpoint()  # start from a database file that holds everything
    path = connection.settings_dict["NAME"]
    before = os.path.getsize(path)
    pid = Project.objects.create(name="p").pk
    for step in range(200):
        handle_object(pid, {"v": 1, "id": f"s{step}", "type": "step", "run": "r", "step": step,
                            "metrics": {f"k{i}": float(i) for i in range(200)}})
    assert os.path.getsize(path) == before  # the commits wrote to the log only
    checkpoint()
    assert os.path.getsize(path) > before  # the sweep moved them into the database file

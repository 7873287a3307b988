"""Shared fixtures. Service-backed tests skip without PostgreSQL/Redis, except under CI=true,
where a missing service is a failure."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState, collected_static, running

CI = os.environ.get("CI", "").lower() == "true"
PG_URL = os.environ.get("TELESCOPE_SERVICE_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("TELESCOPE_SERVICE_REDIS", "redis://127.0.0.1:6379/0")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_services() -> None:
    """Skip (or, in CI, fail) when PostgreSQL or Redis is not running on localhost."""
    missing = [name for name, port in (("PostgreSQL", 5432), ("Redis", 6379))
               if not _reachable("127.0.0.1", port)]
    if missing:
        message = f"{' and '.join(missing)} not reachable on 127.0.0.1"
        if CI:
            pytest.fail(message + " (CI=true: service tests must run)")
        pytest.skip(message)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """Connections close after each use, so worker threads of database_sync_to_async leave
    none open at teardown (PostgreSQL refuses to drop a database in use). On SQLite the test
    database is a file in WAL mode, as the server's is: the pipeline's threads read while
    another writes (an in-memory shared-cache database would refuse with "table is locked"
    where the real one reads a snapshot)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    db["CONN_MAX_AGE"] = 0
    if db["ENGINE"].endswith("sqlite3") and not db.setdefault("TEST", {}).get("NAME"):
        db["TEST"]["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")


@pytest.fixture(scope="session")
def static_root() -> Iterator[Path]:
    """STATIC_ROOT for in-process requests (pytest-django's test client): the files the live
    servers serve. Pages link their static files by hashed name, from its manifest."""
    from django.test import override_settings

    root = collected_static()
    with override_settings(STATIC_ROOT=root):
        yield root


@pytest.fixture(autouse=True)
def _static_files_for_pages(request: pytest.FixtureRequest) -> None:
    """Tests that may render a page (they use the database) get the collected static files;
    the others do not pay for a collection."""
    if request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(
            request.fixturenames):
        request.getfixturevalue("static_root")


@pytest.fixture
def live_state(tmp_path: Path) -> Iterator[ServerState]:
    """State for live servers on the pass's backend (SQLite file, or PostgreSQL when
    DATABASE_URL is set; the Redis layer when REDIS_URL is set)."""
    state = ServerState(tmp_path, os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL"))
    yield state
    state.drop()


@pytest.fixture
def dashboard_server(live_state: ServerState) -> Iterator[LiveServer]:
    """A real server subprocess (not pytest-django's `live_server`, whose name this avoids)."""
    with running(live_state) as server:
        yield server


@pytest.fixture
def service_state(tmp_path: Path) -> Iterator[ServerState]:
    """State shared by several server processes: always PostgreSQL + Redis."""
    require_services()
    state = ServerState(tmp_path, PG_URL, REDIS_URL)
    yield state
    state.drop()


@pytest.fixture(autouse=True)
def _fresh_process_caches() -> None:
    """Each test starts with empty per-process caches keyed by database ids (series pks,
    categorical kinds and codes, series arrays): a flushed test database may hand the same ids
    to other rows."""
    from ingest.core import categorical, commit
    from ingest.reads import catalog as reads

    commit._SERIES_PKS.clear()
    categorical._KINDS.clear()
    categorical._CODES.clear()
    reads.CACHE = reads.SeriesCache()


@pytest.fixture(scope="session", autouse=True)
def _materializer_leaves_no_connection(django_db_setup: None,
                                       django_db_blocker: Any) -> Iterator[None]:
    """The materializer works on its own thread; before the test database is dropped, let it
    finish and close that thread's connection (PostgreSQL refuses to drop a database in use)."""
    yield
    from django.db import connections

    from ingest.pipeline.materialize import MATERIALIZER
    from ingest.write.admission import ingest_executor

    with django_db_blocker.unblock():
        for executor in (MATERIALIZER.executor, MATERIALIZER.ahead, ingest_executor()):
            executor.submit(connections.close_all).result(timeout=60)

"""The embedded SQLite's shared write lock (telescope_ui.sqlite3): the server's transactions
wait on it — not in SQLite's sleeping busy handler — and its pipeline worker shares it."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest
from django.db import connection, connections, transaction

from ingest.models import Project
from ingest.pipeline import materialize
from telescope_ui.sqlite3 import base

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lock() -> Iterator[Any]:
    if connection.vendor != "sqlite":
        pytest.skip("the embedded SQLite only")
    yield connection.install_write_lock()
    base._LOCK = None


def _free(lock: Any) -> bool:
    if lock.acquire(block=False):
        lock.release()
        return True
    return False


def test_a_transaction_holds_the_lock_until_it_commits_or_rolls_back(lock: Any) -> None:
    assert connection.shared_write_lock is lock
    with transaction.atomic():
        Project.objects.create(name="a")
        assert not _free(lock)
        with transaction.atomic():  # a savepoint: still the one transaction's
            Project.objects.create(name="b")
        assert not _free(lock)
    assert _free(lock)
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        Project.objects.create(name="c")
        assert not _free(lock)
        1 / 0  # noqa: B018
    assert _free(lock)
    assert sorted(Project.objects.values_list("name", flat=True)) == ["a", "b"]


def test_closing_a_connection_inside_a_transaction_releases_it(lock: Any) -> None:
    with transaction.atomic():
        Project.objects.create(name="a")
        connection.close()
        assert _free(lock)
    assert not Project.objects.filter(name="a").exists()


def test_another_thread_waits_for_the_lock_then_goes_on(lock: Any) -> None:
    """Thread B's transaction begins only once A's has committed, and then sees A's row (it
    waited on the lock: with no SQLite busy error, whatever the order the threads ran in)."""
    a_in, b_trying, order = threading.Event(), threading.Event(), []
    seen: list[bool] = []

    def a() -> None:
        with transaction.atomic():
            Project.objects.create(name="from-a")
            a_in.set()
            b_trying.wait(30)
            threading.Event().wait(0.2)  # B's BEGIN, if it were not held, would come now
            order.append("a commits")
        connections.close_all()

    def b() -> None:
        a_in.wait(30)
        b_trying.set()
        with transaction.atomic():
            order.append("b begins")
            seen.append(Project.objects.filter(name="from-a").exists())
        connections.close_all()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert order == ["a commits", "b begins"]
    assert seen == [True]
    assert _free(lock)


def _probe() -> bool:
    """(In the worker) whether the server's lock is this process's and held right now."""
    lock = connections["default"].shared_write_lock
    return lock is not None and not _free(lock)


def _die_in_a_transaction() -> None:
    with transaction.atomic():
        Project.objects.create(name="dies")
        os._exit(1)  # killed with the lock held


@pytest.fixture
def worker(settings: Any, lock: Any) -> Iterator[None]:
    settings.TELESCOPE_AGGREGATE_WORKERS = 1
    yield
    pool, materialize._POOL = materialize._POOL, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def test_the_worker_process_shares_the_lock(worker: None, lock: Any) -> None:
    pool = materialize.worker_pool()
    assert pool is not None
    assert pool.submit(_probe).result(60) is False  # the lock is there, and free
    with transaction.atomic():
        Project.objects.create(name="holding")
        assert pool.submit(_probe).result(60) is True  # held by this process's transaction


def test_a_worker_that_died_holding_the_lock_leaves_a_new_one(worker: None, lock: Any) -> None:
    loop = asyncio.new_event_loop()  # (not asyncio.run: it would unset pytest-asyncio's loop)
    try:
        with pytest.raises(BrokenProcessPool):
            loop.run_until_complete(materialize.MATERIALIZER._offload(_die_in_a_transaction))
    finally:
        loop.close()
    new = connection.shared_write_lock
    assert new is not lock and _free(new)
    assert not _free(lock)  # the old one stays taken forever: nobody waits on it any more
    pool = materialize.worker_pool()  # the next worker gets the new lock
    assert pool is not None
    with transaction.atomic():
        Project.objects.create(name="holding")
        assert pool.submit(_probe).result(60) is True

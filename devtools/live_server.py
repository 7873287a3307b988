"""Real dashboard server processes for tests and benchmarks: daphne in a subprocess on a free
port.

A `ServerState` is where servers keep their data: a fresh SQLite file under a temporary data
directory, or, when a database URL is given (the PostgreSQL pass), a fresh PostgreSQL database;
a Redis URL passes through. Several `LiveServer`s given the same state test multi-process
behaviour. Every server of a process serves one set of static files, collected once
(`collected_static`). `running(state)` is a server for a `with` block, stopped when it ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_COLLECTED: Path | None = None


def collected_static() -> Path:
    """The static files (`collectstatic`, as `telescope_ui.serve` runs it), collected once per
    process into a temporary directory that every server this process starts serves as it is
    (`--no-collectstatic`): a test session pays one collection (about 1.5 s), not one per
    server, and keeps one version of static/ while others edit the checkout."""
    global _COLLECTED
    if _COLLECTED is None:
        base = Path(tempfile.mkdtemp(prefix="telescope-static-"))
        atexit.register(shutil.rmtree, base, True)
        env = {**os.environ, "TELESCOPE_DATA_DIR": str(base),
               "TELESCOPE_STATIC_ROOT": str(base / "static"),
               "DJANGO_SETTINGS_MODULE": "telescope_ui.settings", "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), "collectstatic",
                              "--noinput", "-v", "0"], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        if out.returncode:
            raise RuntimeError(f"collectstatic failed:\n{out.stderr}")
        _COLLECTED = base / "static"
    return _COLLECTED


def _admin_connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    return psycopg.connect(admin, autocommit=True)


class ServerState:
    """Where a group of servers keeps its data."""

    def __init__(self, tmp: Path, database_url: str | None = None,
                 redis_url: str | None = None) -> None:
        self.tmp = tmp
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "REDIS_URL", "TELESCOPE_TEST_DB")}
        self.env["TELESCOPE_DATA_DIR"] = str(tmp)
        self.env["DJANGO_SETTINGS_MODULE"] = "telescope_ui.settings"
        self.env["PYTHONPATH"] = str(ROOT)
        self.env["TELESCOPE_STATIC_ROOT"] = str(collected_static())
        self.dbname: str | None = None
        self.base_db_url = database_url
        if database_url:
            self.dbname = f"telescope_live_{uuid.uuid4().hex[:10]}"
            with _admin_connect(database_url) as conn:
                conn.execute(f'CREATE DATABASE "{self.dbname}"')
            self.env["DATABASE_URL"] = urlunsplit(
                urlsplit(database_url)._replace(path="/" + self.dbname))
        if redis_url:
            self.env["REDIS_URL"] = redis_url
            self.env["TELESCOPE_CHANNEL_PREFIX"] = f"telescope-test-{uuid.uuid4().hex[:8]}"
        self.manage("migrate", "-v", "0")

    def manage(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=self.env,
                             cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stderr}")
        return out.stdout

    def token(self, project: str = "test") -> str:
        return self.manage("createtoken", "--project", project).strip().splitlines()[-1]

    def drop(self) -> None:
        if self.dbname and self.base_db_url:
            with _admin_connect(self.base_db_url) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


class LiveServer:
    """One daphne process serving `telescope_ui.asgi:application`."""

    def __init__(self, state: ServerState, port: int | None = None) -> None:
        self.state = state
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = state.tmp / f"server-{self.port}.log"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> LiveServer:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "telescope_ui.serve", "--port", str(self.port),
                 "--verbosity", "0", "--no-collectstatic"],
                env=self.state.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.http + "/api/runs", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        self.kill()  # (left running, it would outlive the caller that gave up on it)
        raise RuntimeError(f"server did not start in {timeout}s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, as in a crash."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def running(state: ServerState) -> Iterator[LiveServer]:
    """A server on `state` for the `with` block: started, and stopped when the block ends (or
    when it fails to start in time). `state` stays the caller's: its data outlives the block."""
    server = LiveServer(state)
    try:
        yield server.start()
    finally:
        server.stop()

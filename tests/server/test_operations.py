"""What an operator meets: a health endpoint, and a server that refuses to start — saying
why — rather than serve 500s or an insecure key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from django.test import Client

from devtools.live_server import ROOT, free_port
from telescope_ui.settings import install_secret_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_healthz_reports_the_database_the_layer_and_the_backlog() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    body = orjson.loads(response.content)
    assert body == {"ok": True, "database": "ok", "channel_layer": "ok", "backlog_steps": 0}


def serve(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL")}
    return subprocess.run([sys.executable, "-m", "telescope_ui.serve", "--port",
                           str(free_port()), *args], env={**environ, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_serve_refuses_other_interfaces_without_a_secret_key() -> None:
    out = serve("--host", "0.0.0.0")
    assert out.returncode != 0 and "SECRET_KEY" in out.stderr


def test_serve_refuses_a_database_it_cannot_reach(tmp_path: Path) -> None:
    out = serve(DATABASE_URL=f"postgres://postgres:hunter2@127.0.0.1:{free_port()}/nope",
                TELESCOPE_DATA_DIR=str(tmp_path))
    assert out.returncode != 0 and "cannot use the database" in out.stderr
    assert "hunter2" not in out.stderr  # never prints a password


def test_an_install_keeps_one_generated_secret_key(tmp_path: Path) -> None:
    key = install_secret_key(tmp_path)
    assert len(key) > 40 and install_secret_key(tmp_path) == key
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600

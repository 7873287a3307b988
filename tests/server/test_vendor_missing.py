"""A checkout without `npm ci` (no node_modules/, so no Plotly, no SortableJS): Django's
commands that do not touch the static files work (`manage.py migrate`, `check`,
`declare_ranges`, ...), and the ones that need the vendor files (`collectstatic`, and
`telescope serve`, which collects before serving) refuse with one line naming `npm ci`
(telescope_ui.assets, docs/operations.md "Running"). Real subprocesses on a temporary
SQLite database, the vendor lookup pointed at an empty directory by the
TELESCOPE_NODE_MODULES setting."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# No server, no database of anyone else's: the command's own SQLite file.
CLEARED = ("DATABASE_URL", "REDIS_URL", "TELESCOPE_DATA_DIR", "TELESCOPE_STATIC_ROOT",
           "DJANGO_SETTINGS_MODULE")


@pytest.fixture
def vendorless(tmp_path: Path) -> dict[str, str]:
    """The environment of a command in a checkout whose node_modules/ is empty: the project's
    settings but TELESCOPE_NODE_MODULES, its data in tmp_path/data."""
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "vendorless_settings.py").write_text(
        "from telescope_ui.settings import *  # noqa: F403\n"
        f"TELESCOPE_NODE_MODULES = {str(tmp_path / 'node_modules')!r}\n")
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.update(DJANGO_SETTINGS_MODULE="vendorless_settings",
                   PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
                   TELESCOPE_DATA_DIR=str(tmp_path / "data"))
    return environ


def run(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=environ, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_migrate_and_other_commands_work_without_the_vendor_files(
        vendorless: dict[str, str], tmp_path: Path) -> None:
    migrated = run(vendorless, "manage.py", "migrate", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(tmp_path / "data" / "telescope.sqlite3") as db:
        [(applied,)] = db.execute("SELECT count(*) FROM django_migrations WHERE app = 'ingest'")
    assert applied > 0
    checked = run(vendorless, "manage.py", "check")
    assert checked.returncode == 0, checked.stderr
    assert "no issues" in checked.stdout and "npm ci" not in checked.stdout + checked.stderr
    token = run(vendorless, "manage.py", "createtoken", "--project", "p")
    assert token.returncode == 0, token.stderr
    assert "npm ci" not in token.stdout + token.stderr


def test_collecting_or_serving_without_the_vendor_files_names_npm_ci(
        vendorless: dict[str, str], tmp_path: Path) -> None:
    collected = run(vendorless, "manage.py", "collectstatic", "--noinput", "-v", "0")
    assert collected.returncode == 1
    [line] = collected.stderr.strip().splitlines()  # the reason, not a traceback
    assert "Plotly (every chart needs it) is missing: run `npm ci`" in line
    assert str(tmp_path / "node_modules") in line  # where it looked
    assert not (tmp_path / "data" / "static" / "staticfiles.json").exists()

    assert run(vendorless, "manage.py", "migrate", "-v", "0").returncode == 0
    served = run(vendorless, "-m", "telescope_ui.serve", "--port", "1")  # exits before binding
    assert served.returncode == 1
    assert "cannot collect the static files" in served.stderr
    assert "is missing: run `npm ci`" in served.stderr

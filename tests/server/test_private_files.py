"""The database (session keys, token digests) and the secret key are the owner's only: files
0600 and the data directory 0700, for a fresh install and for one an older version left
readable, whatever the umask (telescope_ui.private)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from devtools.live_server import ROOT
from telescope_ui import private
from telescope_ui.settings import install_secret_key


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    out = subprocess.run([sys.executable, *args], env={**environ, "TELESCOPE_DATA_DIR": str(data)},
                         cwd=ROOT, capture_output=True, text=True, timeout=120, umask=0o022)
    assert out.returncode == 0, out.stderr
    return out


def test_a_fresh_install_is_private(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    run(data, "-m", "telescope_ui.cli", "token", "alpha")
    assert mode(data) == 0o700
    assert mode(data / "telescope.sqlite3") == 0o600
    assert mode(data / "secret_key") == 0o600


def test_migrate_tightens_an_install_left_readable_with_its_wal(tmp_path: Path) -> None:
    data = tmp_path / "old"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    (data / "secret_key").write_text("an-old-key-" * 5)
    os.chmod(data / "secret_key", 0o644)
    holder = sqlite3.connect(data / "telescope.sqlite3")  # keeps -wal and -shm there
    try:
        holder.execute("PRAGMA journal_mode=WAL")
        holder.execute("CREATE TABLE held (x)")
        holder.commit()
        files = [data / f"telescope.sqlite3{suffix}" for suffix in ("", "-wal", "-shm")]
        for path in files:
            os.chmod(path, 0o644)
        run(data, "manage.py", "migrate", "--verbosity", "0")
        assert [mode(path) for path in files] == [0o600] * 3
        assert mode(data) == 0o700 and mode(data / "secret_key") == 0o600
        assert (data / "secret_key").read_text() == "an-old-key-" * 5  # kept, not replaced
    finally:
        holder.close()


def test_a_generated_key_left_readable_is_tightened_and_kept(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("k" * 60)
    os.chmod(tmp_path / "secret_key", 0o644)
    assert install_secret_key(tmp_path) == "k" * 60
    assert mode(tmp_path / "secret_key") == 0o600


def test_a_shared_directory_is_left_alone(tmp_path: Path, settings: Any) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: made 0700 it would lock everyone else out
    settings.DATA_DIR = shared
    database = shared / "telescope.sqlite3"
    sqlite3.connect(database).close()
    os.chmod(database, 0o644)
    private.tighten_database(database)
    assert mode(database) == 0o600
    assert shared.stat().st_mode & 0o7777 == 0o1777

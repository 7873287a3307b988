"""`manage.py import` on damaged input, made from real files the tools wrote (`make_logs.py`):
a flipped byte is an error naming the file and the byte offset, and nothing of that run is
stored while the other runs of the folder are; a file cut short imports its whole records with
a warning and is not marked ended; a malformed trackio database or row is a one-line error; a
W&B run "resumed" offline (same id, a new folder, steps from 0 again) stores its new values;
`total_steps` is the source's planned length or unknown, never the last step read.

No output may hold a traceback, and the exit status is non-zero when a run was not imported.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState
from tests.integrations.support import Catalog, runs
from tests.integrations.test_importers import check_run, import_, make_logs, needs


@pytest.fixture
def served(live_state: ServerState) -> Iterator[tuple[ServerState, LiveServer]]:
    server = LiveServer(live_state).start()
    yield live_state, server
    server.stop()


def tfrecords(data: bytes) -> list[tuple[int, int]]:
    """(offset, data length) of each record of a TFRecord file, read independently here."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, length))
        pos += 12 + length + 4
    return out


def wandb_chunks(data: bytes) -> list[tuple[int, int]]:
    """(offset, data length) of each chunk of a W&B transaction log."""
    out, pos = [], 7
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        (length,) = struct.unpack_from("<H", data, pos + 4)
        out.append((pos, length))
        pos += 7 + length
    return out


def scalars_file(folder: Path) -> Path:
    """The run's event file of scalars (`add_hparams` writes the other, a small one)."""
    return max(folder.glob("events.out.tfevents.*"), key=lambda f: f.stat().st_size)


def no_traceback(done: Any) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]


def stored_values(server: LiveServer, run_id: int) -> dict[str, dict[int, float]]:
    catalog = Catalog(server, run_id)
    return {key: catalog.values("step", key) for key in catalog.step_keys()}


def run_of(server: LiveServer, project: str, name: str) -> dict[str, Any]:
    [run] = [r for r in runs(server, project) if r["name"] == name]
    return run


@needs("tensorboard")
def test_a_flipped_tensorboard_payload_byte_stores_nothing_of_that_run(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    """The issue's case: one byte of a scalar's float flipped still decodes, as another
    value; only the data checksum tells."""
    state, server = served
    truth = make_logs("tensorboard", tmp_path)
    events = scalars_file(tmp_path / "tb" / "grpo-a")
    data = bytearray(events.read_bytes())
    scalars = [(pos, n) for pos, n in tfrecords(bytes(data))
               if b"\x0a\x04loss" in data[pos + 12:pos + 12 + n]]
    pos, n = scalars[len(scalars) // 2]
    assert data[pos + 12 + n - 5] == 0x15  # simple_value: a float32, the data's last 4 bytes
    data[pos + 12 + n - 4] ^= 0x01  # its lowest mantissa bit: a wrong value that decodes
    events.write_bytes(bytes(data))
    done = import_(state, "tensorboard", str(tmp_path / "tb"), "--project", "tb", ok=False)
    no_traceback(done)
    assert f"{events.resolve()}: record at byte {pos}: its data checksum does not match" \
        in done.stderr
    assert "1 of 2 tensorboard runs not imported ('grpo-a')" in done.stderr
    assert "Imported tensorboard run 'sweep/grpo-b'" in done.stdout
    assert [r["name"] for r in runs(server, "tb")] == ["sweep/grpo-b"]  # nothing of grpo-a
    check_run(server, "tb", "sweep/grpo-b", truth["sweep/grpo-b"], rel=1e-6)


@needs("tensorboard")
def test_a_tensorboard_file_cut_in_half_imports_its_whole_records_not_finished(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("tensorboard", tmp_path)
    events = scalars_file(tmp_path / "tb" / "grpo-a")
    data = events.read_bytes()
    records = tfrecords(data)
    middle = len(data) // 2
    [(torn, _)] = [(p, n) for p, n in records if p <= middle < p + 16 + n]
    cut = max(middle, torn + 1)  # inside that record
    events.write_bytes(data[:cut])
    done = import_(state, "tensorboard", str(tmp_path / "tb"), "--project", "tb")
    no_traceback(done)
    assert f"warning: {events.resolve()}: ends inside the record at byte {torn}" in done.stderr
    assert f"imported the {sum(p < torn for p, _ in records):,} whole records" in done.stderr
    run = run_of(server, "tb", "grpo-a")
    assert run["status"] != "finished"  # still being written, maybe
    full = truth["grpo-a"]["steps"]
    values = stored_values(server, run["id"])
    # The whole records before the cut, each value as logged (the hparams file is whole).
    assert 0 < max(values["loss"]) < max(map(int, full))
    for key, points in values.items():
        for step, value in points.items():
            want = full[str(step)][key]
            assert value == (want if isinstance(want, str) else pytest.approx(want, rel=1e-6)), (
                key, step)
    check_run(server, "tb", "sweep/grpo-b", truth["sweep/grpo-b"], rel=1e-6)
    # TensorBoard does not know how long a run was meant to be: unknown, not its last step.
    assert [r["total_steps"] for r in runs(server, "tb")] == [None, None]


@needs("wandb")
def test_a_flipped_wandb_byte_stores_nothing_of_that_run(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("wandb", tmp_path)
    [first, _] = sorted((tmp_path / "wandb").glob("offline-run-*"))
    [log] = first.glob("*.wandb")
    data = bytearray(log.read_bytes())
    [damaged] = [name for name in truth if name.encode() in data]  # its display name
    [intact] = set(truth) - {damaged}
    middle = len(data) // 2
    pos, n = next((p, n) for p, n in wandb_chunks(bytes(data)) if n and p + 7 + n > middle)
    data[max(middle, pos + 7)] ^= 0x40  # a byte of that chunk's data
    log.write_bytes(bytes(data))
    done = import_(state, "wandb", str(tmp_path / "wandb"), "--project", "wb", ok=False)
    no_traceback(done)
    assert f"{log.resolve()}: chunk at byte {pos}: its checksum does not match" in done.stderr
    assert f"1 of 2 wandb runs not imported ({damaged!r})" in done.stderr
    assert f"Imported wandb run {intact!r}" in done.stdout
    assert [r["name"] for r in runs(server, "wb")] == [intact]
    check_run(server, "wb", intact, truth[intact], rel=1e-12)


@needs("wandb")
def test_a_wandb_run_resumed_offline_stores_its_new_steps_and_total_steps(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    """Same id, a new folder, steps from 0 again: the second folder's values are stored (at
    the steps both logged they stand), and total_steps follows the config's max_steps."""
    state, server = served
    truth = make_logs("wandb_resume", tmp_path)
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2
    import_(state, "wandb", str(folders[0]), "--project", "wb")
    check_run(server, "wb", "wb-resumed", truth["first"], rel=1e-12)
    assert run_of(server, "wb", "wb-resumed")["total_steps"] == 80  # max_steps, not 79
    done = import_(state, "wandb", str(tmp_path / "wandb"), "--project", "wb")
    no_traceback(done)
    assert "nothing new" not in done.stdout
    assert f"{folders[1].name} logs 40 steps (0–39) again" in done.stderr
    check_run(server, "wb", "wb-resumed", truth["both"], rel=1e-12)
    assert run_of(server, "wb", "wb-resumed")["total_steps"] == 120  # brought up to date
    again = import_(state, "wandb", str(tmp_path / "wandb"), "--project", "wb")
    assert "nothing new (imported before)" in again.stdout


@needs("trackio")
def test_a_damaged_trackio_database_is_a_one_line_error(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("trackio", tmp_path)
    db = tmp_path / "trackio" / "telescope-import.db"
    half = tmp_path / "half" / db.name
    half.parent.mkdir()
    half.write_bytes(db.read_bytes()[:db.stat().st_size // 2])
    done = import_(state, "trackio", str(half), "--project", "tr", ok=False)
    no_traceback(done)
    [line] = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert str(half.resolve()) in line and "malformed" in line
    assert runs(server, "tr") == []
    # One row of tr-a that is not JSON: tr-a is not imported, tr-b is.
    shutil.copy(db, tmp_path / "bad.db")
    with sqlite3.connect(tmp_path / "bad.db") as conn:
        [(row,)] = conn.execute("SELECT id FROM metrics WHERE run_name = 'tr-a' ORDER BY id"
                                " LIMIT 1 OFFSET 7").fetchall()
        conn.execute("UPDATE metrics SET metrics = '{\"loss\": 1.0' WHERE id = ?", (row,))
    conn.close()
    done = import_(state, "trackio", str(tmp_path / "bad.db"), "--project", "tr", ok=False)
    no_traceback(done)
    assert f"{(tmp_path / 'bad.db').resolve()}: metrics row id {row}: not JSON" in done.stderr
    assert "1 of 2 trackio runs not imported ('tr-a')" in done.stderr
    assert [r["name"] for r in runs(server, "tr")] == ["tr-b"]
    check_run(server, "tr", "tr-b", truth["tr-b"], rel=1e-12)

"""The outbox: order, durability across reopen and SIGKILL, slots and adoption, moving to
memory when the file fails; the wire encoding and splitting of refused messages."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from trainer_hooks.transport import outbox as sp
from trainer_hooks.transport.outbox import Outbox, Outgoing, open_slot
from trainer_hooks.transport.resume import identity_record
from trainer_hooks.wire import protocol as p

ROOT = Path(__file__).resolve().parents[2]


def out(i: int, step: Any = None, sample_ids: list[Any] | None = None,
        env: Any = None) -> Outgoing:
    """A message; with `step`, a samples message whose sample identity is recorded."""
    ident = None
    if step is not None:
        ident = identity_record({"step": step, "env": env, "group_id": [0] * len(sample_ids or []),
                                 "sample_id": sample_ids or []})
    return Outgoing(f"m-{i}", "step", 0, "msgpack", f"body-{i}".encode(), ident)


def test_pending_messages_come_back_in_append_order(tmp_path: Path) -> None:
    spool = Outbox(tmp_path / "a.sqlite")
    try:
        spool.append([out(3), out(1)])
        spool.append([out(2)])
        spool.append([out(1)])  # an id already spooled is not queued twice
        assert [r.msg_id for r in spool.pending()] == ["m-3", "m-1", "m-2"]
        first = spool.pending()[0].seq
        assert [r.msg_id for r in spool.pending(after_seq=first, limit=1)] == ["m-1"]
        spool.delete(["m-1", "unknown"])
        assert [r.msg_id for r in spool.pending()] == ["m-3", "m-2"]
        assert (spool.rows, spool.bytes) == (2, len(b"body-3") + len(b"body-2"))
        spool.replace("m-3", [out(4), out(5)])  # a split goes to the end
        assert [r.msg_id for r in spool.pending()] == ["m-2", "m-4", "m-5"]
    finally:
        spool.close()


def test_messages_and_sample_identities_survive_reopening(tmp_path: Path) -> None:
    spool = Outbox(tmp_path / "a.sqlite")
    assert spool.take_incarnation(False, "inc-1") == "inc-1"
    spool.append([out(1, [5, 6], ["a", 7], env=["x", None]), out(2), out(3, 4, ["b"], "e")])
    spool.delete(["m-1"])  # acknowledged: its samples are still remembered
    spool.close()
    again = Outbox(tmp_path / "a.sqlite")
    try:
        assert [r.msg_id for r in again.pending()] == ["m-2", "m-3"]
        assert again.take_incarnation(True, "inc-2") == "inc-1"  # a resume continues it
        assert again.gen == 2 and again.prev_max_step == 6
        assert again.previous_keys(4, 6) == {4: {("e", "0", "b")}, 5: {("x", "0", "a")},
                                             6: {("", "0", "7")}}
        again.append([out(4, 6, ["c"])])
        assert again.previous_keys(6, 6)[6] == {("", "0", "7")}  # earlier processes only
        again.prune_keys(5)  # whole records: the one of step 4 goes
        assert set(again.previous_keys(0, 9)) == {5, 6}
    finally:
        again.close()
    fresh = Outbox(tmp_path / "a.sqlite")
    try:  # a new experiment (no resume) sees nothing of the earlier one's samples
        assert fresh.take_incarnation(False, "inc-3") == "inc-3"
        assert fresh.prev_max_step is None and fresh.previous_keys(0, 9) == {}
    finally:
        fresh.close()


def test_typed_identities_come_back_as_the_ids_they_hold(tmp_path: Path) -> None:
    """A samples message's int64 columns (per-sample steps, integer ids) are remembered as
    narrow typed blocks and read back as the same ids, whatever their range."""
    import numpy as np

    spool = Outbox(tmp_path / "a.sqlite")
    spool.take_incarnation(False, "inc")
    sids = np.array([-5, 300, 70_000, 2**40], dtype=np.int64)  # int64 wide
    fields = {"step": np.array([3, 3, 4, 4], dtype=np.int64), "env": ["x", "y", "x", None],
              "group_id": np.array([1, 1, 2, 2], dtype=np.int64), "sample_id": sids}
    lo, hi, data = identity_record(fields)
    small = identity_record({**fields, "sample_id": np.array([1, 2, 3, 4])})[2]
    assert (lo, hi) == (3, 4) and len(small) < len(data)  # (int8 ids: fewer bytes)
    spool.append([Outgoing("m-1", "samples", 4, "msgpack", b"x", (lo, hi, data))])
    spool.close()
    again = Outbox(tmp_path / "a.sqlite")
    try:
        assert again.take_incarnation(True, "new") == "inc"
        assert again.previous_keys(3, 4) == {3: {("x", "1", "-5"), ("y", "1", "300")},
                                             4: {("x", "2", "70000"), ("", "2", str(2**40))}}
    finally:
        again.close()


def test_a_committed_append_survives_sigkill_of_the_writer(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        import msgpack
        from trainer_hooks.transport.outbox import Outgoing, open_slot
        spool = open_slot(__import__("pathlib").Path({str(tmp_path)!r}), "run/1")
        spool.take_incarnation(False, "inc")
        for i in range(50):
            ident = (i, i, msgpack.packb([i, None, [0], [f"k{{i}}"]]))
            spool.append([Outgoing(f"m-{{i}}", "samples", 1, "msgpack", b"x" * 1000, ident)])
        print("appended", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "appended"
        # the slot is locked while the writer lives: a second opener gets another slot
        other = open_slot(tmp_path, "run/1")
        assert other.path is not None and other.path.name == "slot-1.sqlite"
        other.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    spool = open_slot(tmp_path, "run/1")
    try:
        assert spool.path is not None and spool.path.name == "slot-0.sqlite"
        assert [r.msg_id for r in spool.pending(0, 100)] == [f"m-{i}" for i in range(50)]
        spool.take_incarnation(True, "other")
        assert spool.previous_keys(49, 49) == {49: {("", "0", "k49")}}
    finally:
        spool.close()


def test_a_new_client_adopts_the_pending_messages_of_dead_slots(tmp_path: Path) -> None:
    a = open_slot(tmp_path, "r")
    b = open_slot(tmp_path, "r", name="worker-b")
    c = open_slot(tmp_path, "r")
    assert [s.path.name for s in (a, b, c) if s.path] == [
        "slot-0.sqlite", "worker-b.sqlite", "slot-1.sqlite"]
    a.append([out(1), out(2)])
    b.append([out(3, 1, ["kb"])])
    c.append([out(4)])
    a.close()
    b.close()
    fresh = open_slot(tmp_path, "r")  # takes slot-0 back, adopts worker-b's message
    try:
        assert [r.msg_id for r in fresh.pending()] == ["m-1", "m-2", "m-3"]
        assert fresh.previous_keys(0, 9) == {}  # identities stay with their slot
        b2 = open_slot(tmp_path, "r", name="worker-b")
        assert b2.pending() == [] and b2.previous_keys(0, 9) == {1: {("", "0", "kb")}}
        b2.close()
    finally:
        fresh.close()
        c.close()
    last = open_slot(tmp_path, "r")  # everyone gone: it adopts every pending message
    try:
        assert sorted(r.msg_id for r in last.pending()) == ["m-1", "m-2", "m-3", "m-4"]
    finally:
        last.close()


def test_an_emptied_outbox_is_removed_with_its_run_directory_when_last(tmp_path: Path
                                                                       ) -> None:
    a = open_slot(tmp_path, "r")
    b = open_slot(tmp_path, "r")
    assert a.path is not None and b.path is not None
    a.append([out(1, 1, ["s"])])
    assert not a.discard()  # a pending message: the file stays (closed, its lock released)
    assert a.path.exists()
    again = open_slot(tmp_path, "r")  # slot-0 again
    assert [r.msg_id for r in again.pending()] == ["m-1"]
    again.delete(["m-1"])
    assert again.discard()  # acknowledged: its files go, b's stay
    run_dir = a.path.parent
    assert {f.name.split(".")[0] for f in run_dir.iterdir()} == {"slot-1"}
    assert b.discard()  # the last slot: the run's directory goes too
    assert not run_dir.exists() and list(tmp_path.iterdir()) == []
    fresh = open_slot(tmp_path, "r")  # the directory is made again
    try:
        assert fresh.path is not None and fresh.path.name == "slot-0.sqlite"
    finally:
        fresh.close()


def test_a_lock_file_removed_before_it_was_locked_is_locked_anew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race `Outbox.discard` opens: another client opened the lock file, its holder
    removed it, then the other locked the removed file. It must lock the file at the path
    now, or two clients would write one slot."""
    assert sp._fcntl is not None
    path = tmp_path / "slot-0.lock"
    real = sp._fcntl.flock
    removed: list[int] = []

    def flock(fd: int, op: int) -> None:
        if not removed:  # the holder removes the file between our open and our flock
            removed.append(os.fstat(fd).st_ino)
            os.unlink(path)
        real(fd, op)

    monkeypatch.setattr(sp._fcntl, "flock", flock)
    fd = sp.try_lock(path)
    assert fd is not None and removed  # (the removed file's inode number may be reused)
    try:
        held = os.fstat(fd)
        assert held.st_nlink == 1 and (held.st_dev, held.st_ino) == (path.stat().st_dev,
                                                                      path.stat().st_ino)
        monkeypatch.setattr(sp._fcntl, "flock", real)
        assert sp.try_lock(path) is None  # held: the lock is on the file at the path
    finally:
        os.close(fd)


def test_an_outbox_whose_file_fails_goes_on_in_memory_in_the_same_order(tmp_path: Path
                                                                         ) -> None:
    outbox = open_slot(tmp_path, "r")
    try:
        outbox.append([out(1), out(2), out(3)])
        sent = outbox.pending(0, 1)  # m-1 is on the wire when the file fails
        outbox.move_to_memory()
        assert outbox.path is None and (outbox.rows, outbox.bytes) == (3, 3 * len(b"body-1"))
        # the same sequence numbers: what was sent is still matched, nothing is sent twice
        assert [r.msg_id for r in outbox.pending(sent[-1].seq)] == ["m-2", "m-3"]
        outbox.delete(["m-1", "m-2", "m-3"])  # all acknowledged
        outbox.append([out(4)])
        assert [(r.msg_id, r.seq) for r in outbox.pending()] == [("m-4", sent[-1].seq + 3)]
        other = open_slot(tmp_path, "r")  # the file's slot lock was let go
        assert other.path is not None and other.path.name == "slot-0.sqlite"
        other.close()
    finally:
        outbox.close()


def test_run_names_map_to_distinct_safe_directories() -> None:
    assert sp.run_key("a/b") != sp.run_key("a_b")
    assert "/" not in sp.run_key("../../etc/passwd")


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_encoded_messages_decode_to_what_the_server_validates(fmt: str) -> None:
    import numpy as np

    msg = {"v": 1, "id": "x-1", "type": "samples", "run": "r", "step": [1, 1, 2],
           "sample_id": ["a", "b", "c"], "group_id": [0, 0, 1],
           "reward": np.array([1.0, np.nan, 0.5]), "time": np.array([1.0, 2.0, 3.0]),
           "metrics": {"m": np.array([1.0, 2.0, np.inf])}}
    body = p.encode(msg, fmt)
    obj = p.decode_frame(body if fmt == "msgpack" else body.decode(), binary=fmt == "msgpack")
    got = p.validate_message(obj)
    assert got.n == 3 and np.isnan(got.reward[1]) and np.isnan(got.metrics["m"][2])
    assert p.decode(body, fmt)["sample_id"] == ["a", "b", "c"]


def test_a_refused_message_splits_into_valid_halves_that_add_up() -> None:
    msg = {"v": 1, "id": "x-1", "type": "samples", "run": "r", "step": [1, 1, 2, 2, 2],
           "sample_id": list("abcde"), "group_id": [0] * 5, "reward": [1.0] * 5,
           "env": "e", "stop_reason": ["length", None, None, "stop", None],
           "metrics": {"m": [1, 2, 3, 4, 5]}}
    halves = p.split(msg)
    assert halves is not None and [h["id"] for h in halves] == ["x-1.0", "x-1.1"]
    got = [p.validate_message(h) for h in halves]
    assert [g.n for g in got] == [2, 3]
    assert got[1].metrics["m"].tolist() == [3, 4, 5] and got[1].step.tolist() == [2, 2, 2]
    step = {"v": 1, "id": "s", "type": "step", "run": "r", "step": 1,
            "metrics": {"a": 1, "b": 2, "c": 3}}
    halves = p.split(step)
    assert halves is not None and [h["metrics"] for h in halves] == [{"a": 1}, {"b": 2, "c": 3}]
    assert p.split({**step, "metrics": {"a": 1}}) is None
    assert p.split({"type": "run.start", "id": "z"}) is None


def test_deleting_an_acknowledged_message_does_not_rewrite_its_body(tmp_path: Path) -> None:
    """Debian's SQLite zeroes freed pages by default (secure_delete): every acknowledged
    message would be written to the log a second time, as zeros. The outbox turns that off."""
    spool = Outbox(tmp_path / "a.sqlite")
    try:
        assert spool._db.execute("PRAGMA secure_delete").fetchone()[0] == 0
        spool.append([Outgoing("big", "samples", 1, "msgpack", os.urandom(1 << 20))])
        spool._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        spool.delete(["big"])
        log = (tmp_path / "a.sqlite-wal").stat().st_size
        assert log < 64 << 10, log  # the b-tree and freelist pages, not the megabyte
    finally:
        spool.close()


def on_disk(path: Path) -> dict[str, int]:
    """msg id -> length of its body as the outbox file holds it (what another process sees)."""
    db = sqlite3.connect(str(path))
    try:
        return dict(db.execute("SELECT msg_id, length(body) FROM outbox").fetchall())
    finally:
        db.close()


def test_a_staged_outbox_writes_bodies_only_when_spilled(tmp_path: Path) -> None:
    """Staged (the sender's default): rows and sample identities are written at once, bodies
    stay in memory until spilled; an acknowledged message's body never reaches the disk."""
    spool = Outbox(tmp_path / "a.sqlite", staged=True)
    try:
        spool.take_incarnation(False, "inc")
        spool.append([out(1, 3, ["a"]), out(2), out(3)])
        assert on_disk(tmp_path / "a.sqlite") == {"m-1": 0, "m-2": 0, "m-3": 0}
        assert [r.body for r in spool.pending()] == [b"body-1", b"body-2", b"body-3"]
        assert (spool.rows, spool.bytes, spool.staged_bytes) == (3, 18, 18)
        spool.delete(["m-2"])  # acknowledged while staged: nothing was written for it
        assert (spool.rows, spool.bytes, spool.staged_bytes) == (2, 12, 12)
        assert spool.spill() == 2 and spool.staged_bytes == 0 and spool.oldest_staged() is None
        assert on_disk(tmp_path / "a.sqlite") == {"m-1": 6, "m-3": 6}
        assert [r.body for r in spool.pending()] == [b"body-1", b"body-3"]
        spool.append([out(4)])
        sealed = spool.oldest_staged()
        assert sealed is not None
        assert spool.spill(older_than=sealed) == 0  # (sealed at that instant, not before)
        assert spool.spill(older_than=sealed + 1) == 1
        spool.delete(["m-1", "m-3", "m-4"])
        assert (spool.rows, spool.bytes) == (0, 0)
    finally:
        spool.close()


def test_messages_staged_by_a_killed_process_are_dropped_with_their_identities(
        tmp_path: Path) -> None:
    """A process killed before spilling loses its staged messages: the next open drops their
    rows (nothing empty is ever sent) and counts them; the sample identities of those never
    sent go too (a resume logs those samples again), those of one sent stay (it may be stored:
    a resume leaves its samples out). What was spilled is kept."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        import msgpack
        from trainer_hooks.transport.outbox import Outgoing, open_slot
        spool = open_slot(__import__("pathlib").Path({str(tmp_path)!r}), "run/1", staged=True)
        spool.take_incarnation(False, "inc")
        def ident(i):
            return (i, i, msgpack.packb([i, None, [0], [f"k{{i}}"]]))
        spool.append([Outgoing(f"m-{{i}}", "samples", 1, "msgpack", b"x" * 100, ident(i))
                      for i in range(3)])
        spool.spill()
        last = spool.append([Outgoing(f"m-{{i}}", "samples", 1, "msgpack", b"y" * 100,
                                      ident(i)) for i in range(3, 6)])
        spool.mark_sent(last - 2)  # m-3 left for the server; m-4 and m-5 never did
        print("appended", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "appended"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    spool = open_slot(tmp_path, "run/1", staged=True)
    try:
        assert (spool.lost, spool.in_doubt) == (2, 1)
        rows = spool.pending(0, 100)
        assert [(r.msg_id, r.body) for r in rows] == [(f"m-{i}", b"x" * 100) for i in range(3)]
        spool.take_incarnation(True, "other")
        # the sent one may be stored: its samples stay remembered; the others' do not
        assert spool.prev_max_step == 3
        assert spool.previous_keys(0, 9) == {i: {("", "0", f"k{i}")} for i in range(4)}
    finally:
        spool.close()
    again = open_slot(tmp_path, "run/1", staged=True)
    try:  # counted once: the next open finds nothing more
        assert (again.lost, again.in_doubt) == (0, 0)
    finally:
        again.close()


def test_an_outbox_file_from_before_staging_opens_with_its_identities(tmp_path: Path) -> None:
    """Outbox files written by an older trainer_hooks have no `sealed.seq`: it is added, and
    their messages and sample identities stay."""
    db = sqlite3.connect(str(tmp_path / "a.sqlite"))
    db.executescript("""
        CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0, fmt TEXT NOT NULL,
            body BLOB NOT NULL, created REAL NOT NULL);
        CREATE TABLE sealed (id INTEGER PRIMARY KEY, step_min INTEGER NOT NULL,
            step_max INTEGER NOT NULL, gen INTEGER NOT NULL, incarnation TEXT NOT NULL,
            data BLOB NOT NULL);
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('gen', '1'), ('incarnation', 'inc');
    """)
    ident = identity_record({"step": 7, "env": None, "group_id": [0], "sample_id": ["s"]})
    db.execute("INSERT INTO outbox (msg_id, kind, fmt, body, created) VALUES "
               "('old', 'samples', 'msgpack', x'01', 0)")
    db.execute("INSERT INTO sealed (step_min, step_max, gen, incarnation, data) VALUES "
               "(7, 7, 1, 'inc', ?)", (ident[2],))
    db.commit()
    db.close()
    spool = Outbox(tmp_path / "a.sqlite", staged=True)
    try:
        assert spool.lost == 0 and [r.body for r in spool.pending()] == [b"\x01"]
        assert spool.take_incarnation(True, "new") == "inc"
        assert spool.previous_keys(7, 7) == {7: {("", "0", "s")}}
    finally:
        spool.close()


def test_replaced_and_adopted_messages_are_written_to_disk_at_once(tmp_path: Path) -> None:
    """In a staged outbox the halves of a split (replace) and a dead slot's messages (adopt)
    were safe on disk before: they are written at once, and the original's sample identities
    stand for the halves."""
    dead = Outbox(tmp_path / "dead.sqlite")
    dead.append([out(7), out(8)])
    dead.close()
    spool = Outbox(tmp_path / "a.sqlite", staged=True)
    other = Outbox(tmp_path / "dead.sqlite", bump_gen=False)
    try:
        spool.take_incarnation(False, "inc")
        spool.append([out(1, 5, ["a", "b"])])
        assert spool.adopt(other) == 2
        spool.replace("m-1", [out(2), out(3)])
        assert on_disk(tmp_path / "a.sqlite") == {"m-7": 6, "m-8": 6, "m-2": 6, "m-3": 6}
        assert spool.staged_bytes == 0 and spool.rows == 4
    finally:
        other.close()
        spool.close()
    again = Outbox(tmp_path / "a.sqlite", staged=True)
    try:
        assert (again.lost, again.in_doubt) == (0, 0)
        assert [r.msg_id for r in again.pending()] == ["m-7", "m-8", "m-2", "m-3"]
        again.take_incarnation(True, "x")
        assert again.previous_keys(5, 5) == {5: {("", "0", "a"), ("", "0", "b")}}
    finally:
        again.close()


def test_a_failed_transaction_changes_nothing_in_memory(tmp_path: Path) -> None:
    """Counters and staged bodies change only once a transaction commits: a replace whose
    append fails leaves the message, its staged body and the counts as they were."""
    spool = Outbox(tmp_path / "a.sqlite", staged=True)
    try:
        spool.append([out(1), out(2)])
        before = (spool.rows, spool.bytes, spool.staged_bytes, spool.last_seq)
        unbindable: Any = object()  # the body's INSERT fails (after the delete succeeded)
        with pytest.raises(sqlite3.Error):
            spool.replace("m-1", [Outgoing("m-9", "step", 0, "msgpack", unbindable)])
        assert (spool.rows, spool.bytes, spool.staged_bytes, spool.last_seq) == before
        assert [(r.msg_id, r.body) for r in spool.pending()] == [("m-1", b"body-1"),
                                                                  ("m-2", b"body-2")]
    finally:
        spool.close()

"""`telescope sync` against the real dashboard server (daphne subprocesses): a trainer whose
server was down for its whole run leaves its outbox behind, with one line saying so; sync
delivers it into the run it was meant for, exactly once, and a second delivery stores nothing.
Also: the token kept in a private outbox file, a refused token, a slot a live process holds,
outboxes written before tokens were kept, and a dry run."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from devtools.live_server import LiveServer, ServerState, free_port
from ingest.core.series_ids import series_id
from tests.hooks_sender.test_sender_live import get, settled, stored_samples
from trainer_hooks import connect
from trainer_hooks.transport.outbox import open_slot, try_lock
from trainer_hooks.transport.spooled import stored_target

ROOT = Path(__file__).resolve().parents[2]
N_STEPS, N_SAMPLES = 40, 12

# A trainer whose server never answers: it logs, then closes with a short timeout.
TRAINER = textwrap.dedent(f"""
    import logging, sys
    sys.path.insert(0, {str(ROOT)!r})
    from trainer_hooks import connect
    url, token, spool, steps, m = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    client = connect(url, token, "grpo-1", config={{"lr": 1e-6}}, spool_dir=spool,
                     backoff_initial=0.1, backoff_max=0.5)
    for step in range(steps):
        client.log_step(step, {{"loss": 1.0 / (step + 1)}})
        client.log_samples(step, sample_id=[f"s{{step}}-{{i}}" for i in range(m)],
                           group_id=[f"g{{step}}-{{i // 4}}" for i in range(m)],
                           reward=[float(i % 3) for i in range(m)], env="countdown")
    print("closed", client.close(timeout=2, status="finished"), flush=True)
""")

# `telescope sync` where Django cannot be imported (a GPU node with only trainer_hooks).
NO_DJANGO = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(ROOT)!r})
    sys.modules["django"] = None  # any import of django now fails
    from telescope_ui.cli import main
    main(["sync", *sys.argv[1:]])
""")


def telescope_sync(*args: str, via: str = "cli") -> subprocess.CompletedProcess[str]:
    """`telescope sync ARGS` as a subprocess: through the `telescope` command's module, with
    Django unimportable, or as `python -m trainer_hooks.sync`."""
    argv = {"cli": ["-m", "telescope_ui.cli", "sync"], "no-django": ["-c", NO_DJANGO],
            "hooks": ["-m", "trainer_hooks.sync"]}[via]
    return subprocess.run([sys.executable, *argv, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


def runs(server: LiveServer) -> dict[str, dict[str, object]]:
    return {r["name"]: r for r in get(server, "/api/runs")["runs"]}


def by_run(report: str) -> dict[str, str]:
    """sync's report lines by the run each starts with (`run → URL: ...` or `run: ...`)."""
    return {re.split(r"[ :]", line, maxsplit=1)[0]: line for line in report.splitlines()}


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_run_the_server_never_saw_is_delivered_by_sync_into_its_own_run(
        live_state: ServerState, tmp_path: Path) -> None:
    token = live_state.token("proj")
    port, spool = free_port(), tmp_path / "spool"
    url = f"ws://127.0.0.1:{port}"
    trainer = subprocess.run([sys.executable, "-c", TRAINER, url, token, str(spool),
                              str(N_STEPS), str(N_SAMPLES)], capture_output=True, text=True,
                             timeout=120)
    assert trainer.returncode == 0 and "closed False" in trainer.stdout, trainer.stderr
    [outbox] = spool.glob("*/slot-0.sqlite")
    # close() said in one line what is pending, where it is spooled, and how to deliver it
    # (`telescope-sync`: the client's own command, there wherever trainer_hooks is installed)
    [line] = [x for x in trainer.stderr.splitlines() if "telescope-sync" in x]
    for part in (f"{N_STEPS} steps", f"{N_STEPS * N_SAMPLES} samples", "never answered",
                 str(outbox), f"telescope-sync --spool {spool}", "'grpo-1'"):
        assert part in line, (part, line)
    # the outbox keeps the token, readable by its owner only
    assert private(outbox) and stat.S_IMODE(outbox.parent.stat().st_mode) == 0o700
    assert all(private(p) for p in outbox.parent.glob("slot-0.sqlite-*"))
    with sqlite3.connect(outbox) as db:
        assert stored_target(db) == {"run": "grpo-1", "url": f"{url}/ws/ingest/",
                                     "token": token}
    copy = tmp_path / "copy"
    shutil.copytree(spool, copy)  # (to deliver a second time below)

    server = LiveServer(live_state, port=port).start()
    try:
        dry = telescope_sync("--spool", str(spool), "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "grpo-1" in dry.stdout and "would deliver" in dry.stdout
        assert f"{N_STEPS} steps, {N_STEPS * N_SAMPLES} samples" in dry.stdout
        what = re.search(r"would deliver (\d+ messages \(.*?\)) from", dry.stdout)
        assert what is not None, dry.stdout
        time.sleep(0.5)
        assert runs(server) == {}  # a dry run sends nothing

        done = telescope_sync("--spool", str(spool))
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"delivered {what[1]}" in done.stdout, done.stdout
        assert "into run 'grpo-1'" in done.stdout
        found = runs(server)
        assert list(found) == ["grpo-1"]  # the run meant: no grpo-1-2, no extra empty run
        assert found["grpo-1"]["status"] == "finished"  # (its run.end, delivered too)
        rid = int(str(found["grpo-1"]["id"]))
        loss, count = series_id("step", "loss"), series_id("reward", "reward", "count",
                                                           "countdown")
        want = {loss: {s: 1.0 / (s + 1) for s in range(N_STEPS)},
                count: {s: float(N_SAMPLES) for s in range(N_STEPS)}}
        assert settled(server, rid, want) == want
        once = {"total": N_STEPS * N_SAMPLES, "unique": N_STEPS * N_SAMPLES, "max_copies": 1}
        assert stored_samples(live_state, "grpo-1") == once

        again = telescope_sync("--spool", str(spool))
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.startswith("telescope sync: nothing to deliver in ")
        assert len(again.stdout.splitlines()) == 1, again.stdout

        # the same messages once more (a copy of the outbox): their ids were kept, so the
        # server acknowledges them as duplicates and stores nothing twice
        twice = telescope_sync("--spool", str(copy))
        assert twice.returncode == 0, twice.stdout + twice.stderr
        dups = re.search(r"; (\d+) of them were already stored \(acknowledged as "
                         r"duplicates, not stored again\)", twice.stdout)
        total = int(what[1].split()[0])  # (a barrier is never stored: not a duplicate)
        assert dups is not None and int(dups[1]) == total - 1, twice.stdout
        assert list(runs(server)) == ["grpo-1"]
        assert stored_samples(live_state, "grpo-1") == once
    finally:
        server.stop()


def left_behind(spool: Path, url: str, token: str, run: str, steps: int) -> Path:
    """An outbox of `run` with `steps` steps that a client left (its server never answered)."""
    client = connect(url, token, run, spool_dir=spool, backoff_initial=0.1, backoff_max=0.2)
    for step in range(steps):
        client.log_step(step, {"loss": float(step)})
    assert not client.close(timeout=0.3)
    assert client.spool_path is not None
    return client.spool_path


def test_sync_leaves_held_slots_alone_and_names_what_it_cannot_deliver(
        live_state: ServerState, tmp_path: Path) -> None:
    token = live_state.token("proj")
    port, spool = free_port(), tmp_path / "spool"
    url = f"ws://127.0.0.1:{port}"
    left_behind(spool, url, token, "run-a", 5)
    held = left_behind(spool, url, token, "run-held", 6)
    old = left_behind(spool, url, token, "run-old", 7)
    with sqlite3.connect(old) as db:  # as written before outboxes kept their target
        db.execute("DELETE FROM meta WHERE name IN ('run', 'url', 'token')")
    server = LiveServer(live_state, port=port).start()
    lock = try_lock(held.with_suffix(".lock"))  # this (live) process holds run-held's slot
    assert lock is not None
    try:
        bad = telescope_sync("--spool", str(spool), "--token", "not-a-token", via="hooks")
        assert bad.returncode != 0
        [line] = [x for x in bad.stdout.splitlines() if x.startswith("run-a ")]
        assert "NOT delivered: 7 messages (5 steps" in line and "refused" in line, bad.stdout
        assert runs(server) == {}

        mixed = telescope_sync("--spool", str(spool), via="no-django")
        assert mixed.returncode == 1, mixed.stdout + mixed.stderr  # the old outbox
        lines = by_run(mixed.stdout)
        assert "delivered 7 messages (5 steps, run.start, barrier)" in lines["run-a"]
        assert "in use by a running trainer, left alone" in lines["run-held"]
        assert "--url ws://HOST:PORT --token TOKEN" in lines["run-old"]
        assert set(runs(server)) == {"run-a"}

        os.close(lock)
        lock = None
        rest = telescope_sync("--spool", str(spool), "--url", url, "--token", token)
        assert rest.returncode == 0, rest.stdout + rest.stderr
        lines = by_run(rest.stdout)
        assert "delivered 8 messages (6 steps, run.start, barrier)" in lines["run-held"]
        assert "delivered 9 messages (7 steps, run.start, barrier)" in lines["run-old"]
        assert "run-a" not in lines  # (delivered already: nothing to say)
        found = runs(server)
        assert set(found) == {"run-a", "run-held", "run-old"}
        assert [found[r]["last_step"] for r in ("run-a", "run-held", "run-old")] == [4, 5, 6]
    finally:
        if lock is not None:
            os.close(lock)
        server.stop()


def test_an_outbox_file_is_made_private_and_keeps_where_its_messages_go(
        tmp_path: Path) -> None:
    base = tmp_path / "spool"
    first = open_slot(base, "r")  # as an older trainer_hooks made it: no target
    assert first.path is not None
    path = first.path
    first.close()
    os.chmod(path, 0o644)
    again = open_slot(base, "r", url="ws://h:1/ws/ingest/", token="secret")
    try:
        assert private(path)
        with sqlite3.connect(path) as db:
            assert stored_target(db) == {"run": "r", "url": "ws://h:1/ws/ingest/",
                                         "token": "secret"}
    finally:
        again.close()

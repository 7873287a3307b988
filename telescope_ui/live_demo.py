"""A live demo run beside the server `make run` starts: a simulated GRPO job that
streams through `trainer_hooks` into the dashboard, a few steps per second, so a newcomer sees
the product move. It stops when the server stops.

    python -m telescope_ui.live_demo --url http://127.0.0.1:8000 --watch-pid PID

- Data: ingest.write.demo's synthetic GRPO steps and samples (the shape `manage.py demo` loads)
  and, a step at a time, the events and gauges of its simulated asynchronous job
  (ingest.write.demo_timeline), logged with a real `connect()` client (log_step, log_samples,
  log_events, log_gauges) at wall-clock time: the job's time runs sped up, a step of it
  (STEP_SECONDS) per 1 / `--steps-per-second`, and its logged `timing_*` keys with it.
- One run, `grpo-live` in project `demo`. A restart resumes it where it stopped (`resume=True`,
  from its last step); one that reached `total_steps` ends `finished`, stays a while, and is then
  deleted for a fresh one, so a server left running keeps a single live demo run.
- Stopping: it exits within a second of the watched process (the server; default: this
  process's parent) being gone, and never outlives it by more. It waits for the server to
  answer before connecting.
- State in TELESCOPE_DATA_DIR: an ingest token of the demo project, created once
  (`live-demo-token`, mode 0600), and the client's outbox (`live-demo-spool/`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.write.demo import DemoStep

log = logging.getLogger("telescope.live_demo")
TICK = 0.2  # seconds between checks of the watched process while waiting


class ServerGone(Exception):
    """The watched process ended: stop streaming."""


class Watch:
    """The process whose end ends the demo."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # it exists, owned by someone else
            return True
        return True

    def sleep(self, seconds: float) -> None:
        """Sleep, raising ServerGone as soon as the watched process has ended."""
        end = time.monotonic() + seconds
        while True:
            if not self.alive():
                raise ServerGone
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(TICK, left))


def wait_for_server(url: str, watch: Watch) -> None:
    while True:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (503: a check failed; ingest may still work)
        except OSError:
            watch.sleep(0.5)


def demo_token(project: str, data_dir: Path) -> str:
    """The demo project's ingest token, kept in the data directory (created when missing or
    no longer valid)."""
    from ingest.write.auth import create_token, project_for_token

    path = data_dir / "live-demo-token"
    if path.exists():
        token = path.read_text().strip()
        if project_for_token(token) is not None:
            return token
    _, token = create_token(project)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token


def resume_point(project: str, run: str) -> int | None:
    """The step to continue from when the previous live run stopped part-way (0 when it has no
    step yet); None to start afresh, after deleting a previous run that had ended."""
    from ingest.models import Run
    from ingest.write import housekeeping

    found = (Run.objects.filter(project__name=project, wire_name=run).order_by("-pk")
             .values_list("pk", "status", "last_step").first())
    if found is None:
        return None
    pk, status, last_step = found
    if status == "running":
        return 0 if last_step is None else last_step + 1
    housekeeping.delete(pk)
    return None


SAMPLE_COLUMNS = ("sample_id", "group_id", "reward", "env", "metrics", "advantage",
                  "prompt_tokens", "completion_tokens", "stop_reason", "off_policy_steps",
                  "discard_reason")


class Clock:
    """Simulated seconds of the demo's job to wall-clock time: the job runs `1 / scale` times
    faster than it would, from `anchor` on; falling behind moves it later (no burst)."""

    def __init__(self, scale: float, resumed_at: float) -> None:
        self.scale = scale
        self.anchor = time.time() - scale * resumed_at  # the last step sent ends now

    def __call__(self, t: float) -> float:
        return self.anchor + self.scale * t

    def catch_up(self, due: float, slack: float) -> float:
        late = time.time() - due
        if late > slack:
            self.anchor += late
            return due + late
        return due


def stream_one(url: str, token: str, args: argparse.Namespace, watch: Watch,
               spool: Path) -> None:
    """One simulated job from where the previous one stopped to `total_steps`, then `finished`."""
    from django.db import connections

    from ingest.write.demo import ENVIRONMENTS, demo_steps
    from ingest.write.demo_timeline import STEP_SECONDS
    from trainer_hooks import connect

    start = resume_point(args.project, args.run)
    connections.close_all()  # nothing held open while streaming
    config = {"algorithm": "grpo", "lr": 1e-6, "group_size": 8, "total_steps": args.total_steps,
              "live_demo": True}
    client = connect(url, token, run=args.run, config=config, environments=ENVIRONMENTS,
                     resume=start is not None, spool_dir=spool, atexit_timeout=0.5)
    log.info("live demo: streaming run %r (%s steps/s) into %s from step %d", args.run,
                args.steps_per_second, url, start or 0)
    interval = 1.0 / args.steps_per_second
    clock: Clock | None = None
    resumed_at = 0.0
    try:
        # The job replayed from step 0 (seeded: the same values whatever the start), its
        # events and gauges a step at a time.
        for ds in demo_steps(args.run, args.total_steps, chunk_steps=1):
            if ds.step < (start or 0):
                resumed_at = ds.end
                continue
            clock = clock or Clock(interval / STEP_SECONDS, resumed_at)
            due = clock(ds.end)
            watch.sleep(max(0.0, due - time.time()))
            send_step(client, ds, clock.catch_up(due, interval), clock)
        finish(client, watch)
    except ServerGone:
        client.close(timeout=0)  # the outbox keeps what was not sent, for the next start
        raise


def send_step(client: Any, ds: DemoStep, now: float, clock: Clock) -> None:
    """A step's metrics (its timings in the job's sped-up time, like its events), samples,
    and the events and gauges the job finished since the last step."""
    metrics = {k: v * clock.scale if k.startswith("timing_") else v
               for k, v in ds.metrics.items()}
    client.log_step(ds.step, metrics, time=now)
    for msg in ds.samples:
        columns = {k: msg[k] for k in SAMPLE_COLUMNS if k in msg}
        client.log_samples(ds.step, time=[now] * len(msg["reward"]), **columns)
    if ds.chunk is None:
        return
    events = ds.chunk.event_columns(clock.anchor, clock.scale)
    if events["name"]:
        client.log_events(**events)
    gauges = ds.chunk.gauge_columns(clock.anchor, clock.scale)
    if gauges["name"]:
        client.log_gauges(**gauges)


def finish(client: Any, watch: Watch, timeout: float = 30.0) -> None:
    """End the run `finished` once everything logged is stored, watching the server meanwhile
    (a plain `close(timeout=30)` would outlive a server that stopped)."""
    client.end("finished")
    deadline = time.monotonic() + timeout
    while not client.flush(timeout=0.5) and time.monotonic() < deadline:
        if not watch.alive():
            raise ServerGone
    client.close(timeout=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the dashboard")
    parser.add_argument("--watch-pid", type=int, default=os.getppid(),
                        help="stop when this process ends (default: the parent)")
    parser.add_argument("--project", default="demo")
    parser.add_argument("--run", default="grpo-live")
    parser.add_argument("--steps-per-second", type=float, default=3.0)
    parser.add_argument("--total-steps", type=int, default=1500)
    parser.add_argument("--pause", type=float, default=60.0,
                        help="seconds a finished run stays before a fresh one replaces it")
    parser.add_argument("--cycles", type=int, default=0, help="runs to stream (0: no end)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    log.setLevel(logging.INFO)
    # The client's "cannot reach, retrying" would only ever be the server stopping: we follow.
    logging.getLogger("trainer_hooks").setLevel(logging.ERROR)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
    import django

    django.setup()
    from django.conf import settings

    watch = Watch(args.watch_pid)
    data_dir = Path(settings.DATA_DIR)
    try:
        wait_for_server(args.url, watch)
        token = demo_token(args.project, data_dir)
        cycle = 0
        while not args.cycles or cycle < args.cycles:
            stream_one(args.url, token, args, watch, data_dir / "live-demo-spool")
            cycle += 1
            if not args.cycles or cycle < args.cycles:
                watch.sleep(args.pause)
    except ServerGone:
        log.info("live demo: the server stopped, so does the demo")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()

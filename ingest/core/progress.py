"""How far a run is: its status as people read it, and its ETA.

- Status (docs/protocol.md "Run status"): the stored one is `running` until a `run.end` makes
  it `finished` or `failed`. A running run is shown
  - `crashed` when its trainer has not been alive for TELESCOPE_CRASH_SECONDS (default 120):
    alive means an ingest connection that carried the run is open (the server refreshes
    `last_seen` while it is, `ingest.write.liveness`), or a message or heartbeat arrived
    (trainer_hooks sends one every 15 s while connected); the run's next message makes it
    running again;
  - `idle` when it is alive but no data came for TELESCOPE_IDLE_SECONDS (default 600);
  - `running` otherwise.
- Steps done: Hugging Face's Trainer counts steps from 1, most trainers from 0: a run whose
  smallest step is 1 or more has done `last_step` steps, else `last_step + 1`.
- Seconds per step: an exponentially weighted mean (ALPHA) of the gaps between the times of
  consecutive new steps, per step skipped over. The first step has no gap before it, so its
  warm-up (compilation, loading) never enters; a step logged again or out of order changes
  nothing.
- ETA: steps left to `total_steps` times seconds per step, only while the run is `running`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings

ALPHA = 0.2


def advance(run: Any, step: int, t: float | None) -> None:
    """Account for `step` logged at trainer time `t` (call before `last_step` moves on)."""
    if t is None or (run.last_step is not None and step <= run.last_step):
        return
    if run.last_step is not None and run.last_step_time is not None and t > run.last_step_time:
        gap = (t - run.last_step_time) / (step - run.last_step)
        run.step_seconds = gap if run.step_seconds is None else (
            ALPHA * gap + (1 - ALPHA) * run.step_seconds)
    run.last_step_time = t


def status_of(status: str, updated_at: datetime, last_seen: float | None,
              now: datetime) -> str:
    """The status shown for a run stored with `status` (see the module docstring); a run
    from before liveness was recorded (`last_seen` None) is judged by its last data."""
    if status != "running":
        return status
    seen = updated_at.timestamp() if last_seen is None else last_seen
    if now.timestamp() - seen > settings.TELESCOPE_CRASH_SECONDS:
        return "crashed"
    if (now - updated_at).total_seconds() > settings.TELESCOPE_IDLE_SECONDS:
        return "idle"
    return status


def steps_done(first_step: int | None, last_step: int | None) -> int | None:
    """How many steps the run has done (see the module docstring)."""
    if last_step is None:
        return None
    return last_step if first_step is not None and first_step >= 1 else last_step + 1


def eta_seconds(status: str, total_steps: int | None, done: int | None,
                step_seconds: float | None) -> float | None:
    if status != "running" or not total_steps or done is None or step_seconds is None:
        return None
    return max(0, total_steps - done) * step_seconds

"""How far a run is: its status as people read it, and its ETA.

- Status: `running`, `idle` (running, but nothing received for TELESCOPE_IDLE_SECONDS,
  default 600), `finished` or `failed` (from `run.end`).
- Seconds per step: an exponentially weighted mean (ALPHA) of the gaps between the times of
  consecutive new steps, per step skipped over. The first step has no gap before it, so its
  warm-up (compilation, loading) never enters; a step logged again or out of order changes
  nothing.
- ETA: steps left to `total_steps` times seconds per step, while the run is running.
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


def status_of(status: str, updated_at: datetime, now: datetime) -> str:
    if status == "running" and (now - updated_at).total_seconds() > settings.TELESCOPE_IDLE_SECONDS:
        return "idle"
    return status


def eta_seconds(status: str, total_steps: int | None, last_step: int | None,
                step_seconds: float | None) -> float | None:
    if status != "running" or not total_steps or last_step is None or step_seconds is None:
        return None
    return max(0, total_steps - 1 - last_step) * step_seconds

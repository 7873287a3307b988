"""Extreme-preserving downsampling of one series (pure numpy + tsdownsample).

Points are chosen with MinMaxLTTB (the line keeps its shape and its spikes); each chosen point
also carries the min and max of the raw values it stands for (from it up to the next chosen
point), so a chart can draw a band in which no extreme is lost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

DEFAULT_MAX_POINTS = 1500
MIN_POINTS = 10
MAX_POINTS = 20_000

_SELECTOR = MinMaxLTTBDownsampler()  # type: ignore[no-untyped-call]  # (tsdownsample's)


def clip_steps(step: np.ndarray, lo: int | None, hi: int | None) -> slice:
    """The slice of a step-sorted series within [lo, hi]."""
    start = 0 if lo is None else int(np.searchsorted(step, lo, side="left"))
    stop = step.size if hi is None else int(np.searchsorted(step, hi, side="right"))
    return slice(start, stop)


def downsample(step: np.ndarray, time: np.ndarray, value: np.ndarray,
               max_points: int) -> dict[str, Any]:
    """At most `max_points` points of a step-sorted series, with bucket bands when reduced."""
    if step.size <= max_points:
        return {"step": step, "time": time, "value": value, "downsampled": False}
    idx = _SELECTOR.downsample(step, value, n_out=max_points).astype(np.intp)
    return {
        "step": step[idx],
        "time": time[idx],
        "value": value[idx],
        "downsampled": True,
        "bucket_min": np.minimum.reduceat(value, idx),
        "bucket_max": np.maximum.reduceat(value, idx),
    }

"""The samples of one step as aggregation sees them, and the declared ranges it needs.

Pure: numpy only. Storage builds a `StepSamples` from every committed batch of a step, puts it in
canonical order (so the result does not depend on how samples were split or ordered on the
wire), and hands it to `ingest.aggregate.aggregate_step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Discard codes (index into DISCARD_NAMES); 0 = kept.
KEPT, MAX_ASYNC, ZERO_ADVANTAGE, CANCELED = 0, 1, 2, 3
DISCARD_NAMES = ("", "max_async", "zero_advantage", "canceled")

# A series is named by (kind, key, stat, env); env None = all environments together.
SeriesKey = tuple[str, str, str | None, str | None]


@dataclass
class StepSamples:
    """All committed samples of one step, columnar, in canonical order.

    Float columns are float64 with NaN for null or non-finite. An optional column that no batch
    of the step carried is None; when only some batches carried it, the others are NaN.
    """

    reward: np.ndarray  # float64 (n,)
    group: np.ndarray  # int64 codes 0..G-1: (step, group id) identity
    env: np.ndarray  # int64 codes into env_names; -1 = no environment given
    env_names: list[str]
    discard: np.ndarray  # int8 codes, see DISCARD_NAMES
    advantage: np.ndarray | None = None
    prompt_tokens: np.ndarray | None = None
    completion_tokens: np.ndarray | None = None
    stop_length: np.ndarray | None = None  # float64: 1.0 hit the length limit, 0.0 not, NaN unknown
    off_policy_steps: np.ndarray | None = None
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.reward.shape[0])


@dataclass(frozen=True)
class MetricRange:
    min: float | None = None
    max: float | None = None
    invert: bool = False


@dataclass(frozen=True)
class EnvRanges:
    """Declared ranges of one environment (from the YAML or the trainer)."""

    reward_min: float | None = None
    reward_max: float | None = None
    metrics: dict[str, MetricRange] = field(default_factory=dict)

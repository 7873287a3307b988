"""The samples of one or more steps as aggregation sees them.

Pure: numpy only. Storage builds a `StepSamples` from every committed batch of some steps, puts
it in canonical order (so the result does not depend on how samples were split or ordered on the
wire), and hands it to `ingest.pipeline.aggregate.aggregate_steps`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

# Discard codes (index into DISCARD_NAMES); 0 = kept.
KEPT, MAX_ASYNC, ZERO_ADVANTAGE, CANCELED = 0, 1, 2, 3
DISCARD_NAMES = ("", "max_async", "zero_advantage", "canceled")

# A series is named by (kind, key, stat, env); env None = all environments together.
SeriesKey = tuple[str, str, str | None, str | None]


@dataclass
class StepSamples:
    """All committed samples of one step, or of several steps aggregated together, columnar, in
    canonical order (by step, then group, sample id and reward).

    Float columns are float64 with NaN for null or non-finite. An optional column that no batch
    carried is None; when only some batches carried it, the others are NaN. With several steps,
    `step` gives each sample's step index (0..n_steps-1) and `metric_steps` which steps carried
    each sample metric (a step without it has no statistics of it).
    """

    reward: np.ndarray  # float64 (n,)
    group: np.ndarray  # int64 codes 0..G-1: (step, group id) identity, unique across steps
    env: np.ndarray  # int64 codes into env_names; -1 = no environment given
    env_names: list[str]
    discard: np.ndarray  # int8 codes, see DISCARD_NAMES
    advantage: np.ndarray | None = None
    prompt_tokens: np.ndarray | None = None
    completion_tokens: np.ndarray | None = None
    stop_length: np.ndarray | None = None  # float64: 1.0 hit the length limit, 0.0 not, NaN unknown
    off_policy_steps: np.ndarray | None = None
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    step: np.ndarray | None = None  # int64 step index per sample; None = one step
    n_steps: int = 1
    metric_steps: dict[str, np.ndarray] | None = None  # metric -> bool (n_steps,); None = all

    @property
    def n(self) -> int:
        return int(self.reward.shape[0])

    @property
    def step_index(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int64) if self.step is None else self.step

    def by_env(self, table: np.ndarray) -> np.ndarray:
        """Per sample, `table`'s entry for its environment code (−1, no environment: the last
        entry): the values `table[env]` gives, repeated over runs of one environment when the
        samples come environment by environment (a step's usually do), which is cheaper than
        indexing sample by sample."""
        runs = self._env_runs
        out: np.ndarray = (table[self.env] if runs is None
                           else np.repeat(table[self.env[runs[0]]], runs[1]))
        return out

    @cached_property
    def _env_runs(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(start, length) of each run of one environment code; None when runs are short."""
        env, n = self.env, self.n
        if n == 0:
            return None
        starts = np.flatnonzero(env[1:] != env[:-1]) + 1
        if 8 * (starts.size + 1) > n:
            return None
        starts = np.concatenate(([0], starts))
        return starts, np.diff(starts, append=n)

"""The peers' workload, generated the same way inside every process that logs it
(bench/vs_trackio.py's children, bench/peers_workload.py): what those benchmarks share.

Per step: one dict of `keys` step metrics and one batch of `samples` samples in groups of
`group`, with `metrics` sample metrics, half of them in environment "countdown" and half in
"math"; integer sample and group ids, rewards and metrics uniform in [0, 1), completion
tokens in [10, 2000). `lists=True` hands the sample columns over as Python lists (what a TRL
reward function returns) instead of numpy arrays. Seeded: every process logs the same values.

`summary` is what a tracker without samples (trackio) logs for them instead: per step, the
mean, std, min and max of the reward and of each sample metric over all samples and per
environment, computed on the trainer with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

ENVS = ("countdown", "math")


@dataclass(frozen=True)
class Workload:
    steps: int = 2000
    keys: int = 40
    samples: int = 512
    group: int = 16
    metrics: int = 8
    lists: bool = False

    def args(self) -> list[str]:
        """The command-line flags that give this workload (see `add_arguments`)."""
        out = [f"--steps={self.steps}", f"--keys={self.keys}", f"--samples={self.samples}",
               f"--group={self.group}", f"--metrics={self.metrics}"]
        return out + (["--lists"] if self.lists else [])


def add_arguments(ap: Any) -> None:
    """The workload's flags on an argparse parser."""
    d = Workload()
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--keys", type=int, default=d.keys)
    ap.add_argument("--samples", type=int, default=d.samples)
    ap.add_argument("--group", type=int, default=d.group)
    ap.add_argument("--metrics", type=int, default=d.metrics)
    ap.add_argument("--lists", action="store_true",
                    help="sample columns as Python lists (TRL's reward functions return them)")


def from_args(ns: Any) -> Workload:
    return Workload(ns.steps, ns.keys, ns.samples, ns.group, ns.metrics, ns.lists)


Columns = dict[str, Any]


def generate(w: Workload) -> tuple[list[dict[str, float]], list[Columns]]:
    """Every step's metrics dict and samples columns (keyword arguments of `log_samples`)."""
    rng = np.random.default_rng(0)
    names = [f"train/metric_{k:02d}" for k in range(w.keys)]
    values = rng.random((w.steps, w.keys)).tolist()
    step_metrics = [dict(zip(names, row, strict=True)) for row in values]
    n_groups = w.samples // w.group
    envs = np.where(np.arange(w.samples) < w.samples // 2, ENVS[0], ENVS[1]).tolist()
    base_group = np.repeat(np.arange(n_groups), w.group)
    columns = []
    for step in range(w.steps):
        cols: Columns = {
            "sample_id": np.arange(w.samples) + step * w.samples,
            "group_id": base_group + step * n_groups,
            "reward": rng.random(w.samples),
            "env": envs,
            "completion_tokens": rng.integers(10, 2000, w.samples).astype(np.float64),
            "metrics": {f"m{m}": rng.random(w.samples) for m in range(w.metrics)},
        }
        columns.append(as_lists(cols) if w.lists else cols)
    return step_metrics, columns


def as_lists(cols: Columns) -> Columns:
    """One step's columns with the arrays as Python lists (a process that logs lists makes
    them step by step, as a reward function does: `generate` of a whole run of lists holds
    millions of Python floats at once)."""
    out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in cols.items()}
    out["metrics"] = {k: v.tolist() for k, v in cols["metrics"].items()}
    return out


def summary(cols: Columns) -> dict[str, float]:
    """The per-step figures a tracker without samples is given for them (see the docstring)."""
    env = np.asarray(cols["env"])
    scopes = [("", slice(None))] + [(f"/{e}", env == e) for e in ENVS]
    out: dict[str, float] = {}
    series = {"reward": cols["reward"], **{f"sample/{k}": v for k, v in cols["metrics"].items()}}
    for name, values in series.items():
        v = np.asarray(values, dtype=np.float64)
        for suffix, sel in scopes:
            x = v[sel]
            out[f"{name}/mean{suffix}"] = float(x.mean())
            out[f"{name}/std{suffix}"] = float(x.std(ddof=1))
            out[f"{name}/min{suffix}"] = float(x.min())
            out[f"{name}/max{suffix}"] = float(x.max())
    return out

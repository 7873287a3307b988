"""TRL / `transformers` log keys → Telescope step-metric keys (`section/group/metric`).

Data, not code paths: `TRL_KEYS` renames the keys whose meaning matches a key the dashboard
already describes (so the chart gets its title, "?" text and health hints); any other key keeps
its own name, a bare one filed under `train/` (TRL's `frac_reward_zero_std` →
`train/frac_reward_zero_std`) and one with a `/` as it is (TRL's `rewards/<func>/mean`,
`clip_ratio/low_mean` and `sampling/...` already read as section/group/metric). Evaluation keys
(`eval_<key>`) go to the `val/` section; the end-of-training summary (`train_runtime`, ...) to
`summary/`. Pure: no transformers import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# TRL key → Telescope key. Left: what GRPOTrainer (and Trainer) log; right: the dashboard's name.
TRL_KEYS: dict[str, str] = {
    # transformers.Trainer
    "loss": "loss/total",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "epoch": "train/epoch",
    "num_input_tokens_seen": "train/num_input_tokens_seen",
    # GRPOTrainer: the loss and the policy
    "policy_loss": "loss/policy",
    "aux_loss": "loss/aux",
    "entropy": "entropy",
    "kl": "train/kl_mean",  # mean per-token KL to the reference model (beta > 0)
    "clip_ratio/region_mean": "train/clip_frac",  # tokens clipped at either bound
    "clip_ratio": "train/clip_frac",  # the same figure from the Liger loss
    # GRPOTrainer: rewards (the Reward section recomputes them exactly from the samples)
    "reward": "train/reward_mean",
    "reward_std": "train/reward_std",
    # GRPOTrainer: completions
    "num_tokens": "train/num_tokens_seen",  # cumulative prompt + completion tokens
    "completions/mean_length": "train/response_len_mean",
    "completions/max_length": "train/response_len_max",
    "completions/min_length": "train/response_len_min",
    "completions/clipped_ratio": "train/rollout_truncated_frac",
    "completions/mean_terminated_length": "train/terminated_len_mean",
    "completions/max_terminated_length": "train/terminated_len_max",
    "completions/min_terminated_length": "train/terminated_len_min",
    # GRPOTrainer: time of one optimizer step's forward/backward passes
    "step_time": "timing_step_total",
}

# Logged once, when training ends.
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second",
                          "total_flos", "train_loss", "train_tokens_per_second"})


def telescope_key(key: str) -> str:
    """The Telescope step-metric key for one TRL / Trainer log key."""
    if key in TRL_KEYS:
        return TRL_KEYS[key]
    if key in SUMMARY_KEYS:
        return f"summary/{key}"
    if key.startswith("eval_"):
        inner = telescope_key(key[len("eval_"):])
        if inner.startswith("train/"):
            inner = inner[len("train/"):]
        return f"val/{inner}"
    return key if "/" in key else f"train/{key}"


def step_metrics(logs: Mapping[str, Any]) -> dict[str, Any]:
    """One `on_log` dict as Telescope step metrics: keys mapped, numbers and bools kept (a
    non-finite number or None sent as null, which the server counts), anything else (text,
    lists) left out."""
    out: dict[str, Any] = {}
    for key, value in logs.items():
        if not isinstance(key, str) or key == "step":
            continue
        if hasattr(value, "item") and callable(value.item):  # a 0-d tensor or numpy scalar
            try:
                value = value.item()
            except (TypeError, ValueError, RuntimeError):
                continue
        if value is None or isinstance(value, bool):
            out[telescope_key(key)] = value
        elif isinstance(value, (int, float)):
            out[telescope_key(key)] = value if math.isfinite(value) else None
    return out

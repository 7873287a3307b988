"""A synthetic GRPO-like run, ingested through the real validate → store path, so a fresh
dashboard has something to look at (`manage.py demo`): step metrics, and per environment the
samples of each step with short synthetic prompts and completions for the sample viewer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

ENVIRONMENTS = [
    {"name": "countdown", "weight": 0.5, "reward_min": 0.0, "reward_max": 2.0,
     "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0},
                        "reasoning_steps": {"min": 0, "max": 20}}},
    {"name": "hendrycks_math", "weight": 0.5, "reward_min": 0.0, "reward_max": 1.0,
     "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0}}},
]


def demo_messages(run: str, steps: int, group_size: int = 8, groups: int = 8,
                  seed: int = 0, start: float | None = None) -> Iterator[dict[str, Any]]:
    """run.start, then per step one `step` message and one `samples` message per env."""
    rng = np.random.default_rng(seed)
    t0 = time.time() - steps * 20.0 if start is None else start
    yield {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run,
           "config": {"algorithm": "grpo", "lr": 1e-6, "group_size": group_size},
           "environments": ENVIRONMENTS, "time": t0}
    for step in range(steps):
        t = t0 + 20.0 * (step + 1)
        progress = step / max(1, steps - 1)
        yield {"v": 1, "id": f"{run}-step-{step}", "type": "step", "run": run, "step": step,
               "time": t, "metrics": _step_metrics(rng, step, progress)}
        for e, env in enumerate(ENVIRONMENTS):
            yield _samples(rng, run, step, env, e, progress, group_size, groups, t)


def _step_metrics(rng: np.random.Generator, step: int, progress: float) -> dict[str, Any]:
    first = 8.0 if step == 0 else 1.0  # compilation makes the first step slow
    skipped = bool(rng.random() < 0.04)  # a non-finite gradient now and then
    return {
        "optim/update_outcome": "skipped" if skipped else "applied",
        "optim/step_skipped": skipped,
        "entropy": float(1.2 - 0.5 * progress + rng.normal(0, 0.03)),
        "kl_divergence_inference": float(abs(rng.normal(0.002, 0.0005))),
        "grad_norm": float(abs(rng.normal(0.8, 0.2)) + (3.0 if rng.random() < 0.02 else 0)),
        "learning_rate": 1e-6 * min(1.0, (step + 1) / 20),
        "loss/policy": float(rng.normal(0.0, 0.05)),
        "loss/kl": float(abs(rng.normal(0.01, 0.002))),
        "train/clip_frac": float(abs(rng.normal(0.01, 0.004))),
        "timing_step_total": float(first * (12 + rng.normal(0, 0.5))),
        "timing_step_active": float(first * (10 + rng.normal(0, 0.4))),
        "timing_forward_total": float(first * (3 + rng.normal(0, 0.1))),
        "timing_backward_total": float(first * (5 + rng.normal(0, 0.2))),
        "timing_forward_microbatch_mean": float(first * (0.4 + rng.normal(0, 0.02))),
        "timing_waiting_for_data": float(abs(rng.normal(2, 0.3))),
    }


def _samples(rng: np.random.Generator, run: str, step: int, env: dict[str, Any], e: int,
             progress: float, group_size: int, groups: int, t: float) -> dict[str, Any]:
    n = group_size * groups
    p_correct = 0.2 + 0.6 * progress if e == 0 else 0.3 + 0.4 * progress
    correct = (rng.random(n) < p_correct).astype(float)
    reward = correct * env["reward_max"]
    group_ids = np.repeat(np.arange(groups), group_size)
    means = np.bincount(group_ids, reward) / group_size
    completion = rng.integers(50, 1024, n)
    discard = ["max_async" if d else None for d in (rng.random(n) < 0.03).tolist()]
    return {
        "v": 1, "id": f"{run}-samples-{step}-{env['name']}", "type": "samples", "run": run,
        "step": step, "env": env["name"], "time": [t] * n,
        "sample_id": [f"{env['name']}-{step}-{i}" for i in range(n)],
        "group_id": [f"{env['name']}-{step}-g{g}" for g in group_ids],
        "reward": reward.tolist(),
        "advantage": (reward - means[group_ids]).tolist(),
        "prompt_tokens": rng.integers(100, 400, n).tolist(),
        "completion_tokens": completion.tolist(),
        "stop_reason": np.where(completion > 1000, "length", "stop").tolist(),
        "off_policy_steps": rng.integers(0, 3, n).tolist(),
        "discard_reason": discard,
        "metrics": {
            "correct": correct.tolist(),
            "reasoning_steps": rng.integers(0, 20, n).tolist(),
            "response_words": (completion * 0.7).round().tolist(),
        },
        **_texts(env["name"], step, group_ids, correct),
    }


def _texts(env: str, step: int, group_ids: np.ndarray, correct: np.ndarray) -> dict[str, Any]:
    """A prompt per group and a short completion per sample, right when the sample is correct.
    Derived from the step and group, not drawn: the demo's numbers stay what they were."""
    prompts, completions = [], []
    for i, (g, ok) in enumerate(zip(group_ids.tolist(), correct.tolist(), strict=True)):
        a, b, c = (step * 7 + g * 3) % 9 + 2, (step + g * 5) % 7 + 3, g % 4 + 1
        slip = i % 3 + 1  # wrong answers differ within a group
        if env == "countdown":
            prompts.append(f"Using the numbers {a}, {b} and {c}, make {a * b + c}.")
            answer = f"{a} * {b} + {c}" if ok else f"{a} + {b} * {c} - {slip}"
            completions.append(f"<think>{a} times {b} is {a * b}.</think> "
                               f"<answer>{answer}</answer>")
        else:
            prompts.append(f"What is {a} * {b} - {c}?")
            value = a * b - c if ok else a * b - c + slip
            completions.append(f"{a} * {b} = {a * b}, minus {c}: \\boxed{{{value}}}")
    return {"prompt": prompts, "completion": completions}

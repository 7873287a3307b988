"""A synthetic GRPO-like run, ingested through the real validate → store path, so a fresh
dashboard has something to look at (`manage.py demo`): step metrics, per environment the
samples of each step with short synthetic prompts and completions for the sample viewer, and
where its time went — the events and gauges of a simulated asynchronous job
(ingest.write.demo_timeline), whose trainer steps also set the steps' times."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ingest.write.demo_timeline import AsyncJob, Batch, Chunk, simulate, split_rows
from trainer_hooks.wire.schema import MAX_EVENTS_PER_MESSAGE

ENVIRONMENTS = [
    {"name": "countdown", "weight": 0.5, "reward_min": 0.0, "reward_max": 2.0,
     "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0},
                        "reasoning_steps": {"min": 0, "max": 20}}},
    {"name": "hendrycks_math", "weight": 0.5, "reward_min": 0.0, "reward_max": 1.0,
     "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0}}},
]
CHUNK_STEPS = 10  # steps of events (and gauges) per message
# Seconds a reward takes per environment: a countdown answer is evaluated, a math one parsed.
REWARD_SECONDS = [(0.01, 0.04), (0.03, 0.15)]


def demo_messages(run: str, steps: int, group_size: int = 8, groups: int = 8,
                  seed: int = 0, start: float | None = None, *, events: bool = True,
                  chunk_steps: int = CHUNK_STEPS) -> Iterator[dict[str, Any]]:
    """run.start, then per step one `step` message and one `samples` message per env, and
    after every `chunk_steps` steps (and the last) the `events` and `gauges` messages of what
    the job finished since (none with `events=False`). Times: `start` (default: the job's
    length ago, so that it ends now: the job is simulated first) plus the simulated job's."""
    found = demo_steps(run, steps, group_size, groups, seed, chunk_steps)
    if start is None:
        found = iter(done := list(found))
        t0 = time.time() - max((d.chunk.latest for d in done if d.chunk is not None),
                               default=0.0)
    else:
        t0 = start
    yield {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run,
           "config": {"algorithm": "grpo", "lr": 1e-6, "group_size": group_size},
           "environments": ENVIRONMENTS, "time": t0}
    for ds in found:
        t = t0 + ds.end
        yield {"v": 1, "id": f"{run}-step-{ds.step}", "type": "step", "run": run,
               "step": ds.step, "time": t, "metrics": ds.metrics}
        for msg in ds.samples:
            yield {**msg, "time": [t] * len(msg["reward"])}
        if events and ds.chunk is not None:
            yield from timeline_messages(run, ds.chunk, t0, f"{ds.step}")


@dataclass
class DemoStep:
    """A step of the demo: its trainer metrics, its samples messages, and at the end of a
    chunk what the simulated job finished since the last one (times in simulated seconds)."""

    step: int
    end: float  # when the trainer finished the step, simulated seconds from the loop's start
    metrics: dict[str, Any]
    samples: list[dict[str, Any]]
    chunk: Chunk | None


def demo_steps(run: str, steps: int, group_size: int = 8, groups: int = 8, seed: int = 0,
               chunk_steps: int = CHUNK_STEPS) -> Iterator[DemoStep]:
    """The demo's steps one by one, the job simulated a step ahead (step i's events are all
    known once step i+1's batch is generated); samples stamped with the step's end. The same
    values for a step however far one reads (the generators are seeded)."""
    rng = np.random.default_rng(seed)
    job = AsyncJob(seed)
    n = group_size * groups
    for step in range(steps):
        if step == 0:
            job.advance(0, demo_batch(0, group_size, groups, seed))
        if step + 1 < steps:
            job.advance(step + 1, demo_batch(step + 1, group_size, groups, seed))
        else:
            job.finish()
        end = job.step_end[step]
        progress = step / max(1, steps - 1)
        metrics = _step_metrics(rng, step, progress, job.measured[step])
        off = job.off_policy[step]
        samples = [_samples(rng, run, step, env, e, progress, group_size, groups, end, seed,
                            off[e * n:(e + 1) * n]) for e, env in enumerate(ENVIRONMENTS)]
        last = step == steps - 1
        chunk = job.take(np.inf if last else end) if last or (step + 1) % chunk_steps == 0 \
            else None
        yield DemoStep(step, end, metrics, samples, chunk)


def timeline_messages(run: str, chunk: Chunk, t0: float = 0.0,
                      tag: str = "") -> Iterator[dict[str, Any]]:
    """A chunk's `events` and `gauges` messages, at times t0 + t, split within a message's
    row limit."""
    for kind, cols in (("events", chunk.event_columns(t0)), ("gauges", chunk.gauge_columns(t0))):
        for part, piece in enumerate(split_rows(cols, MAX_EVENTS_PER_MESSAGE)):
            yield {"v": 1, "id": f"{run}-{kind}-{tag}-{part}", "type": kind, "run": run,
                   **piece}


def demo_job(steps: int, group_size: int = 8, groups: int = 8,
             seed: int = 0) -> tuple[AsyncJob, Chunk]:
    """The whole simulated job behind the demo's steps, and everything it did."""
    return simulate([demo_batch(step, group_size, groups, seed) for step in range(steps)], seed)


def demo_batch(step: int, group_size: int, groups: int, seed: int) -> Batch:
    """Step `step`'s samples over both environments, as the demo logs them."""
    n = group_size * groups
    ids: list[str] = []
    gids: list[str] = []
    tokens, discarded, seconds = [], [], []
    for e, env in enumerate(ENVIRONMENTS):
        sample_ids, group_ids = _ids(str(env["name"]), step, group_size, groups)
        ids += sample_ids
        gids += group_ids
        completion, discard, reward_seconds = _drawn(seed, step, e, n)
        tokens.append(completion)
        discarded.append(discard)
        seconds.append(reward_seconds)
    return Batch(ids, gids, np.concatenate(tokens), np.concatenate(discarded),
                 np.concatenate(seconds))


def _ids(env: str, step: int, group_size: int, groups: int) -> tuple[list[str], list[str]]:
    """The sample and group ids of an environment's samples of a step."""
    group_of = np.repeat(np.arange(groups), group_size).tolist()
    return ([f"{env}-{step}-{i}" for i in range(len(group_of))],
            [f"{env}-{step}-g{g}" for g in group_of])


def _drawn(seed: int, step: int, e: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The completion tokens, discards and reward seconds of an environment's samples of a
    step: drawn apart from the rest, so the simulated job knows them before the samples."""
    rng = np.random.default_rng([seed, step, e, 0xDE30])
    lo, hi = REWARD_SECONDS[e]
    return rng.integers(50, 1024, n), rng.random(n) < 0.03, rng.uniform(lo, hi, n)


def _step_metrics(rng: np.random.Generator, step: int, progress: float,
                  timings: dict[str, float]) -> dict[str, Any]:
    """The trainer's keys; its `timing_*` ones are what rank 0 of the simulated job measured
    (the derived, kind `timeline`, take the slower rank)."""
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
        **{k: round(v, 6) for k, v in timings.items()},
    }


def _samples(rng: np.random.Generator, run: str, step: int, env: dict[str, Any], e: int,
             progress: float, group_size: int, groups: int, t: float, seed: int,
             off_policy: np.ndarray) -> dict[str, Any]:
    n = group_size * groups
    p_correct = 0.2 + 0.6 * progress if e == 0 else 0.3 + 0.4 * progress
    correct = (rng.random(n) < p_correct).astype(float)
    reward = correct * env["reward_max"]
    group_ids = np.repeat(np.arange(groups), group_size)
    means = np.bincount(group_ids, reward) / group_size
    completion, discarded, _ = _drawn(seed, step, e, n)
    sample_ids, gids = _ids(env["name"], step, group_size, groups)
    discard = ["max_async" if d else None for d in discarded.tolist()]
    return {
        "v": 1, "id": f"{run}-samples-{step}-{env['name']}", "type": "samples", "run": run,
        "step": step, "env": env["name"], "time": [t] * n,
        "sample_id": sample_ids, "group_id": gids,
        "reward": reward.tolist(),
        "advantage": (reward - means[group_ids]).tolist(),
        "prompt_tokens": rng.integers(100, 400, n).tolist(),
        "completion_tokens": completion.tolist(),
        "stop_reason": np.where(completion > 1000, "length", "stop").tolist(),
        "off_policy_steps": off_policy.tolist(),
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

"""A real, tiny GRPO job instrumented with trainer_hooks end to end (CPU, a few seconds).

Task "digit_sum": the prompt is two digits a, b below 5; the policy writes the digit a + b and
then EOS (it may write up to 3 tokens, so it also has to learn to stop). The policy is a small
MLP over summed embeddings of the prompt, the position and the previous token. Each step
samples G completions per prompt from a bfloat16 "inference engine" copy (so the rollout
logprobs differ from the trainer's, as vLLM's do), scores them with
`DigitSumEnv.compute_reward` (captured by a `RewardRecorder`, with each sample's prompt and
completion as text for the dashboard's sample viewer), computes GRPO group advantages,
and takes one optimizer step over gradient-accumulation chunks with a clipped policy-gradient
loss. Step metrics go through a `StepWindow` reduced with `reduce_window`; timings come from a
`Timeline`; everything is sent with `connect(...)`.

    .venv/bin/python examples/grpo_tiny.py --url ws://127.0.0.1:8000 --token <token> \
        --run grpo-tiny --steps 200 [--world 2]

Without `--url` it trains and prints without sending. With `--world N` it runs N data-parallel
ranks (gloo): every rank reduces, rank 0 alone logs step metrics and owns the run, and every
rank sends its own samples through its own client to the same run (the reward-worker pattern).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from trainer_hooks import MetricSpec, Reduce, RewardResult, StepWindow, connect  # noqa: E402
from trainer_hooks.metrics.adapter import GRPO_REWARD_SPECS  # noqa: E402
from trainer_hooks.metrics.formulas import (  # noqa: E402
    group_advantages,
    group_report,
    kl_divergence_inference,
    token_entropy,
)
from trainer_hooks.metrics.reduce import reduce_window  # noqa: E402
from trainer_hooks.metrics.timing import Timeline  # noqa: E402
from trainer_hooks.rewards import RewardRecorder  # noqa: E402

EOS, BOS, VOCAB, MAX_LEN = 10, 11, 11, 3  # tokens 0-9 are digits; BOS is only ever an input
OPERANDS = 5  # a, b in 0..4

SPECS = [
    MetricSpec("entropy", Reduce.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("kl_divergence_inference", Reduce.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("loss", Reduce.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("num_tokens", Reduce.SUM, integer=True),
    MetricSpec("grad_norm", Reduce.LAST),  # before clipping
    MetricSpec("learning_rate", Reduce.LAST),  # the rate the step applied
    *(s for s in GRPO_REWARD_SPECS if s.name.endswith("group_count")),  # group_report's keys
]


@dataclass
class Sample:
    sample_id: str
    group_id: str
    step: int
    a: int
    b: int


class DigitSumEnv:
    """The environment: the answer is the digit a + b, then EOS (a, b < 5, so a + b ≤ 8).

    reward = 0.8·correct + 0.2·well-formed, in [0, 1]. `closeness` (1 − |answer − target| / 9)
    is logged but not rewarded: a sample metric is anything worth watching."""

    name = "digit_sum"
    reward_min, reward_max = 0.0, 1.0
    metrics_ranges = {
        "correct": {"min": 0.0, "max": 1.0},
        "closeness": {"min": 0.0, "max": 1.0},
        "length": {"min": 1.0, "max": float(MAX_LEN)},
    }

    def compute_reward(self, completion: list[int], sample: Sample) -> RewardResult:
        length = completion.index(EOS) + 1 if EOS in completion else len(completion)
        formed = length == 2  # one digit, then EOS
        target = sample.a + sample.b
        closeness = max(0.0, 1.0 - abs(completion[0] - target) / 9) if formed else 0.0
        correct = float(formed and completion[0] == target)
        return RewardResult(
            total_reward=0.8 * correct + 0.2 * float(formed),
            sample_metrics={"correct": correct, "closeness": closeness,
                            "length": float(length)})


class TinyPolicy(nn.Module):
    """Next-token logits from (prompt, position, previous token)."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.prompt = nn.Embedding(OPERANDS * OPERANDS, hidden)
        self.pos, self.prev = nn.Embedding(MAX_LEN, hidden), nn.Embedding(VOCAB + 1, hidden)
        self.mlp = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, VOCAB))

    def forward(self, prompts: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        t = torch.arange(inputs.shape[1])
        prompt = prompts[:, :1] * OPERANDS + prompts[:, 1:]
        h = self.prompt(prompt) + self.pos(t)[None] + self.prev(inputs)
        return self.mlp(h)  # [B, T, VOCAB]


@dataclass
class Rollouts:
    prompts: torch.Tensor  # [B, 2]
    inputs: torch.Tensor  # [B, T]: BOS then the completion shifted right
    tokens: torch.Tensor  # [B, T]
    logprobs: torch.Tensor  # [B, T] under the inference engine
    mask: torch.Tensor  # [B, T]: completion tokens up to and including EOS


@torch.no_grad()
def generate(engine: TinyPolicy, prompts: torch.Tensor, gen: torch.Generator) -> Rollouts:
    """Sample one completion per prompt row with the (bfloat16) inference engine."""
    n = prompts.shape[0]
    inputs = torch.full((n, 1), BOS)
    tokens, logps = [], []
    for _ in range(MAX_LEN):
        logits = engine(prompts, inputs)[:, -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        tok = torch.multinomial(logp.exp(), 1, generator=gen)
        tokens.append(tok)
        logps.append(logp.gather(1, tok))
        inputs = torch.cat([inputs, tok], dim=1)
    toks = torch.cat(tokens, dim=1)
    ended_before = torch.cumsum((toks == EOS).int(), dim=1) - (toks == EOS).int()
    return Rollouts(prompts, inputs[:, :-1], toks, torch.cat(logps, dim=1), ended_before == 0)


def detokenize(tokens: list[int], mask: list[bool]) -> str:
    """A completion as text: its digits, `<eos>` where it stopped."""
    return " ".join("<eos>" if t == EOS else str(t) for t, m in zip(tokens, mask, strict=True)
                    if m)


def make_samples(step: int, rank: int, prompts: int, group: int,
                 gen: torch.Generator) -> tuple[list[Sample], torch.Tensor]:
    ab = torch.randint(0, OPERANDS, (prompts, 2), generator=gen)
    samples = [Sample(f"s{step}-{rank}-{p}-{g}", f"g{step}-{rank}-{p}", step,
                      int(ab[p, 0]), int(ab[p, 1])) for p in range(prompts) for g in range(group)]
    return samples, ab.repeat_interleave(group, dim=0)


def train_chunk(policy: TinyPolicy, ro: Rollouts, adv: torch.Tensor, rows: slice,
                total_tokens: int, timeline: Timeline, clip: float) -> dict[str, Any]:
    """Forward/backward of one gradient-accumulation chunk; returns its window values."""
    with timeline.region("forward"):
        logits = policy(ro.prompts[rows], ro.inputs[rows])
        logp = torch.log_softmax(logits, -1).gather(2, ro.tokens[rows, :, None])[..., 0]
    mask = ro.mask[rows]
    with timeline.region("compute_entropy"):
        entropy = token_entropy(logits.detach(), mask)
    with timeline.region("compute_kl"):
        kl = kl_divergence_inference(logp.detach(), ro.logprobs[rows], mask)
    with timeline.region("loss_computation"):
        ratio = torch.exp(logp - ro.logprobs[rows])
        a = adv[rows, None]
        per_token = -torch.minimum(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
        per_token = torch.where(mask, per_token, torch.zeros(()))
        loss = per_token.sum() / total_tokens  # every token of the step weighs the same
    with timeline.region("backward"):
        loss.backward()
    tokens = int(mask.sum())
    return {"entropy": entropy.value, "kl_divergence_inference": kl.value,
            "loss": float(per_token.detach().sum()) / max(tokens, 1), "num_tokens": tokens}


class Job:
    """One rank's training state."""

    def __init__(self, args: argparse.Namespace, rank: int, world: int) -> None:
        self.args, self.rank, self.world = args, rank, world
        torch.manual_seed(args.seed)  # identical initial weights on every rank
        self.policy = TinyPolicy()
        self.engine = TinyPolicy().to(torch.bfloat16)
        self.engine.load_state_dict(self.policy.state_dict())
        self.opt = torch.optim.AdamW(self.policy.parameters(), lr=args.lr, weight_decay=0.0)
        warmup = max(1, args.steps // 10)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warmup))
        self.gen = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)
        self.env = DigitSumEnv()
        self.window = StepWindow(SPECS)
        self.timeline = Timeline()
        self.client = open_client(args, rank)
        self.recorder = (self.client.reward_recorder(env=self.env.name) if self.client
                         else RewardRecorder(None, self.env.name))
        self.compute_reward = self.recorder.capture(self.env.compute_reward)

    def rollout(self, step: int) -> tuple[list[Sample], Rollouts, list[RewardResult]]:
        """Generate and score one step's groups; the recorder captures every reward."""
        a = self.args
        samples, prompts = make_samples(step, self.rank, a.prompts, a.group, self.gen)
        ro = generate(self.engine, prompts, self.gen)
        self.recorder.set_step(step)
        results = [self.compute_reward(ro.tokens[i].tolist(), s) for i, s in enumerate(samples)]
        return samples, ro, results

    def step(self, step: int) -> tuple[dict[str, Any] | None, dict[str, float]]:
        """One optimizer step: the reduced step metrics and timings (rank 0; None elsewhere)
        and this rank's reward figures for the console."""
        tl, a = self.timeline, self.args
        tl.start_step()
        with tl.region("waiting_for_data"):
            samples, ro, results = self.rollout(step)
        with tl.region("prepare_tensors"):
            rewards = torch.tensor([r.total_reward for r in results], dtype=torch.float64)
            gids = torch.arange(len(samples)) // a.group  # samples come grouped by prompt
            adv = group_advantages(rewards, gids).float()
            self.annotate(samples, ro, adv)
            self.window.add_many(group_report(rewards, gids).metrics("train/"))
            total_tokens = self.global_tokens(int(ro.mask.sum()))
        self.opt.zero_grad(set_to_none=True)
        rows_per_chunk = -(-len(samples) // a.chunks)
        for c in range(a.chunks):
            with tl.microbatch():
                rows = slice(c * rows_per_chunk, (c + 1) * rows_per_chunk)
                self.window.add_many(train_chunk(self.policy, ro, adv, rows, total_tokens,
                                                 tl, a.clip))
                self.window.end_chunk()
        self.optimizer_step()
        reduced = reduce_window(self.window, group=None, dst=0)
        self.window.clear()
        timing = tl.step_metrics()
        local = {"reward_mean": float(rewards.mean()),
                 "correct": sum(r.sample_metrics["correct"] for r in results) / len(results)}
        return (None if reduced is None else {**reduced, **timing}), local

    def annotate(self, samples: list[Sample], ro: Rollouts, adv: torch.Tensor) -> None:
        ended = ro.mask & (ro.tokens == EOS)
        self.recorder.annotate(
            [s.sample_id for s in samples], advantage=adv.tolist(), prompt_tokens=2,
            completion_tokens=ro.mask.sum(1).tolist(), off_policy_steps=0,
            stop_reason=["eos" if e else "length" for e in ended.any(1).tolist()],
            prompt=[f"{s.a} + {s.b} =" for s in samples],
            completion=[detokenize(t, m) for t, m in zip(ro.tokens.tolist(),
                                                         ro.mask.tolist(), strict=True)])
        self.recorder.flush()

    def global_tokens(self, local: int) -> int:
        """Σ completion tokens over ranks: the loss's normalizer (not a mean of rank means)."""
        if self.world == 1:
            return local
        t = torch.tensor([local], dtype=torch.int64)
        dist.all_reduce(t)
        return int(t)

    def optimizer_step(self) -> None:
        params = list(self.policy.parameters())
        if self.world > 1:  # each rank's loss is already over the global token count: sum
            for p in params:
                dist.all_reduce(p.grad)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.args.max_grad_norm)
        self.window.add_many({"grad_norm": float(grad_norm),
                              "learning_rate": self.opt.param_groups[0]["lr"]})
        self.window.end_chunk()
        self.opt.step()
        self.sched.step()
        with self.timeline.region("weight_sync_trainer"):
            self.engine.load_state_dict(self.policy.state_dict())


def open_client(args: argparse.Namespace, rank: int) -> Any:
    """Rank 0 starts the run (config, ranges, steps); other ranks join it and send only
    samples."""
    if not args.url:
        return None
    extra = {"spool_dir": args.spool_dir} if args.spool_dir else {}
    if rank == 0:
        config = {k: v for k, v in vars(args).items() if k not in ("token", "url")}
        return connect(args.url, args.token, args.run, config=config,
                       environments=[DigitSumEnv], **extra)
    return connect(args.url, args.token, args.run, spool_name=f"rank-{rank}", join=True,
                   **extra)


def run_rank(rank: int, args: argparse.Namespace, port: int = 0) -> bool:
    """Train on one rank; True when every message was acknowledged (or nothing was sent)."""
    world = args.world
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    torch.set_num_threads(1)  # tiny tensors: threads cost more than they save
    job = Job(args, rank, world)
    curve: list[dict[str, float]] = []
    try:
        for step in range(1, args.steps + 1):
            metrics, local = job.step(step)
            curve.append(local)
            if metrics is not None:  # rank 0
                if job.client is not None:
                    job.client.log_step(step, metrics)
                print(summary(step, {**local, **metrics}), flush=True)
        ok = job.client.close(timeout=30, status="finished" if rank == 0 else None) \
            if job.client else True
    finally:
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        print(learning_curve(curve), flush=True)
    return ok


def summary(step: int, m: dict[str, Any]) -> str:
    keys = ("reward_mean", "correct", "entropy", "kl_divergence_inference", "loss",
            "grad_norm", "learning_rate", "num_tokens", "timing_step_total")
    return f"step={step} " + " ".join(f"{k}={m[k]:.6g}" for k in keys if k in m)


def learning_curve(curve: list[dict[str, float]], n: int = 5) -> str:
    """Rank 0's reward and exact-answer rate, first `n` steps against the last `n`."""
    def mean(rows: list[dict[str, float]], key: str) -> float:
        return sum(r[key] for r in rows) / max(len(rows), 1)

    first, last = curve[:n], curve[-n:]
    return " ".join(f"{k}: first {len(first)} steps {mean(first, k):.3f} -> last {len(last)} "
                    f"steps {mean(last, k):.3f};" for k in ("reward_mean", "correct"))


def _spawned(rank: int, args: argparse.Namespace, port: int) -> None:
    if not run_rank(rank, args, port):
        raise SystemExit(f"rank {rank}: not everything was acknowledged")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="the dashboard, e.g. ws://127.0.0.1:8000 (omit: no sending)")
    p.add_argument("--token", default=os.environ.get("TELESCOPE_TOKEN", ""))
    p.add_argument("--run", default=time.strftime("grpo-tiny-%Y%m%d-%H%M%S"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--world", type=int, default=1, help="data-parallel ranks (gloo)")
    p.add_argument("--prompts", type=int, default=32, help="prompts per rank per step")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (G)")
    p.add_argument("--chunks", type=int, default=4, help="gradient-accumulation chunks")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spool-dir", help="the sender's outbox directory (default ~/.cache)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.url and not args.token:
        raise SystemExit("--token (or TELESCOPE_TOKEN) is required with --url")
    started = time.perf_counter()
    if args.world == 1:
        ok = run_rank(0, args)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        torch.multiprocessing.spawn(_spawned, args=(args, port), nprocs=args.world)
        ok = True
    print(json.dumps({"run": args.run, "seconds": round(time.perf_counter() - started, 2),
                      "acknowledged": ok}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Per-chunk metric formulas in the form a `StepWindow` needs: numerator and weight, or counts.

Each helper takes torch tensors (importing torch only when called), computes per-token terms
in at least float32, and accumulates masked sums in float64. Masked-out positions are removed
with `torch.where`, never multiplied by 0, so garbage (NaN) under the mask cannot leak in.
A `Weighted` result is Σ numerator and Σ weight; add `.value` with weight `.weight` to a
WEIGHTED_MEAN metric, and the window reproduces the pooled mean exactly across chunks and ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GAP_THRESHOLD = 0.5  # nats; the reference's `logprob_gap_gt0p5_frac`


@dataclass(frozen=True)
class Weighted:
    """A masked mean split for pooling: `total` = Σ terms, `weight` = Σ mask."""

    total: float
    weight: float

    @property
    def value(self) -> float | None:
        """The mean, or None with zero weight (a mean over nothing is not 0)."""
        return self.total / self.weight if self.weight > 0 else None

    def items(self, name: str, weight_name: str | None = None) -> dict[str, float | int]:
        """`{name: value, weight_name: weight}` for `add_many`; the value is left out with
        zero weight, and the weight is an int when it is integral (token counts)."""
        out: dict[str, float | int] = {}
        if self.value is not None:
            out[name] = self.value
        if weight_name is not None:
            out[weight_name] = int(self.weight) if float(self.weight).is_integer() else self.weight
        return out


def _prepare(values: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(float64 values, bool mask) of one shape; None selects every position."""
    import torch

    if mask is None:
        mask = torch.ones(values.shape, dtype=torch.bool, device=values.device)
    elif mask.shape != values.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != values shape {tuple(values.shape)}")
    return values.to(torch.float64), mask.to(torch.bool)


def _masked(values: torch.Tensor, mask: torch.Tensor) -> Weighted:
    import torch

    total = torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device))
    return Weighted(float(total.sum()), int(mask.sum()))


def _compute_dtype(tensor: torch.Tensor) -> Any:
    import torch

    # bf16/fp16 per-token math loses the digits the metric is meant to show.
    return torch.float32 if tensor.dtype in (torch.float16, torch.bfloat16) else tensor.dtype


# ---------------------------------------------------------------- entropy and KL


def token_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> Weighted:
    """Mean token entropy −Σ p log p of softmax(`logits`) ([..., V]) over `mask` ([...]).

    A uniform distribution over V gives log V; −inf logits (banned tokens) contribute 0.
    """
    import torch

    logp = torch.log_softmax(logits.to(_compute_dtype(logits)), dim=-1)
    entropy = -torch.special.xlogy(logp.exp(), logp.exp()).sum(dim=-1)
    values, keep = _prepare(entropy, mask)
    return _masked(values, keep)


@dataclass(frozen=True)
class KLStats:
    """K3 token mean (`mean`) and largest per-token value (`max`, None without tokens)."""

    mean: Weighted
    max: float | None


def kl_k3(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor | None = None
) -> KLStats:
    """K3 estimate of KL(π‖π_ref) on tokens sampled from π: exp(z) − z − 1 with
    z = log π_ref − log π. Non-negative per token; exactly 0 for identical distributions."""
    import torch

    z, keep = _prepare(ref_logprobs.to(torch.float64) - logprobs.to(torch.float64), mask)
    k3 = torch.expm1(z) - z  # expm1 keeps precision where z ≈ 0
    stats = _masked(k3, keep)
    if stats.weight == 0:
        return KLStats(stats, None)
    return KLStats(stats, float(k3[keep].max()))


def kl_k1(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor | None = None
) -> Weighted:
    """K1 estimate of KL(π‖π_ref) on tokens sampled from π: mean of log π − log π_ref.
    Unbiased but signed per token (a chunk's mean can be negative)."""
    import torch

    diff = logprobs.to(torch.float64) - ref_logprobs.to(torch.float64)
    return _masked(*_prepare(diff, mask))


def kl_divergence_inference(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    mask: torch.Tensor | None = None,
    estimator: str = "k3",
) -> Weighted:
    """Telescope's `kl_divergence_inference`: KL(π_rollout‖π_θ) on the sampled completion
    tokens, which the rollout policy drew. Tokens without a finite rollout logprob are left
    out of both sums. `estimator` is "k3" (default, non-negative) or "k1"."""
    import torch

    keep = torch.isfinite(rollout_logprobs)
    keep = keep if mask is None else keep & mask.to(torch.bool)
    safe = torch.where(keep, rollout_logprobs, torch.zeros_like(rollout_logprobs))
    if estimator == "k3":
        return kl_k3(safe, logprobs, keep).mean
    if estimator == "k1":
        return kl_k1(safe, logprobs, keep)
    raise ValueError(f"estimator must be 'k3' or 'k1', not {estimator!r}")


# ---------------------------------------------------------------- train/infer consistency


@dataclass(frozen=True)
class GapStats:
    """|log π_train − log π_rollout| over compared tokens: mean, fraction above 0.5 nats,
    the chunk's p99 (None without tokens) and the token count."""

    mean_abs: Weighted
    gt_frac: Weighted
    p99: float | None
    count: int

    def metrics(self, prefix: str = "train/") -> dict[str, float | int]:
        """The reference's `logprob_gap_*` keys for one chunk (values omitted at count 0)."""
        out: dict[str, float | int] = {f"{prefix}logprob_gap_token_count": self.count}
        if self.count:
            out[f"{prefix}logprob_gap_mean"] = float(self.mean_abs.value or 0.0)
            out[f"{prefix}logprob_gap_gt0p5_frac"] = float(self.gt_frac.value or 0.0)
            out[f"{prefix}mean_rank_logprob_gap_p99"] = float(self.p99 or 0.0)
        return out


def logprob_gap(
    logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor | None = None
) -> GapStats:
    """Gap statistics over masked tokens that carry a finite rollout logprob."""
    import torch

    keep = torch.isfinite(rollout_logprobs)
    keep = keep if mask is None else keep & mask.to(torch.bool)
    gap = (logprobs.to(torch.float64) - rollout_logprobs.to(torch.float64)).abs()
    gap = torch.where(keep, gap, torch.zeros_like(gap))
    mean_abs = _masked(gap, keep)
    above = _masked((gap > GAP_THRESHOLD).to(torch.float64), keep)
    count = int(mean_abs.weight)
    p99 = _quantile(gap[keep], 0.99) if count else None
    return GapStats(mean_abs, above, p99, count)


def _quantile(values: torch.Tensor, q: float) -> float:
    # Linear interpolation between order statistics, like numpy's default; sorting avoids
    # torch.quantile's input-size limit on long chunks.
    ordered = values.sort().values
    pos = q * (ordered.numel() - 1)
    low = math.floor(pos)
    high = min(low + 1, ordered.numel() - 1)
    frac = pos - low
    return float(ordered[low] * (1 - frac) + ordered[high] * frac)


# ---------------------------------------------------------------- policy-ratio clipping


@dataclass(frozen=True)
class ClipStats:
    """Token fraction where the PPO clip bound the update, and mean |ratio − 1|."""

    clip_frac: Weighted
    ratio_absdev: Weighted


def clip_stats(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    advantages: torch.Tensor | None = None,
) -> ClipStats:
    """ratio = exp(log π − log π_old). With `advantages`, a token counts as clipped when the
    clip bound the surrogate (A > 0 and ratio > 1 + eps_high, or A < 0 and ratio < 1 −
    eps_low); without, whenever the ratio leaves [1 − eps_low, 1 + eps_high]."""
    import torch

    high = eps_low if eps_high is None else eps_high
    ratio = torch.exp(logprobs.to(torch.float64) - old_logprobs.to(torch.float64))
    above, below = ratio > 1.0 + high, ratio < 1.0 - eps_low
    if advantages is not None:
        adv = advantages.to(torch.float64).expand_as(ratio)
        above, below = above & (adv > 0), below & (adv < 0)
    ratio, keep = _prepare(ratio, mask)
    clipped = _masked((above | below).to(torch.float64), keep)
    return ClipStats(clipped, _masked((ratio - 1.0).abs(), keep))


# ---------------------------------------------------------------- GRPO groups


def _group_index(rewards: torch.Tensor, group_ids: Any) -> tuple[torch.Tensor, int]:
    import torch

    ids = torch.as_tensor(group_ids, device=rewards.device)
    if ids.shape != rewards.shape:
        raise ValueError(f"group_ids shape {tuple(ids.shape)} != rewards {tuple(rewards.shape)}")
    _, index = torch.unique(ids, return_inverse=True)
    return index, int(index.max()) + 1 if index.numel() else 0


def group_advantages(
    rewards: Any, group_ids: Any, *, scale: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO advantages in float64: reward − group mean, divided by (group std + eps) when
    `scale` (population std). A group whose rewards tie gets exactly 0 for every member."""
    import torch

    r = torch.as_tensor(rewards, dtype=torch.float64)
    index, groups = _group_index(r, group_ids)
    counts = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, torch.ones_like(r))
    means = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, r) / counts
    centered = r - means[index]
    if not scale:
        return centered
    var = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, centered**2) / counts
    return centered / (var.sqrt()[index] + eps)


@dataclass(frozen=True)
class GroupReport:
    """Per-step group counts: informative groups (rewards not all equal) carry the signal."""

    group_count: int
    informative: int
    tied: int
    all_min: int
    all_max: int

    def metrics(self, prefix: str = "train/") -> dict[str, int]:
        """The reference's `grpo_*_group_count` keys (all_zero/all_one = all at the bounds)."""
        return {
            f"{prefix}grpo_group_count": self.group_count,
            f"{prefix}grpo_informative_group_count": self.informative,
            f"{prefix}grpo_tied_group_count": self.tied,
            f"{prefix}grpo_all_zero_group_count": self.all_min,
            f"{prefix}grpo_all_one_group_count": self.all_max,
        }


def group_report(
    rewards: Any, group_ids: Any, *, reward_min: float = 0.0, reward_max: float = 1.0
) -> GroupReport:
    """Count groups: informative (not all equal), tied, and tied at `reward_min`/`reward_max`."""
    import torch

    r = torch.as_tensor(rewards, dtype=torch.float64)
    index, groups = _group_index(r, group_ids)
    low = torch.full((groups,), math.inf, dtype=torch.float64).scatter_reduce(0, index, r, "amin")
    high = torch.full((groups,), -math.inf, dtype=torch.float64).scatter_reduce(0, index, r, "amax")
    tied = low == high
    return GroupReport(
        group_count=groups,
        informative=int((~tied).sum()),
        tied=int(tied.sum()),
        all_min=int((tied & (low == reward_min)).sum()),
        all_max=int((tied & (high == reward_max)).sum()),
    )

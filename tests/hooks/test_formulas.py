"""Formula helpers against hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from trainer_hooks.metrics.formulas import (
    Weighted,
    clip_stats,
    group_advantages,
    group_report,
    kl_divergence_inference,
    kl_k1,
    kl_k3,
    logprob_gap,
    token_entropy,
)
from trainer_hooks.metrics.reduce import reduce_window
from trainer_hooks.metrics.specs import MetricSpec, Reduce
from trainer_hooks.metrics.window import StepWindow


def test_uniform_distribution_has_entropy_log_v() -> None:
    for vocab in (2, 7, 50_257):
        result = token_entropy(torch.zeros(2, 3, vocab, dtype=torch.float64))
        assert result.weight == 6
        assert result.value == pytest.approx(math.log(vocab), rel=1e-12)


def test_entropy_of_a_one_hot_and_a_half_half_distribution() -> None:
    logits = torch.tensor([[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf]])
    got = token_entropy(logits)
    assert got.total == pytest.approx(math.log(2))  # 0 for the one-hot token, log 2 for the other
    assert got.weight == 2


def test_entropy_respects_the_mask_even_over_nan() -> None:
    logits = torch.zeros(1, 3, 4)
    logits[0, 2] = math.nan  # padding garbage under the mask must not leak in
    mask = torch.tensor([[True, True, False]])
    got = token_entropy(logits, mask)
    assert (got.weight, got.value) == (2, pytest.approx(math.log(4)))


def test_entropy_upcasts_bfloat16() -> None:
    logits = torch.randn(4, 8, 32).to(torch.bfloat16)
    exact = token_entropy(logits.to(torch.float64))
    assert token_entropy(logits).value == pytest.approx(exact.value, rel=1e-6)


def test_kl_of_identical_distributions_is_zero() -> None:
    logp = torch.log_softmax(torch.randn(3, 5, dtype=torch.float64), dim=-1)
    stats = kl_k3(logp, logp)
    assert stats.mean.value == 0.0 and stats.max == 0.0
    assert kl_k1(logp, logp).value == 0.0
    assert kl_divergence_inference(logp, logp).value == 0.0


def test_k3_is_non_negative_and_matches_the_formula() -> None:
    torch.manual_seed(0)
    logp, ref = -torch.rand(200, dtype=torch.float64) * 5, -torch.rand(200, dtype=torch.float64) * 5
    z = ref - logp
    per_token = torch.exp(z) - z - 1
    assert bool((per_token >= 0).all())
    stats = kl_k3(logp, ref)
    assert stats.mean.value == pytest.approx(float(per_token.mean()), rel=1e-12)
    assert stats.max == pytest.approx(float(per_token.max()), rel=1e-12)
    assert stats.mean.value > 0


def test_k1_hand_case_and_mask() -> None:
    logp = torch.tensor([-1.0, -2.0, -3.0])
    ref = torch.tensor([-1.5, -1.0, -100.0])
    got = kl_k1(logp, ref, torch.tensor([True, True, False]))
    assert (got.total, got.weight) == (pytest.approx(0.5 - 1.0), 2)


def test_inference_kl_skips_tokens_without_a_rollout_logprob() -> None:
    train = torch.tensor([-1.0, -2.0, -0.5])
    rollout = torch.tensor([-1.0, math.nan, -0.5 + math.log(2)])
    # Token 0 agrees; token 1 has no record; token 2: z = log π − log q = −log 2.
    z = -math.log(2)
    got = kl_divergence_inference(train, rollout)
    assert got.weight == 2
    assert got.total == pytest.approx(math.exp(z) - z - 1)
    assert kl_divergence_inference(train, rollout, estimator="k1").total == pytest.approx(
        math.log(2)
    )
    with pytest.raises(ValueError, match="estimator"):
        kl_divergence_inference(train, rollout, estimator="k2")


def test_logprob_gap_stats() -> None:
    train = torch.tensor([-1.0, -1.0, -1.0, -1.0, -1.0])
    rollout = torch.tensor([-1.1, -1.0, -2.0, -math.inf, -0.3])  # gaps .1, 0, 1, —, .7
    stats = logprob_gap(train, rollout)
    assert stats.count == 4
    assert stats.mean_abs.value == pytest.approx((0.1 + 0.0 + 1.0 + 0.7) / 4)
    assert stats.gt_frac.value == pytest.approx(0.5)
    assert stats.p99 == pytest.approx(
        float(torch.quantile(torch.tensor([0.1, 0.0, 1.0, 0.7], dtype=torch.float64), 0.99))
    )
    keys = stats.metrics()
    assert keys["train/logprob_gap_token_count"] == 4
    empty = logprob_gap(train, torch.full((5,), math.nan))
    assert empty.metrics() == {"train/logprob_gap_token_count": 0} and empty.p99 is None


def test_clip_fraction_and_ratio_deviation_hand_case() -> None:
    ratios = torch.tensor([1.0, 1.3, 0.7, 1.1], dtype=torch.float64)
    logp, old = ratios.log(), torch.zeros(4, dtype=torch.float64)
    plain = clip_stats(logp, old, eps_low=0.2)
    assert plain.clip_frac.value == pytest.approx(0.5)  # 1.3 and 0.7 leave [0.8, 1.2]
    assert plain.ratio_absdev.value == pytest.approx((0 + 0.3 + 0.3 + 0.1) / 4)
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0])
    # Only 1.3 with A > 0 is bound; 0.7 with A > 0 takes the unclipped branch.
    assert clip_stats(logp, old, advantages=adv).clip_frac.value == pytest.approx(0.25)
    asym = clip_stats(logp, old, eps_low=0.2, eps_high=0.28)
    assert asym.clip_frac.total == 2.0  # 1.3 > 1.28, 0.7 < 0.8
    masked = clip_stats(logp, old, torch.tensor([True, False, False, True]))
    assert (masked.clip_frac.total, masked.clip_frac.weight) == (0.0, 2)


def test_a_policy_that_has_not_moved_never_clips() -> None:
    logp = -torch.rand(64, dtype=torch.float64)
    stats = clip_stats(logp, logp.clone())
    assert stats.clip_frac.value == 0.0 and stats.ratio_absdev.value == 0.0


def test_group_advantages() -> None:
    rewards = [1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 2.0]
    groups = [7, 7, 3, 3, 9, 9, 4]
    centered = group_advantages(rewards, groups, scale=False)
    assert centered.tolist() == [0.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    scaled = group_advantages(rewards, groups, eps=0.0 + 1e-6)
    assert scaled[0].item() == pytest.approx(0.5 / (0.5 + 1e-6))
    assert scaled[1].item() == pytest.approx(-0.5 / (0.5 + 1e-6))
    assert scaled[2:].tolist() == [0.0] * 5  # tied groups: exactly zero


def test_group_report_counts() -> None:
    rewards = [1, 0, 1, 1, 0, 0, 0.5, 0.5, 2]
    groups = [0, 0, 1, 1, 2, 2, 3, 3, 4]
    report = group_report(rewards, groups)
    assert (report.group_count, report.informative, report.tied) == (5, 1, 4)
    assert (report.all_min, report.all_max) == (1, 1)
    assert report.metrics()["train/grpo_informative_group_count"] == 1
    assert group_report(rewards, groups, reward_max=2.0).all_max == 1


def test_weighted_results_pool_exactly_through_a_window() -> None:
    specs = [
        MetricSpec("e", Reduce.WEIGHTED_MEAN, weight_key="n"),
        MetricSpec("n", Reduce.SUM, integer=True),
    ]
    window = StepWindow(specs)
    small = torch.zeros(1, 2, 4, dtype=torch.float64)
    large = torch.zeros(3, 10, 16, dtype=torch.float64)
    for logits in (small, large):
        window.add_many(token_entropy(logits).items("e", "n"))
        window.end_chunk()
    pooled = (2 * math.log(4) + 30 * math.log(16)) / 32
    assert reduce_window(window) == {"e": pytest.approx(pooled, rel=1e-12), "n": 32}
    assert Weighted(0.0, 0).items("e", "n") == {"n": 0}  # no value at zero weight

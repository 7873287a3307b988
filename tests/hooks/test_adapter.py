"""MetricAdapter naming and reductions, and the ready-made declarations."""

from __future__ import annotations

import pytest

from trainer_hooks.metrics.adapter import (
    GRPO_ADAPTER,
    GRPO_REWARD_SPECS,
    OPTIMIZER_OUTCOME_SPECS,
    SHARED_TRAINER_SPECS,
    TELESCOPE_STEP_SPECS,
    MetricAdapter,
    grpo_specs,
)
from trainer_hooks.metrics.reduce import reduce_window
from trainer_hooks.metrics.specs import MetricSpec, Reduce, spec_set
from trainer_hooks.metrics.window import StepWindow

R = Reduce


def toy() -> MetricAdapter:
    return MetricAdapter(
        internal_prefix="dpo_",
        names={"loss": "loss_avg", "acc": "accuracy", "n": "pair_count", "mx": "margin_max"},
        phases=frozenset({"train", "val"}),
        weighted_by={"acc": "n"},
        max_reduced=frozenset({"mx"}),
        integer=frozenset({"n"}),
        ignored=frozenset({"debug_blob"}),
    )


def test_specs_follow_the_declarations_per_phase() -> None:
    specs = {s.name: s for s in toy().specs()}
    assert specs["train/loss_avg"] == MetricSpec("train/loss_avg", R.MEAN)
    assert specs["val/accuracy"] == MetricSpec(
        "val/accuracy", R.WEIGHTED_MEAN, weight_key="val/pair_count"
    )
    assert specs["train/pair_count"] == MetricSpec("train/pair_count", R.SUM, integer=True)
    assert specs["val/margin_max"].reduce is R.MAX
    assert len(specs) == 8


def test_map_strips_the_prefix_renames_and_drops_ignored_keys() -> None:
    raw = {"dpo_loss": 0.5, "dpo_acc": 0.75, "n": 4, "dpo_debug_blob": 1.0}
    assert toy().map(raw, phase="val") == {
        "val/loss_avg": 0.5,
        "val/accuracy": 0.75,
        "val/pair_count": 4,
    }


def test_an_undeclared_raw_key_is_an_error() -> None:
    with pytest.raises(ValueError, match="neither names nor ignores"):
        toy().map({"dpo_surprise": 1.0})
    with pytest.raises(ValueError, match="phase 'val'"):
        GRPO_ADAPTER.map({"grpo_loss": 1.0}, phase="val")


def test_adapter_output_reduces_to_true_global_figures() -> None:
    adapter = toy()
    window = StepWindow(adapter.specs("train"))
    window.add_many(adapter.map({"dpo_acc": 1.0, "dpo_n": 1, "dpo_mx": 2.0, "dpo_loss": 1.0}))
    window.end_chunk()
    window.add_many(adapter.map({"dpo_acc": 0.5, "dpo_n": 3, "dpo_mx": 1.0, "dpo_loss": 3.0}))
    assert reduce_window(window) == {
        "train/accuracy": (1.0 * 1 + 0.5 * 3) / 4,
        "train/loss_avg": 2.0,
        "train/margin_max": 2.0,
        "train/pair_count": 4,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"names": {"a": "x/y"}}, "may not be empty or contain '/'"),
        ({"names": {"a": "x", "b": "x"}}, "same public leaf"),
        ({"names": {"a": "x"}, "weighted_by": {"a": "w"}}, "undeclared"),
        ({"names": {"a": "x"}, "phases": frozenset({"test"})}, "phases"),
        ({"names": {"a": "x", "w": "w"}, "weighted_by": {"a": "w"}, "max_reduced": {"a"}}, "two"),
        ({"names": {"a": "x", "w": "w"}, "weighted_by": {"a": "w"}, "last": {"w"}}, "summed"),
        ({"names": {"a": "x"}, "ignored": {"a"}}, "both published and ignored"),
        ({"names": {"a": "x"}, "integer": {"a"}}, "integer"),
    ],
)
def test_inconsistent_adapters_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetricAdapter(internal_prefix="p_", **kwargs)


def test_grpo_declarations_follow_the_reference_tables() -> None:
    specs = {s.name: s for s in GRPO_ADAPTER.specs()}
    assert specs["train/loss_avg"].weight_key == "train/weight_sum"
    assert specs["train/clip_frac"].weight_key == "train/valid_token_count"
    assert specs["train/seq_clip_frac"].weight_key == "train/valid_sequence_count"
    assert specs["train/logprob_gap_mean"].weight_key == "train/logprob_gap_token_count"
    assert specs["train/rollout_truncated_frac"].weight_key == "train/response_count"
    assert specs["train/sc_kl_head"].weight_key == "train/sc_token_count"
    for key in ("kl_max", "response_len_max", "sc_rho_max"):
        assert specs[f"train/{key}"].reduce is R.MAX
    assert specs["train/response_len_max"].integer
    for key in ("valid_sequence_count", "valid_token_count", "response_count"):
        assert specs[f"train/{key}"] == MetricSpec(f"train/{key}", R.SUM, integer=True)
    assert specs["train/kl_beta"].reduce is R.MEAN
    assert GRPO_ADAPTER.map({"grpo_loss": 1.0}) == {"train/loss_avg": 1.0}


def test_shared_outcome_and_telescope_declarations() -> None:
    shared = {s.name: s.reduce for s in SHARED_TRAINER_SPECS}
    assert shared == {
        "train/grad_norm": R.LAST,
        "train/learning_rate": R.MEAN,
        "timer/e2e_step_s": R.MEAN,
    }
    assert all(s.reduce is R.LAST and s.integer for s in OPTIMIZER_OUTCOME_SPECS)
    assert "optim/zero_grad_skips_total" in {s.name for s in OPTIMIZER_OUTCOME_SPECS}
    tele = {s.name: s for s in TELESCOPE_STEP_SPECS}
    assert tele["entropy"].weight_key == tele["kl_divergence_inference"].weight_key == "num_tokens"
    assert tele["grad_norm"].reduce is tele["learning_rate"].reduce is R.LAST
    rewards = {s.name: s for s in GRPO_REWARD_SPECS}
    assert rewards["train/grpo_informative_group_count"].integer
    assert rewards["train/reward_max"].reduce is R.MAX


def test_all_ready_made_declarations_form_one_valid_set() -> None:
    assert len(spec_set(grpo_specs())) == len({s.name for s in grpo_specs()})

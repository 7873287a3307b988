"""The pure parts of the Hugging Face integration: TRL log keys → Telescope keys, prompts /
completions as text, and the reward capture's columns. (The trainer itself: test_trl.py.)"""

from __future__ import annotations

import math

from trainer_hooks.integrations.hf_keys import TRL_KEYS, step_metrics, telescope_key
from trainer_hooks.integrations.hf_rewards import SampleCapture, as_text
from trainer_hooks.wire.protocol import check_key


def test_every_mapped_key_is_a_valid_key_and_no_two_trl_keys_collide() -> None:
    targets = [telescope_key(k) for k in TRL_KEYS]
    assert all(check_key(t, "metrics") == t for t in targets)
    # Two TRL names for the same figure (the Liger loss logs `clip_ratio`): never both logged.
    dupes = {t for t in targets if targets.count(t) > 1}
    assert dupes == {"train/clip_frac"}


def test_eval_summary_and_unknown_keys_have_their_own_place() -> None:
    assert telescope_key("eval_reward") == "val/reward_mean"
    assert telescope_key("eval_loss") == "val/loss/total"
    assert telescope_key("train_runtime") == "summary/train_runtime"
    assert telescope_key("frac_reward_zero_std") == "train/frac_reward_zero_std"
    assert telescope_key("rewards/accuracy/mean") == "rewards/accuracy/mean"
    assert telescope_key("sampling/importance_sampling_ratio/min") == \
        "sampling/importance_sampling_ratio/min"


def test_step_metrics_keep_numbers_and_bools_and_null_the_non_finite() -> None:
    logs = {"loss": 0.5, "kl": math.nan, "reward": None, "epoch": 1, "step": 3,
            "completions/clipped_ratio": True, "note": "text", "hist": [1, 2]}
    assert step_metrics(logs) == {"loss/total": 0.5, "train/kl_mean": None,
                                  "train/reward_mean": None, "train/epoch": 1,
                                  "train/rollout_truncated_frac": True}


def test_conversations_become_one_line_per_message() -> None:
    prompt = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": [{"type": "image"},
                                           {"type": "text", "text": "What is 2 + 2?"}]}]
    assert as_text(prompt) == "system: Be brief.\nuser: What is 2 + 2?"
    assert as_text([{"role": "assistant", "content": "4"}]) == "assistant: 4"
    assert as_text("plain") == "plain" and as_text(None) is None


def test_each_function_metric_is_raw_and_the_weight_applies_to_the_total_only() -> None:
    capture = SampleCapture(text=False)
    batch = capture.begin({"completions": ["a", "b"], "prompts": ["p", "p"]}, 1, None, None)
    assert batch is not None
    capture.add_rewards(batch, "accuracy", 2.0, [0.5, 1.0])
    capture.add_rewards(batch, "format", 0.5, [None, 0.25])
    [chunk] = capture.take()
    assert chunk["metrics"] == {"accuracy": [0.5, 1.0], "format": [None, 0.25]}
    assert chunk["reward"] == [1.0, 2.125]  # 2 × 0.5; 2 × 1.0 + 0.5 × 0.25

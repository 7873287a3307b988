"""A real TRL GRPO job on CPU for the integration tests: a tiny randomly initialised Llama built
here from a config, a word-level tokenizer built here too (nothing is downloaded), two reward
functions wrapped with `telescope_reward`, and `TelescopeCallback` sending to a server.

    python tests/integrations/trl_job.py --out DIR [--url WS --token T --name RUN] [--steps N]
    python -m torch.distributed.run --nproc_per_node 2 tests/integrations/trl_job.py ...

Each process writes `DIR/rank-<r>.json`: what its reward functions saw (step, number of
completions, the rewards they returned), the exception `train()` raised (`--fail-at`; caught)
and, on the main process, the trainer's log history.
Without `--url` it trains the same way without Telescope (to compare the losses).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from trainer_hooks import RewardResult  # noqa: E402
from trainer_hooks.integrations.hf import TelescopeCallback, telescope_reward  # noqa: E402
from trainer_hooks.transport.client import Client  # noqa: E402

WORDS = ["<pad>", "<eos>", "<unk>", "plus", "is", *(str(d) for d in range(10))]
SEEN: list[dict[str, Any]] = []  # one record per reward-function call
FAIL_AT: list[int] = []  # --fail-at: the step at which `digits` raises


def build_model(path: Path) -> None:
    """A 1-layer Llama over a 15-word vocabulary, random weights (seed 0), with its
    tokenizer, saved under `path` (the reference model of beta > 0 is loaded from there)."""
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                                        eos_token="<eos>", unk_token="<unk>")
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
                         bos_token_id=None)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


def digits(completions: list[str], trainer_state: Any, log_extra: Any = None,
           **kwargs: Any) -> list[float]:
    """1 per digit word of the completion, at most 3; logs the digit count per sample."""
    if trainer_state.global_step + 1 in FAIL_AT:
        raise RuntimeError(f"digits fails at step {trainer_state.global_step + 1}")
    counts = [sum(w.isdigit() for w in c.split()) for c in completions]
    if log_extra is not None:
        log_extra("digit_count", counts)
    rewards = [float(min(c, 3)) for c in counts]
    SEEN.append({"fn": "digits", "step": trainer_state.global_step + 1,
                 "n": len(completions), "rewards": rewards, "completions": completions,
                 "prompts": kwargs["prompts"]})
    return rewards


def brevity(completions: list[str], trainer_state: Any, **kwargs: Any) -> list[RewardResult]:
    """0.5 for a completion of at most 3 words; its word count as a sample metric."""
    words = [len(c.split()) for c in completions]
    out = [RewardResult(0.5 if n <= 3 else 0.0, {"words": float(n)}) for n in words]
    SEEN.append({"fn": "brevity", "step": trainer_state.global_step + 1,
                 "n": len(completions), "rewards": [r.total_reward for r in out]})
    return out


def unwrap_results(fn: Any) -> Any:
    """The same function for TRL without Telescope: plain floats."""
    def plain(*args: Any, **kwargs: Any) -> list[float]:
        return [getattr(r, "total_reward", r) for r in fn(*args, **kwargs)]
    plain.__name__ = fn.__name__
    return plain


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--url")
    p.add_argument("--token", default="")
    p.add_argument("--name", default="trl-grpo", help="the run name")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="per-device completions per step")
    p.add_argument("--spool-dir")
    p.add_argument("--weights", type=float, nargs=2, default=[1.0, 1.0],
                   help="TRL's reward_weights of digits and brevity")
    p.add_argument("--fail-at", type=int, help="digits raises when scoring this step")
    p.add_argument("--report-to", nargs="*", default=["none"],
                   help="HF Trainer's own trackers too (wandb, trackio, tensorboard), "
                        "configured by their environment variables")
    p.add_argument("--log-completions", action="store_true",
                   help="TRL's completions table to those trackers")
    a = p.parse_args(argv)
    FAIL_AT[:] = [] if a.fail_at is None else [a.fail_at]
    out = Path(a.out)
    rank = int(os.environ.get("RANK", "0"))
    model_dir = out / f"model-rank-{rank}"  # every rank builds the same weights (seed 0)
    build_model(model_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    dataset = Dataset.from_dict({"prompt": [f"{x} plus {y} is" for x in range(4)
                                            for y in range(4)]})
    args = GRPOConfig(
        output_dir=str(out / "trainer"), per_device_train_batch_size=a.batch, num_generations=4,
        max_completion_length=6, max_steps=a.steps, logging_steps=1, report_to=a.report_to,
        use_cpu=True, save_strategy="no", beta=0.1, learning_rate=1e-3, seed=0,
        disable_tqdm=True, run_name=a.name, reward_weights=a.weights,
        log_completions=a.log_completions, project="telescope-trl",
        trackio_static_space_id=False)
    if a.url:
        callbacks = [TelescopeCallback(a.url, a.token, a.name, spool_dir=a.spool_dir)]
        reward_funcs = [telescope_reward(digits, env="arith", weight=a.weights[0]),
                        telescope_reward(brevity, weight=a.weights[1])]
    else:
        callbacks, reward_funcs = [], [digits, unwrap_results(brevity)]
    trainer = GRPOTrainer(model=str(model_dir), args=args, train_dataset=dataset,
                          processing_class=tokenizer, reward_funcs=reward_funcs,
                          callbacks=callbacks)
    error = None
    try:
        trainer.train()
    except RuntimeError as exc:  # --fail-at: caught here, yet the run must say it failed
        error = str(exc)
    result = {"rank": rank, "world": int(os.environ.get("WORLD_SIZE", "1")), "seen": SEEN,
              "error": error,
              "log_history": trainer.state.log_history if rank == 0 else None,
              "closed": callbacks[0].closed if callbacks else None,
              "capture_stats": callbacks[0].capture.stats if callbacks else None,
              "text_columns": "prompt" in inspect.signature(Client.log_samples).parameters}
    (out / f"rank-{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()

"""Telescope for Hugging Face `transformers` `Trainer` and TRL (`GRPOTrainer`, ...).

    from trainer_hooks.integrations.hf import TelescopeCallback, telescope_reward

    telescope = TelescopeCallback("ws://127.0.0.1:8000", token, run="grpo-math")
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=...,
                          reward_funcs=[telescope_reward(accuracy, env="math")],
                          callbacks=[telescope])
    trainer.train()

**Step metrics.** Every `on_log` dict is sent as the step metrics of `state.global_step`, keys
mapped to `section/group/metric` (`hf_keys.TRL_KEYS`: `loss` → `loss/total`, `kl` →
`train/kl_mean`, `reward` → `train/reward_mean`, `completions/mean_length` →
`train/response_len_mean`, `step_time` → `timing_step_total`, ...; `eval_*` → `val/`). The run
starts with the trainer's arguments as its config (`args.to_dict()`, the model's config under
`model_config`, `total_steps` for progress), plus what `config=` adds.

**Samples.** `telescope_reward(fn, env=...)` (see `hf_rewards`) records every completion the
wrapped reward function scores, with its group (prompt), step, completion length, stop reason,
advantage (the trainer's own, as TRL's scoring step returns it), sample metrics and (unless
`text=False`) its prompt and completion text; the callback sends them after each optimizer
step, so the Reward, Advantage, Sample metrics, Groups and Rollouts sections fill.

**Several processes** (`accelerate launch`, `torchrun`): make the callback on every process (as
the trainer is). One sender: only the main process (`state.is_world_process_zero`) connects
and logs step metrics, which the Trainer has already reduced across processes. Every rank
scores its own share of the completions; after each optimizer step the callback gathers the
ranks' captured samples and events to every process (`accelerate.utils.gather_object`, one
small collective that every rank reaches at the same point of the step) and the main process
sends them. Group ids are global (TRL's layout: process p's completion i is number p·n + i of the
generation batch), so a prompt group split across ranks stays one group.

**Timeline** (`hf_timeline`; `timeline=False`: none): every process records its spans —
`training_loop_start`, per optimizer step `train_step` with `train_step/forward` and
`train_step/backward` per micro-batch, `optimizer_step`, and from TRL's profiled blocks
`generation` (source `inference`), `compute_reward` (source `reward`), `weight_broadcast`
and the `save_batch` instant — and they are sent with the step's samples. TRL's profiling
timers (`profiling/Time taken: <Class>.<name>`, which TRL sends to W&B, MLflow or trackio
only) reach the step metrics as `profiling/<name>`: the main process's mean seconds per call
since the previous log.

**A failed training** ends the run `failed`: while a `TelescopeCallback` exists, `Trainer.train`
is wrapped (once, for every trainer) so that an exception leaving it (a reward function that
raises, an out-of-memory error, Ctrl-C) first closes each of the trainer's callbacks' runs with
`status="failed"`, then propagates unchanged; the run says so even when the caller catches it.

Nothing here changes what the trainer computes: the callback only reads, the wrapper returns the
reward function's output unchanged (or `RewardResult.total_reward`s), and sending happens on
the sender's own thread.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trainer_hooks.integrations.hf_keys import TRL_KEYS, step_metrics, telescope_key
from trainer_hooks.integrations.hf_rewards import (
    Layout,
    SampleCapture,
    activate,
    active_callback,
    any_wrapped,
    telescope_reward,
)
from trainer_hooks.integrations.hf_timeline import TrainerEvents, install
from trainer_hooks.transport.client import Client, connect
from trainer_hooks.warnonce import WarnOnce

log = logging.getLogger("trainer_hooks.integrations.hf")
_warn = WarnOnce(log)

__all__ = ["TRL_KEYS", "TelescopeCallback", "step_metrics", "telescope_key", "telescope_reward"]


class TelescopeCallback(TrainerCallback):
    """Sends a `Trainer`'s logged metrics, and the samples `telescope_reward` captures, to a
    Telescope dashboard (see the module docstring).

    `url` and `token` default to `$TELESCOPE_URL` (else `ws://127.0.0.1:8000`) and
    `$TELESCOPE_TOKEN`; `run` to `$TELESCOPE_RUN`, else `args.run_name`, else the output
    directory's name. `environments` (a YAML path, dicts or environment classes) declares
    reward and metric ranges at run start; `resume=True` continues the newest run of that
    name (a resumed checkpoint). Other keywords go to `trainer_hooks.connect` (`spool_dir`,
    ...). `close_timeout`: how long the end of training waits for everything to be stored.
    `text=False` leaves the prompts and completions' text out of the samples (the sender's
    `text_per_group=k` keeps it for k samples of each group only). `timeline=False` sends
    no events (the `profiling/` step metrics stay).
    """

    def __init__(self, url: str | None = None, token: str | None = None,
                 run: str | None = None, *, config: dict[str, Any] | None = None,
                 environments: Any = None, resume: bool = False,
                 close_timeout: float = 60.0, text: bool = True, timeline: bool = True,
                 **connect_options: Any) -> None:
        self.url = url or os.environ.get("TELESCOPE_URL") or "ws://127.0.0.1:8000"
        self.token = token if token is not None else os.environ.get("TELESCOPE_TOKEN", "")
        self.run = run or os.environ.get("TELESCOPE_RUN") or None
        self.extra_config = dict(config or {})
        self.environments = environments
        self.resume = resume
        self.close_timeout = close_timeout
        self.connect_options = connect_options
        self.capture = SampleCapture(text=text)
        self.events = TrainerEvents(spans=timeline)
        self.client: Client | None = None
        self.state: Any = None
        self.closed: bool | None = None  # what client.close() returned at the end of training
        self._model: Any = None
        self._world_size = 1
        self._trainer: weakref.ref[Any] | None = None
        activate(self)
        _guard_train()

    def attach(self, trainer: Any) -> None:
        """`trainer` is about to train with this callback (`_guard_train` tells): hook it for
        the Timeline (`hf_timeline.install`) and the samples' advantages
        (`watch_advantages`)."""
        try:
            self._trainer = weakref.ref(trainer)
            install(trainer, self.events)
        except Exception as exc:  # noqa: BLE001 - the Timeline never stops a training
            _warn("attach", "telescope: timeline: could not hook the trainer (%s: %s)",
                  type(exc).__name__, exc)
        if any_wrapped():
            watch_advantages(trainer)

    # ------------------------------------------------------------ Trainer events

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       processing_class: Any = None, **kwargs: Any) -> None:
        activate(self)
        self.state, self._model = state, model
        self._world_size = int(getattr(args, "world_size", 1) or 1)
        process_index = int(getattr(args, "process_index", 0) or 0)
        self.events.rank = process_index
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is not None:  # again: the loop may have made a new accelerator
            self.attach(trainer)
        self.events.loop_start()
        self.capture.layout = Layout(
            process_index=process_index,
            num_generations=getattr(args, "num_generations", None),
            stop_token_ids=_stop_token_ids(processing_class))
        if state.is_world_process_zero and self.client is None:
            if not self.token:
                log.warning("telescope: no token (pass token= or set TELESCOPE_TOKEN); the "
                            "server will refuse this run's metrics")
            self.client = connect(self.url, self.token, self._run_name(args),
                                  config=self._config(args, state, model),
                                  environments=self.environments, resume=self.resume,
                                  **self.connect_options)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.events.step_begin(int(state.global_step) + 1)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.events.pre_optimizer()

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.events.optimizer_done()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.events.step_end()
        self._send_step()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        profiling = self.events.take_profiling()  # every rank: only the main one sends
        if self.client is not None and logs:
            metrics = step_metrics(logs)
            metrics.update(profiling)
            if metrics:
                self.client.log_step(int(state.global_step), metrics)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._send_step()
        if self.client is not None:
            self.closed = self.client.close(self.close_timeout, status="finished")
            # (what is still pending, where it is spooled and how to deliver it, close()
            # says itself in one line: an empty list here explained nothing)
            if not self.closed and self.client.not_stored:
                log.warning("telescope: values not stored (the latest of them): %s",
                            self.client.not_stored[-5:])
            self.client = None

    def on_train_failed(self, exc: BaseException) -> None:
        """`Trainer.train` raised `exc` (see `_guard_train`): end the run `failed`. The
        samples of the step that failed are left out (a batch whose reward functions did not
        all run would carry a partial total) and no rank gathers (the others may never reach
        it): the main process sends its own events, up to the failure. Never raises: the
        trainer's own exception is the one the caller must see."""
        self.capture.take()  # drop them: a failing step's batch may be half scored
        events = self.events.take()
        client, self.client = self.client, None
        if client is None:
            return
        try:
            self._send_events(client, [events])
            log.warning("telescope: training failed (%s: %s); ending run %r as failed",
                        type(exc).__name__, exc, client.run)
            self.closed = client.close(self.close_timeout, status="failed")
        except Exception as err:  # noqa: BLE001 - never hide the training's exception
            log.warning("telescope: could not end the run as failed: %s", err)

    # ------------------------------------------------------------ helpers

    def is_training(self) -> bool:
        """True while the trainer trains (TRL also scores completions when evaluating)."""
        return self._model is not None and bool(getattr(self._model, "training", False))

    def _send_step(self) -> None:
        """Send what the ranks captured since the last optimizer step: samples and events."""
        wrapped, spans = any_wrapped(), self.events.spans
        if not wrapped and not spans:
            return
        parts = [(self.capture.take() if wrapped else [], self.events.take())]
        if self._world_size > 1:  # every rank reaches this at the same point of the step
            from accelerate.utils import gather_object

            parts = gather_object(parts)
        if self.client is None:
            return
        takes_text = _takes_text(self.client)
        for chunks, _ in parts:
            for chunk in chunks:
                chunk = dict(chunk)
                if not takes_text:  # a trainer_hooks without text columns
                    chunk.pop("prompt", None)
                    chunk.pop("completion", None)
                self.client.log_samples(chunk.pop("step"), **chunk)
        self._send_events(self.client, [events for _, events in parts])

    def _send_events(self, client: Client, columns: list[dict[str, list[Any]]]) -> None:
        """One `log_events` call for the ranks' event columns (nothing when there are none)."""
        merged = {name: [v for c in columns for v in c[name]] for name in columns[0]}
        if merged["name"]:
            client.log_events(**merged)

    def _run_name(self, args: Any) -> str:
        if self.run:
            return self.run
        name = getattr(args, "run_name", None)
        output_dir = getattr(args, "output_dir", None)
        if not name and output_dir:
            name = Path(output_dir).name
        return str(name or "trainer")

    def _config(self, args: Any, state: Any, model: Any) -> dict[str, Any]:
        config: dict[str, Any] = dict(args.to_dict()) if hasattr(args, "to_dict") else {}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model_config"] = model_config.to_dict()
        if getattr(state, "max_steps", 0) and state.max_steps > 0:
            config["total_steps"] = int(state.max_steps)
        config["trainer_hooks_integration"] = "hf"
        config.update(self.extra_config)
        return config


def _guard_train() -> None:
    """Wrap `Trainer.train` (once per process) so that an exception leaving it first reaches
    the trainer's `TelescopeCallback`s. transformers has no callback event for a failed
    training, and the callback is given no trainer to wrap; the class attribute covers every
    trainer, however its callbacks were added. `train`, not `_inner_training_loop`: with
    `auto_find_batch_size` an out-of-memory error in the inner loop is retried, not a failure."""
    from transformers import Trainer  # here: it imports torch, the callback alone does not

    train: Callable[..., Any] = Trainer.train
    if getattr(train, "_telescope_guard", False):
        return

    @functools.wraps(train)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        for callback in _telescope_callbacks(self):
            callback.attach(self)
        try:
            return train(self, *args, **kwargs)
        except BaseException as exc:  # Ctrl-C and SystemExit end a training unfinished too
            for callback in _telescope_callbacks(self):
                callback.on_train_failed(exc)
            raise

    guarded._telescope_guard = True  # type: ignore[attr-defined]
    Trainer.train = guarded  # type: ignore[method-assign]


SCORING = "_generate_and_score_completions"  # TRL's GRPO and RLOO: rewards → advantages
_MARK = "_telescope_advantages"


def watch_advantages(trainer: Any) -> None:
    """Hook `trainer`'s scoring step (TRL's `_generate_and_score_completions`, which returns
    this process's completions with the advantages the loss uses) so that the batch its
    reward functions just scored gets those advantages. Idempotent; a trainer without that
    step is left as it is."""
    original = getattr(trainer, SCORING, None)
    if not callable(original) or getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def scoring(*args: Any, **kwargs: Any) -> Any:
        callback = active_callback()
        capture = callback.capture if callback is not None else None
        before = capture.open_batch() if capture is not None else None
        output = original(*args, **kwargs)
        if capture is not None:
            capture.add_advantages(before, output)
        return output

    setattr(scoring, _MARK, True)
    try:
        setattr(trainer, SCORING, scoring)
    except (AttributeError, TypeError):  # a slotted or frozen trainer: no advantages
        pass


def _telescope_callbacks(trainer: Any) -> list[TelescopeCallback]:
    handler = getattr(trainer, "callback_handler", None)
    return [c for c in getattr(handler, "callbacks", ()) if isinstance(c, TelescopeCallback)]


def _takes_text(client: Client) -> bool:
    return {"prompt", "completion"} <= set(inspect.signature(client.log_samples).parameters)


def _stop_token_ids(processing_class: Any) -> frozenset[int]:
    """eos and pad ids: a completion whose last token is one of them stopped on its own (TRL's
    own test for truncation); any other ending hit the length limit."""
    tok = getattr(processing_class, "tokenizer", processing_class)
    ids = (getattr(tok, "eos_token_id", None), getattr(tok, "pad_token_id", None))
    return frozenset(int(i) for i in ids if isinstance(i, int))

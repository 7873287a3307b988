"""Write real runs with another tool, for the importer tests, and what was logged.

    python tests/integrations/make_logs.py KIND DIR [--steps N]

Writes the tool's own files under DIR (torch's `SummaryWriter`; `trackio` with
TRACKIO_DIR=DIR/trackio; `wandb` in offline mode under DIR) and `DIR/truth.json`:
{run name: {"config": {...}, "steps": {step: {key: value}}, "status": ...}} with exactly the
values the tool was given (text too: a categorical key; media, histograms and long text are
not listed, and "skipped" counts them where a run has them).
No network: W&B runs offline, trackio writes its local database. `wandb_resume` writes one W&B
run in two offline folders (a run "resumed" offline: same id, its steps from 0 again); its
truth is {"first": the first folder's run, "both": the run of both}. `tensorboard_media`,
`wandb_steps` and `trl` (a real TRL run through HF Trainer's W&B, trackio and TensorBoard
callbacks) write runs on their user's step axis (see each).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any


def curve(run: int, step: int) -> dict[str, float]:
    return {"loss": 2.0 / (step + 1) + run, "train/accuracy": step / 100.0,
            "train/reward/mean": math.sin(step / 7.0) * (run + 1)}


def tensorboard(out: Path, steps: int) -> dict[str, Any]:
    from torch.utils.tensorboard import SummaryWriter

    truth: dict[str, Any] = {}
    for run, name in enumerate(("grpo-a", "sweep/grpo-b")):
        writer = SummaryWriter(str(out / "tb" / name))
        logged: dict[int, dict[str, float]] = {}
        for step in range(0, steps * 2, 2):  # every other step, as a trainer logging every 2
            for key, value in curve(run, step).items():
                writer.add_scalar(key, value, step)
            writer.add_text("note", f"step {step}", step)  # short text: a categorical key
            logged[step] = {**curve(run, step), "note": f"step {step}"}
        hparams = {"lr": 0.001 * (run + 1), "optimizer": "adamw", "warmup": True}
        writer.add_hparams(hparams, {"hp/final_loss": logged[max(logged)]["loss"]},
                           run_name=".", global_step=max(logged))
        logged[max(logged)]["hp/final_loss"] = logged[max(logged)]["loss"]
        writer.close()
        truth[name] = {"config": hparams, "steps": logged, "status": "finished"}
    return truth


def trackio(out: Path, steps: int) -> dict[str, Any]:
    os.environ["TRACKIO_DIR"] = str(out / "trackio")
    import trackio as tr

    truth: dict[str, Any] = {}
    for run, name in enumerate(("tr-a", "tr-b")):
        config = {"lr": 0.01 * (run + 1), "batch_size": 8, "model": {"layers": 2}}
        tr.init(project="telescope-import", name=name, config=config)
        logged: dict[int, dict[str, Any]] = {}
        for step in range(steps):
            values: dict[str, Any] = dict(curve(run, step))
            if step == 3:
                values["loss"] = float("nan")  # stored by trackio as "NaN": a null
            tr.log(values, step=step)
            logged[step] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                            for k, v in values.items()}
        tr.finish()
        truth[name] = {"config": config, "steps": logged, "status": "finished"}
    return truth


def offline_wandb(out: Path) -> Any:
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=str(out), WANDB_SILENT="true",
                      WANDB_DISABLE_GIT="true", WANDB_CONSOLE="off",
                      # its own logs and caches too, not under ~/.cache and ~/.config
                      WANDB_CACHE_DIR=str(out / "wandb-cache"),
                      WANDB_CONFIG_DIR=str(out / "wandb-config"),
                      WANDB_DATA_DIR=str(out / "wandb-data"))
    import wandb as wb

    return wb


def wandb(out: Path, steps: int) -> dict[str, Any]:
    wb = offline_wandb(out)
    truth: dict[str, Any] = {}
    for run, (name, code) in enumerate((("wb-ok", 0), ("wb-crashed", 1))):
        config = {"lr": 3e-4 * (run + 1), "trainer": {"name": "grpo", "group_size": 8}}
        r = wb.init(project="telescope-import", name=name, config=config, mode="offline")
        logged: dict[int, dict[str, Any]] = {}
        for step in range(steps):
            values: dict[str, Any] = dict(curve(run, step))
            r.log({**values, "sample_text": f"completion {step}"}, step=step)
            logged[step] = {**values, "sample_text": f"completion {step}"}  # categorical
        r.config.update({"late_key": "added after start"})
        r.finish(exit_code=code)
        # W&B's summary: each key's last value
        config = {**config, "late_key": "added after start", "summary": logged[steps - 1]}
        truth[name] = {"config": config, "steps": logged,
                       "status": "finished" if code == 0 else "failed"}
    return truth


def wandb_resume(out: Path, steps: int) -> dict[str, Any]:
    """2×steps steps (max_steps 2×steps), then the same run id again: steps steps from 0 with
    other values (max_steps 3×steps): those stand at the steps both logged."""
    wb = offline_wandb(out)
    config = {"lr": 3e-4, "max_steps": 2 * steps}
    r = wb.init(project="telescope-import", id="resumed01", name="wb-resumed", config=config,
                mode="offline")
    first = {step: curve(0, step) for step in range(2 * steps)}
    for values in first.values():
        r.log(values)  # W&B counts the steps: 0, 1, ...
    r.finish()
    time.sleep(1.1)  # the folder is named for the second it started
    r = wb.init(project="telescope-import", id="resumed01", name="wb-resumed",
                mode="offline", resume="allow")
    r.config.update({"max_steps": 3 * steps}, allow_val_change=True)
    again = {step: curve(1, step) for step in range(steps)}
    for values in again.values():
        r.log(values)  # offline W&B cannot resume: counted from 0 again
    r.finish()
    return {"first": {"config": {**config, "summary": first[2 * steps - 1]}, "steps": first,
                      "status": "finished"},
            "both": {"config": {**config, "max_steps": 3 * steps, "summary": again[steps - 1]},
                     "steps": {**first, **again}, "status": "finished"}}


def tensorboard_media(out: Path, steps: int) -> dict[str, Any]:
    """A run with what is no scalar: short texts (categorical), a long one, images and
    histograms (left out); `add_hparams` with its default run name, which writes the hparams
    and their metrics into a folder of its own inside the run's (part of the run). And a
    sweep: one folder whose two `add_hparams` trials stay runs of their own."""
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(out / "tb" / "hf-run"))
    writer.add_text("args", json.dumps({"output_dir": "x" * 200}))  # over 128: left out
    logged: dict[int, dict[str, Any]] = {}
    for step in range(1, steps + 1):
        values: dict[str, Any] = {"train/loss": 1.0 / step,
                                  "train/outcome": "applied" if step % 3 else "skipped"}
        writer.add_scalar("train/loss", values["train/loss"], step)
        writer.add_text("train/outcome", values["train/outcome"], step)
        if step % 10 == 0:
            writer.add_image("samples", np.zeros((3, 4, 5)), step)
            writer.add_histogram("weights", np.arange(20.0) * step, step)
        logged[step] = values
    hparams = {"lr": 1e-5, "optimizer": "adamw", "beta": 0.04}
    writer.add_hparams(hparams, {"hp/reward": 0.75}, global_step=steps)
    logged[steps]["hp/reward"] = 0.75
    writer.close()
    media = steps // 10
    truth: dict[str, Any] = {"hf-run": {"config": hparams, "steps": logged,
                                        "status": "finished",
                                        "skipped": {"media (image)": media, "histogram": media,
                                                    "text over 128 characters or with "
                                                    "control characters": 1}}}
    sweep = SummaryWriter(str(out / "tb" / "sweep"))
    for trial, lr in (("trial-1", 0.1), ("trial-2", 0.2)):
        sweep.add_hparams({"lr": lr}, {"hp/loss": lr * 10}, run_name=trial, global_step=5)
        truth[f"sweep/{trial}"] = {"config": {"lr": lr}, "steps": {5: {"hp/loss": lr * 10}},
                                   "status": "finished"}
    sweep.close()
    return truth


def wandb_steps(out: Path, steps: int) -> dict[str, Any]:
    """A W&B run with step metrics per key: `train/*` on `train/global_step` (HF Trainer's
    own definitions), `eval/*` on `eval/step`, `other` on W&B's own step; images,
    histograms and a table (left out, counted); a string (categorical); a summary."""
    wb = offline_wandb(out)
    import numpy as np

    r = wb.init(project="telescope-import", name="wb-steps", config={"lr": 1e-6},
                mode="offline")
    r.define_metric("train/global_step")
    r.define_metric("train/*", step_metric="train/global_step", step_sync=True)
    r.define_metric("eval/step")
    r.define_metric("eval/*", step_metric="eval/step")
    logged: dict[int, dict[str, Any]] = {}
    media = 0
    for step in range(1, steps + 1):
        train = {"train/reward": step / 10, "train/outcome": "ok" if step % 2 else "skip"}
        r.log({**train, "train/global_step": step})
        r.log({"train/loss": 1.0 / step})  # no global step: W&B's step_sync gives it
        logged.setdefault(step, {}).update({**train, "train/loss": 1.0 / step})
        if step % 10 == 0:
            r.log({"eval/accuracy": step / 100, "eval/step": step // 10})
            logged.setdefault(step // 10, {})["eval/accuracy"] = step / 100
            r.log({"samples": wb.Image(np.zeros((4, 5, 3), dtype=np.uint8)),
                   "weights": wb.Histogram(np.arange(20.0)),
                   "completions": wb.Table(columns=["a"], data=[[step]])})
            media += 1
    r.log({"other": 5.0})  # no step metric: at W&B's own step, its row's _step
    own_step = r.step - 1
    logged.setdefault(own_step, {})["other"] = 5.0
    r.summary["best_reward"] = steps / 10
    r.summary["train_runtime"] = 12.5
    r.finish()
    last = {"train/reward": steps / 10, "train/outcome": "ok" if steps % 2 else "skip",
            "train/loss": 1.0 / steps, "train/global_step": steps, "other": 5.0,
            "eval/accuracy": (steps // 10 * 10) / 100, "eval/step": steps // 10}
    summary = {**last, "best_reward": steps / 10, "train_runtime": 12.5}
    return {"wb-steps": {"config": {"lr": 1e-6, "summary": summary}, "steps": logged,
                         "status": "finished",
                         "skipped": {"media (image-file)": media, "histogram": media,
                                     "media (table-file)": media}}}


TRL_STEPS = 4
HF_SUMMARY = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
              "train_loss", "total_flos")  # what HF's W&B and trackio callbacks log no row of


def trl(out: Path, steps: int) -> dict[str, Any]:
    """A real TRL GRPO run (trl_job.py, TRL_STEPS steps) reporting through HF Trainer's own
    callbacks to W&B (offline), trackio and TensorBoard, with TRL's completions table. Its
    truth, from the trainer's log history: {"wandb" | "trackio" | "tensorboard": {step:
    {key: value}}, "summary": {key: value}}: each tracker's keys at train/global_step."""
    from transformers.integrations.integration_utils import rewrite_logs

    offline_wandb(out)
    os.environ.update(TRACKIO_DIR=str(out / "trackio"), TENSORBOARD_LOGGING_DIR=str(out / "tb"),
                      WANDB_PROJECT="telescope-trl")
    sys.path.insert(0, str(Path(__file__).parent))
    import trl_job

    trl_job.main(["--out", str(out / "job"), "--steps", str(TRL_STEPS), "--name", "trl-grpo",
                  "--report-to", "wandb", "trackio", "tensorboard", "--log-completions"])
    history = json.loads((out / "job" / "rank-0.json").read_text())["log_history"]
    rows: dict[str, dict[int, dict[str, Any]]] = {"wandb": {}, "trackio": {}, "tensorboard": {}}
    summary: dict[str, Any] = {}
    for entry in history:
        step = entry.pop("step")
        logs = rewrite_logs({k: v for k, v in entry.items() if k not in HF_SUMMARY})
        for tracker in ("wandb", "trackio"):
            rows[tracker].setdefault(step, {}).update(logs)
        rows["tensorboard"].setdefault(step, {}).update(
            {k: v for k, v in rewrite_logs(entry).items() if isinstance(v, (int, float))})
        summary.update({k: entry[k] for k in HF_SUMMARY if k in entry})
        summary.update({**logs, "train/global_step": step})
    return {**rows, "summary": summary}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=("tensorboard", "trackio", "wandb", "wandb_resume",
                                    "tensorboard_media", "wandb_steps", "trl"))
    p.add_argument("out", type=Path)
    p.add_argument("--steps", type=int, default=40)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    truth = globals()[a.kind](a.out, a.steps)
    (a.out / "truth.json").write_text(json.dumps(truth))


if __name__ == "__main__":
    main()

"""Write real runs with another tool, for the importer tests, and what was logged.

    python tests/integrations/make_logs.py tensorboard|trackio|wandb|wandb_resume DIR [--steps N]

Writes the tool's own files under DIR (torch's `SummaryWriter`; `trackio` with
TRACKIO_DIR=DIR/trackio; `wandb` in offline mode under DIR) and `DIR/truth.json`:
{run name: {"config": {...}, "steps": {step: {key: value}}, "status": ...}} with exactly the
values the tool was given (a value it cannot hold as a number, such as text, is not listed).
No network: W&B runs offline, trackio writes its local database. `wandb_resume` writes one W&B
run in two offline folders (a run "resumed" offline: same id, its steps from 0 again); its
truth is {"first": the first folder's run, "both": the run of both}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
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
            writer.add_text("note", f"step {step}", step)  # not a scalar: left out
            logged[step] = curve(run, step)
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
            logged[step] = values
        r.config.update({"late_key": "added after start"})
        r.finish(exit_code=code)
        config = {**config, "late_key": "added after start"}
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
    return {"first": {"config": config, "steps": first, "status": "finished"},
            "both": {"config": {**config, "max_steps": 3 * steps}, "steps": {**first, **again},
                     "status": "finished"}}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=("tensorboard", "trackio", "wandb", "wandb_resume"))
    p.add_argument("out", type=Path)
    p.add_argument("--steps", type=int, default=40)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    truth = globals()[a.kind](a.out, a.steps)
    (a.out / "truth.json").write_text(json.dumps(truth))


if __name__ == "__main__":
    main()

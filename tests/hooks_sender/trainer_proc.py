"""A simulated trainer process for the live sender tests (run as a subprocess, killed at will).

    python trainer_proc.py URL TOKEN RUN SPOOL_DIR CHECKPOINT --steps N --samples M
                           [--every K] [--pause-at S]

It resumes after the step recorded in CHECKPOINT (a real job resumes from its last checkpoint,
and then connects with `resume=True`: the documented pattern),
logs each step's metrics and M samples (in two log_samples calls, ids `s<step>-<i>`), and every
K steps calls `client.sync()` before writing the checkpoint — the documented pattern: whatever
was logged before a checkpoint is in the outbox when the checkpoint exists. With --pause-at S it
logs through step S, syncs (so those samples are sealed) *without* checkpointing, prints
`paused` and waits to be killed: its restart must re-log steps after the checkpoint without
counting their samples twice. At the end it closes the client and exits 0 only when everything
was acknowledged, printing the client's stats as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainer_hooks import connect  # noqa: E402


def loss(step: int) -> float:
    return 1.0 / (step + 1)


def rewards(step: int, m: int) -> list[float]:
    return [float((step + i) % 3) for i in range(m)]


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("url", "token", "run", "spool_dir", "checkpoint"):
        ap.add_argument(name)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--pause-at", type=int, default=None)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="trainer %(levelname)s %(message)s")
    ckpt = Path(args.checkpoint)
    start = int(ckpt.read_text()) + 1 if ckpt.exists() else 0
    client = connect(args.url, args.token, args.run, config={"steps": args.steps},
                     resume=ckpt.exists(),
                     environments=[{"name": "countdown", "reward_min": 0, "reward_max": 2}],
                     spool_dir=args.spool_dir, backoff_initial=0.1, backoff_max=1.0,
                     flush_interval=0.2)
    print(f"start {start} replayed {client.stats['replayed']}", flush=True)
    m, half = args.samples, args.samples // 2
    for step in range(start, args.steps):
        client.log_step(step, {"loss": loss(step), "echo/step": step})
        ids = [f"s{step}-{i}" for i in range(m)]
        groups = [f"g{step}-{i // 4}" for i in range(m)]
        r = rewards(step, m)
        for a, b in ((0, half), (half, m)):
            client.log_samples(step, sample_id=ids[a:b], group_id=groups[a:b], reward=r[a:b],
                               env="countdown", completion_tokens=list(range(a, b)),
                               metrics={"correct": [x > 1 for x in r[a:b]]})
        if step == args.pause_at:
            assert client.sync(60)
            print("paused", flush=True)
            time.sleep(3600)
        if step % args.every == args.every - 1:
            if client.sync(60):
                tmp = ckpt.with_suffix(".tmp")
                tmp.write_text(str(step))
                os.replace(tmp, ckpt)
                print(f"ckpt {step} deduped {client.stats['deduped_samples']}", flush=True)
        print(f"step {step}", flush=True)
        if args.delay:
            time.sleep(args.delay)
    ok = client.close(timeout=240, status="finished")
    print("stats " + json.dumps(client.stats), flush=True)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the peers' workload, timed from the first log call to `close()` returning True.

    .venv/bin/python bench/peers_workload.py [--steps 2000] [--keys 40] [--samples 512]
                                            [--group 16] [--metrics 8] [--lists] [--repeat 3]

The workload of devtools/peers_gen.py: `--steps` steps, each with one `log_step` of `--keys` keys
and one `log_samples` of `--samples` samples in groups of `--group` with `--metrics` sample
metrics, two environments. Wall time of the trainer from the first log call to `close()`
returning True — every value stored *and aggregated* (close sends a barrier), so the read API
returns all of it. The server (daphne, embedded SQLite, its pipeline worker) is started first
in its own process; its start is not timed.

What this figure leaves out, so it is NOT what a user waits for and not comparable with
another tool's whole run: Python's start and the imports, generating the workload (it is
built before the clock starts), and the process's exit. bench/vs_trackio.py times whole
processes, ours beside trackio's, and is the figure to compare. Prints the figure, the
machine's load and the rates; exits non-zero when close() did not return True.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools import peers_gen  # noqa: E402
from devtools.live_server import LiveServer, ServerState, running  # noqa: E402
from trainer_hooks import connect  # noqa: E402


def run_once(server: LiveServer, token: str, name: str, args: argparse.Namespace) -> float:
    step_metrics, columns = peers_gen.generate(peers_gen.from_args(args))
    t0 = time.perf_counter()
    client = connect(server.ws, token, name, config={"bench": "peers_workload"})
    for step in range(args.steps):
        client.log_step(step, step_metrics[step])
        client.log_samples(step, **columns[step])
    ok = client.close(timeout=600)
    took = time.perf_counter() - t0
    if not ok:
        raise SystemExit(f"close() returned False: not stored {client.not_stored}")
    return took


def check_readable(server: LiveServer, name: str, steps: int) -> None:
    """Right after close(): the last step's aggregates are there (read-your-writes)."""
    with urllib.request.urlopen(server.http + "/api/runs", timeout=30) as resp:
        run = next(r for r in json.load(resp)["runs"] if r["name"] == name)
    sid = "reward|reward|mean|"
    with urllib.request.urlopen(f"{server.http}/api/runs/{run['id']}/series?ids="
                                f"{urllib.parse.quote(sid, safe='')}&max_points=20000",
                                timeout=30) as resp:
        got = json.load(resp)["series"][sid]
    if len(got["step"]) != steps:
        raise SystemExit(f"after close(): {len(got['step'])} of {steps} steps readable")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    peers_gen.add_arguments(ap)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        state = ServerState(Path(d))
        with running(state) as server:
            token = state.token("bench")
            times = []
            for i in range(args.repeat):
                name = f"peers-{i}"
                times.append(run_once(server, token, name, args))
                check_readable(server, name, args.steps)
    best, median = min(times), float(np.median(times))
    n = args.steps * args.samples
    print(f"{args.steps:,} steps × ({args.keys} keys + {args.samples} samples, groups of "
          f"{args.group}, {args.metrics} metrics, as {'lists' if args.lists else 'arrays'}): "
          f"first log call → close() True median {median:.2f} s, best {best:.2f} s of "
          f"{args.repeat} ({n / median:,.0f} samples/s, {args.steps / median:,.0f} step "
          f"messages/s); load {os.getloadavg()[0]:.1f}. Not the whole job: Python's start, "
          "imports and building the workload are outside it (bench/vs_trackio.py times them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

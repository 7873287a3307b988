"""Benchmark entry point for trainer_hooks: runs both hook benchmarks and sums up.

    .venv/bin/python bench/hooks.py [--quick]

1. `bench/hooks_reduce.py`: `reduce_window` at 4 gloo ranks with 300 declared keys per step —
   median time per step (target ≤ 5 ms) and collectives per step (must be 2).
2. `bench/hooks_sender.py`: the cost of `log_step` / `log_samples` on the caller's thread
   (target ≤ 50 µs per call for 1024 samples, under load) and the sender's throughput to a
   real server.

Each runs in its own process (the reduction spawns its ranks; the sender starts a server), its
full output is streamed, and the headline figures are repeated at the end. `--quick` runs
fewer steps and calls (a smoke run; the figures are noisier). Exits non-zero when either
benchmark misses its target or fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK = {
    "hooks_reduce.py": ["--steps", "100", "--warmup", "10"],
    "hooks_sender.py": ["--calls", "200", "--throughput-samples", "50000", "--steps", "300"],
}
# the lines of each benchmark's output that carry its headline figures
HEADLINES = {
    "hooks_reduce.py": ("reduce_window:", "worst rank median", "collectives per step",
                        "library cost alone"),
    "hooks_sender.py": ("_cold", "_loaded", "throughput:", "target"),
}


def run(script: str, extra: list[str]) -> tuple[int, list[str], float]:
    """Run one benchmark, streaming its output; (exit code, output lines, seconds)."""
    print(f"==> {script} {' '.join(extra)}".rstrip(), flush=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(HERE / script), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and calls")
    args = parser.parse_args()
    summary: list[str] = []
    failed = []
    for script in ("hooks_reduce.py", "hooks_sender.py"):
        code, lines, seconds = run(script, QUICK[script] if args.quick else [])
        verdict = "targets met" if code == 0 else f"FAILED (exit {code})"
        summary.append(f"{script}: {verdict} in {seconds:.0f} s")
        summary += [f"  {line.strip()}" for line in lines if not line.lstrip().startswith('"')
                    and any(h in line for h in HEADLINES[script])]  # not the JSON dump
        if code:
            failed.append(script)
    print("\n==> trainer_hooks benchmarks" + (" (quick)" if args.quick else ""))
    print("\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

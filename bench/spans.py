"""Benchmark: what `client.span(...)` costs the caller's thread (target ≤ 5 µs per span).

    .venv/bin/python bench/spans.py [--spans 200000] [--cold 2000] [--live]

A real client, connected to a port where nothing listens (its messages wait in the outbox),
or with `--live` to a real server (daphne, embedded SQLite, started here, as
bench/hooks_sender.py does). Figures, each for a bare span (`with client.span("forward")`) and
a generation span with five fields and `sp.tokens` set inside:

- "hot": spans back to back, each timed alone (median, p99): the caller's cost, the target;
- "amortised": the same loop timed whole / N, which adds the recorder's thread taking the GIL
  to check and seal every 4,096 rows into a message, and beside it the process's CPU time
  per span (every thread, until sealed into the outbox): the whole cost of a span to the
  process when spans come flat out (wall above CPU: the machine's other load);
- "cold": one span every 20 ms (caches cold after the sleep, as after a training step), with
  the floor of this machine beside it: an empty `with` block of a class whose `__enter__` and
  `__exit__` do nothing, timed the same way.

Then the seal rate: spans logged and `flush()`ed into the outbox (or acknowledged, `--live`),
per second. Exits non-zero when the hot median misses the target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import ServerState, free_port, running  # noqa: E402
from trainer_hooks import connect  # noqa: E402
from trainer_hooks.transport.client import Client  # noqa: E402

TARGET_US = 5.0


def bare(client: Client, i: int) -> None:
    with client.span("forward"):
        pass


def generation(client: Client, i: int) -> None:
    with client.span("generation", source="inference", server=0, slot=i % 64, step=i // 512,
                     sample_id=i) as sp:
        sp.tokens = 100


class Nothing:
    def __enter__(self) -> Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = Nothing()


def empty(client: Client, i: int) -> None:
    with _NOTHING:
        pass


def each(client: Client, fn: Callable[[Client, int], None], n: int, gap: float
         ) -> dict[str, float]:
    perf = time.perf_counter
    out = np.empty(n)
    for i in range(n):
        t0 = perf()
        fn(client, i)
        out[i] = perf() - t0
        if gap:
            time.sleep(gap)
    us = out * 1e6
    return {"median_us": float(np.median(us)), "p99_us": float(np.percentile(us, 99))}


def amortised(client: Client, fn: Callable[[Client, int], None], n: int
              ) -> tuple[float, float]:
    """µs per span: wall time of the loop, and the process's CPU time (every thread) until
    the spans are sealed into the outbox."""
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        fn(client, i)
    wall = time.perf_counter() - t0
    client.sync(120)
    return wall / n * 1e6, (time.process_time() - c0) / n * 1e6


def seal_rate(client: Client, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        generation(client, i)
    ok = client.flush(120) if client.stats["connects"] else client.sync(120)
    elapsed = time.perf_counter() - t0
    if not ok:
        print("  (flush did not complete)")
    return n / elapsed


def run(client: Client, args: argparse.Namespace) -> bool:
    ok = True
    floor = each(client, empty, args.cold, 0.02)
    print(f"{'empty with block (floor)':28s} cold median {floor['median_us']:.2f} µs "
          f"(p99 {floor['p99_us']:.2f})")
    for label, fn in (("bare span", bare), ("generation span, 6 fields", generation)):
        amortised(client, fn, 10_000)  # warm up
        hot = each(client, fn, args.spans, 0.0)
        whole, cpu = amortised(client, fn, args.spans)
        cold = each(client, fn, args.cold, 0.02)
        print(f"{label:28s} hot median {hot['median_us']:.2f} µs (p99 {hot['p99_us']:.2f}), "
              f"amortised {whole:.2f} µs (process CPU with sealing {cpu:.2f}), "
              f"cold median {cold['median_us']:.2f} µs (p99 {cold['p99_us']:.2f})")
        ok &= hot["median_us"] <= TARGET_US
    rate = seal_rate(client, args.spans)
    where = "acknowledged by the server" if args.live else "sealed into the outbox"
    print(f"{'seal rate':28s} {rate:,.0f} spans/s logged and {where}")
    stats = client.stats
    print(f"{'':28s} {stats['logged_events']:,} events in messages, "
          f"{stats['invalid_values']} left out")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--cold", type=int, default=2_000)
    parser.add_argument("--live", action="store_true", help="send to a real server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp) / "spool"
        if not args.live:
            client = connect(f"ws://127.0.0.1:{free_port()}", "tok", "bench-spans",
                             spool_dir=spool)
            try:
                ok = run(client, args)
            finally:
                client.close(timeout=0.1)
        else:
            state = ServerState(Path(tmp))
            token = state.token("bench")
            with running(state) as server:
                client = connect(server.ws, token, "bench-spans", spool_dir=spool)
                try:
                    ok = run(client, args)
                finally:
                    client.close(timeout=60)
    verdict = "met" if ok else "MISSED"
    print(f"target ≤ {TARGET_US:g} µs per span in the caller (hot median): {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

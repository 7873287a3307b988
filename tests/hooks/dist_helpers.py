"""Spawn a real gloo process group for a test and collect one result per rank.

Children are started with the 'spawn' context (fresh interpreters, as torchrun would give),
rendezvous on a free local port with a short timeout, run `target(rank, world)` and send its
picklable return value back through a queue. A child that hangs past the deadline is killed
and the test fails instead of hanging the suite. `oracle` is the reference reduction the
results are compared with: every rank's raw observations pooled in one place, by hand.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from devtools.live_server import free_port
from trainer_hooks.metrics.specs import MetricSpec, Reduce

Chunk = dict[str, list[float]]
R = Reduce

PG_TIMEOUT = datetime.timedelta(seconds=20)

COLLECTIVES = (
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "send",
    "recv",
    "isend",
    "irecv",
)


def run_world(
    world: int, target: Callable[[int, int], Any], *, timeout: float = 120.0
) -> list[Any]:
    """Run `target(rank, world)` in `world` spawned gloo processes; return results by rank."""
    ctx = mp.get_context("spawn")
    results: queue.Queue[tuple[int, str, Any]] = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_child, args=(rank, world, port, target, results), daemon=True)
        for rank in range(world)
    ]
    for proc in procs:
        proc.start()
    got: dict[int, tuple[str, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(got) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"ranks {sorted(set(range(world)) - set(got))} hung")
            try:
                rank, status, payload = results.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                dead = [p.pid for p in procs if p.exitcode not in (None, 0)]
                if dead and len(got) + len(dead) >= world:
                    raise AssertionError(f"child processes {dead} died without a result") from None
                continue
            got[rank] = (status, payload)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()  # only the processes this helper started
                proc.join(timeout=5)
    crashed = {r: p for r, (s, p) in got.items() if s != "ok"}
    if crashed:
        raise AssertionError(
            "ranks crashed:\n" + "\n".join(f"[{r}] {p}" for r, p in crashed.items())
        )
    return [got[rank][1] for rank in range(world)]


def install_collective_spy(dist: Any) -> dict[str, int]:
    """Wrap every torch.distributed collective so calls are counted (by name) in the dict."""
    counts: dict[str, int] = {}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return spy

    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is not None:
            setattr(dist, name, wrap(name, fn))
    return counts


def oracle(specs: tuple[MetricSpec, ...], per_rank: list[list[Chunk]]) -> dict[str, Any]:
    """The reduction done by hand over every rank's raw observations, pooled in one place."""
    out: dict[str, Any] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        obs = [
            (rank, c, v)
            for rank, chunks in enumerate(per_rank)
            for c, chunk in enumerate(chunks)
            for v in chunk.get(spec.name, [])
        ]
        finite = [(rank, c, v) for rank, c, v in obs if math.isfinite(v)]
        bad = len(obs) - len(finite)
        value: Any = None
        values = [v for _, _, v in finite]
        if spec.reduce is R.MEAN and values:
            value = math.fsum(values) / len(values)
        elif spec.reduce is R.WEIGHTED_MEAN:
            value, dropped = _oracle_weighted(spec, per_rank)
            bad += dropped
        elif spec.reduce is R.SUM and values:
            value = sum(int(v) for v in values) if spec.integer else math.fsum(values)
        elif spec.reduce is R.MAX and values:
            value = max(values)
        elif spec.reduce is R.MIN and values:
            value = min(values)
        elif spec.reduce is R.LAST and finite:
            # Latest chunk ordinal wins, ties to the highest rank; last add within the chunk.
            last_chunk, last_rank = max((c, r) for r, c, _ in finite)
            value = [v for r, c, v in finite if (r, c) == (last_rank, last_chunk)][-1]
        if value is not None:
            out[spec.name] = int(value) if spec.integer else value
        if bad:
            out[spec.name + "/nonfinite"] = bad
    return out


def _oracle_weighted(spec: MetricSpec, per_rank: list[list[Chunk]]) -> tuple[float | None, int]:
    num: list[float] = []
    den: list[float] = []
    dropped = 0
    for chunks in per_rank:
        for chunk in chunks:
            vals = chunk.get(spec.name)
            if not vals or not math.isfinite(vals[0]):
                continue
            weights = [w for w in chunk.get(str(spec.weight_key), []) if math.isfinite(w)]
            if not weights:
                dropped += 1  # its weight was non-finite: the value is dropped and counted
                continue
            num.append(vals[0] * sum(weights))
            den.append(sum(weights))
    total = math.fsum(den)
    return (math.fsum(num) / total if total > 0 else None), dropped


def assert_matches(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for key, expected in want.items():
        if isinstance(expected, int):
            assert type(got[key]) is int, key
            assert got[key] == expected, key
        else:
            assert got[key] == pytest.approx(expected, rel=1e-12, abs=1e-12), key


def _child(
    rank: int, world: int, port: int, target: Callable[[int, int], Any], results: Any
) -> None:
    import torch.distributed as dist

    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=PG_TIMEOUT,
        )
        results.put((rank, "ok", target(rank, world)))
    except BaseException:
        results.put((rank, "crash", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

"""reduce_window across real gloo process groups (2, 3 and 4 spawned ranks) against a
single-process oracle that pools every rank's raw observations.

One spawned world per size runs every scenario in sequence (spawning is the slow part); each
test below then checks one property of the collected per-rank results.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.hooks.dist_helpers import (
    Chunk,
    assert_matches,
    install_collective_spy,
    oracle,
    run_world,
)
from trainer_hooks.metrics.specs import MetricSpec, Reduce

pytestmark = pytest.mark.distributed

R = Reduce
NAN, INF = math.nan, math.inf


@dataclass(frozen=True)
class Scenario:
    name: str
    specs: tuple[MetricSpec, ...]
    data: Callable[[int, int], list[Chunk]]  # (rank, world) -> that rank's chunks
    dst: Callable[[int], int | None] = lambda world: 0
    subgroup: bool = False  # reduce over group ranks [0, world - 1] instead of WORLD
    check_layout: bool | None = None


# ---------------------------------------------------------------- scenario data

TOKEN_SPECS = (
    MetricSpec("entropy", R.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("num_tokens", R.SUM, integer=True),
    MetricSpec("loss", R.MEAN),
)


def uneven_tokens(rank: int, world: int) -> list[Chunk]:
    # Rank r: entropy r+1 over 10(r+1)^2 tokens; r+1 loss observations of value r.
    return [
        {
            "entropy": [1.0 + rank],
            "num_tokens": [10 * (rank + 1) ** 2],
            "loss": [float(rank)] * (rank + 1),
        }
    ]


CHUNK_SPECS = (
    MetricSpec("adv", R.MEAN),
    MetricSpec("n", R.SUM, integer=True),
    MetricSpec("grad_norm", R.LAST),
    MetricSpec("lr", R.LAST),
    MetricSpec("within", R.LAST),
    MetricSpec("kmax", R.MAX),
)


def uneven_chunks(rank: int, world: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for c in range(rank + 2):  # rank r has r + 2 chunks
        chunk: Chunk = {"adv": [c + rank * 0.5], "n": [c + 1], "grad_norm": [10.0 * rank + c]}
        chunk["kmax"] = [rank - c * 0.1]
        if c == 0:
            chunk["lr"] = [0.001 * (rank + 1)]
        if rank == 0:
            chunk["within"] = [1.0] if c == 0 else [3.0, 7.0]
        chunks.append(chunk)
    return chunks


MISSING_SPECS = (
    MetricSpec("kl_max", R.MAX),
    MetricSpec("only0", R.SUM, integer=True),
    MetricSpec("never", R.MEAN),
    MetricSpec("never_w", R.WEIGHTED_MEAN, weight_key="never_tokens"),
    MetricSpec("never_tokens", R.SUM, integer=True),
    MetricSpec("absent_sum", R.SUM),
    MetricSpec("absent_min", R.MIN),
    MetricSpec("absent_last", R.LAST),
)


def missing_keys(rank: int, world: int) -> list[Chunk]:
    if rank == 1:
        return [{"kl_max": [0.5]}, {"kl_max": [0.25]}]
    if rank == 0:
        return [{"only0": [3]}]
    return [{}]  # one empty chunk: contributes nothing at all


ZERO_SPECS = (
    MetricSpec("frac", R.WEIGHTED_MEAN, weight_key="cnt"),
    MetricSpec("cnt", R.SUM, integer=True),
    MetricSpec("frac2", R.WEIGHTED_MEAN, weight_key="cnt2"),
    MetricSpec("cnt2", R.SUM, integer=True),
)


def zero_weight(rank: int, world: int) -> list[Chunk]:
    return [
        {
            "frac": [0.3 + rank],
            "cnt": [0],
            "frac2": [0.1 * (rank + 1)],
            "cnt2": [7 if rank == 1 else 0],
        }
    ]


NONFINITE_SPECS = (
    MetricSpec("loss", R.MEAN),
    MetricSpec("kmax", R.MAX),
    MetricSpec("m", R.MIN),
    MetricSpec("ent", R.WEIGHTED_MEAN, weight_key="tok"),
    MetricSpec("tok", R.SUM, integer=True),
    MetricSpec("s", R.SUM),
)


def nonfinite(rank: int, world: int) -> list[Chunk]:
    if rank == 0:
        return [
            {
                "loss": [NAN, 1.0],
                "kmax": [INF, 0.2],
                "m": [-INF, -1.0],
                "ent": [1.5],
                "tok": [NAN],
                "s": [INF],
            }
        ]
    return [
        {
            "loss": [2.0 + rank],
            "kmax": [0.1 * rank],
            "m": [float(rank)],
            "ent": [2.0],
            "tok": [10 * rank],
            "s": [1.0],
        }
    ]


NEGATIVE_SPECS = (
    MetricSpec("nmax", R.MAX),
    MetricSpec("nmin", R.MIN),
    MetricSpec("imax", R.MAX, integer=True),
    MetricSpec("imin", R.MIN, integer=True),
)


def negative(rank: int, world: int) -> list[Chunk]:
    return [
        {
            "nmax": [-5.0 - rank, -7.0 - rank],
            "nmin": [-1.0 - rank],
            "imax": [-(2**40) - rank],
            "imin": [-3 - rank],
        }
    ]


INT_SPECS = (
    MetricSpec("big", R.SUM, integer=True),
    MetricSpec("huge", R.SUM, integer=True),
    MetricSpec("neg", R.SUM, integer=True),
    MetricSpec("imax", R.MAX, integer=True),
    MetricSpec("ilast", R.LAST, integer=True),
)


def integers(rank: int, world: int) -> list[Chunk]:
    return [
        {"big": [2**31 + rank], "huge": [2**53 - 1 - rank], "neg": [-(2**50) - rank]},
        {"big": [2**31 + 7], "imax": [2**53 - rank], "ilast": [2**53 - 3 - rank]},
    ]


def _random_specs() -> tuple[MetricSpec, ...]:
    rng = random.Random(1234)
    specs: list[MetricSpec] = []
    for i in range(60):
        kind = rng.choice(list(Reduce))
        if kind is R.WEIGHTED_MEAN:
            specs.append(MetricSpec(f"k{i:02d}", kind, weight_key=f"w{i:02d}"))
            specs.append(MetricSpec(f"w{i:02d}", R.SUM, integer=True))
        else:
            integer = kind not in (R.MEAN,) and rng.random() < 0.4
            specs.append(MetricSpec(f"k{i:02d}", kind, integer=integer))
    return tuple(specs)


RANDOM_SPECS = _random_specs()


def randomized(rank: int, world: int) -> list[Chunk]:
    rng = random.Random(1000 * world + rank)
    chunks: list[Chunk] = []
    for _ in range(rng.randint(1, 4)):
        chunk: Chunk = {}
        for spec in RANDOM_SPECS:
            if spec.name.startswith("w") or rng.random() < 0.4:
                continue
            many = 1 if spec.reduce is R.WEIGHTED_MEAN else rng.randint(1, 3)
            chunk[spec.name] = [_random_value(rng, spec) for _ in range(many)]
            if spec.weight_key:
                chunk[spec.weight_key] = [rng.choice([0, 1, 5, 50, NAN, 2**40])]
        chunks.append(chunk)
    return chunks


def _random_value(rng: random.Random, spec: MetricSpec) -> float:
    if rng.random() < 0.05:
        return rng.choice([NAN, INF, -INF])
    if spec.integer:
        return float(rng.randint(-(2**40), 2**40))
    return rng.uniform(-100.0, 100.0)


SCENARIOS = (
    Scenario("uneven_tokens", TOKEN_SPECS, uneven_tokens),
    Scenario("uneven_tokens_again", TOKEN_SPECS, uneven_tokens),  # compact (already checked)
    Scenario("uneven_chunks", CHUNK_SPECS, uneven_chunks),
    Scenario("missing_keys", MISSING_SPECS, missing_keys),
    Scenario("zero_weight", ZERO_SPECS, zero_weight),
    Scenario("nonfinite", NONFINITE_SPECS, nonfinite),
    Scenario("negative", NEGATIVE_SPECS, negative),
    Scenario("integers", INT_SPECS, integers),
    Scenario("integers_again", INT_SPECS, integers),
    Scenario("integers_forced_check", INT_SPECS, integers, check_layout=True),
    Scenario("randomized", RANDOM_SPECS, randomized),
    Scenario("randomized_again", RANDOM_SPECS, randomized, dst=lambda w: w - 1),
    Scenario("dst_last", TOKEN_SPECS, uneven_tokens, dst=lambda w: w - 1),
    Scenario("dst_all", TOKEN_SPECS, uneven_tokens, dst=lambda w: None),
    Scenario("dst_all_checked", NEGATIVE_SPECS, negative, dst=lambda w: None, check_layout=True),
    Scenario("subgroup", CHUNK_SPECS, uneven_chunks, dst=lambda w: 1, subgroup=True),
    Scenario("subgroup_again", CHUNK_SPECS, uneven_chunks, dst=lambda w: None, subgroup=True),
)
BY_NAME = {s.name: s for s in SCENARIOS}


# ---------------------------------------------------------------- the spawned world


def build_window(window: Any, chunks: list[Chunk], open_chunk: Chunk | None) -> Any:
    """Add and close each chunk; then add `open_chunk`, left open for reduce_window to close."""
    for chunk in chunks:
        add_values(window, chunk)
        window.end_chunk()
    add_values(window, open_chunk or {})
    return window


def add_values(window: Any, chunk: Chunk) -> None:
    for name, values in chunk.items():
        for value in values:
            window.add(name, value)


def world_main(rank: int, world: int) -> dict[str, Any]:
    """Runs in every spawned rank: each scenario, then the mismatch cases."""
    import torch.distributed as dist

    from trainer_hooks.metrics.reduce import reduce_window
    from trainer_hooks.metrics.window import StepWindow

    counts = install_collective_spy(dist)
    sub = dist.new_group([0, world - 1])  # every rank must take part in creating it
    out: dict[str, Any] = {}

    def call(
        specs: tuple[MetricSpec, ...],
        chunks: list[Chunk],
        open_chunk: Chunk | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        window = build_window(StepWindow(specs), chunks, open_chunk)
        counts.clear()
        start = time.monotonic()
        try:
            result, error = reduce_window(window, **kwargs), None
        except Exception as exc:  # reported to the parent, which asserts on it
            result, error = None, (type(exc).__name__, str(exc))
        elapsed = time.monotonic() - start
        return {"result": result, "error": error, "calls": dict(counts), "elapsed": elapsed}

    for sc in SCENARIOS:
        group_rank = {0: 0, world - 1: 1}.get(rank, -1) if sc.subgroup else rank
        out[sc.name] = call(
            sc.specs,
            sc.data(group_rank, world) if group_rank >= 0 else [],
            group=sub if sc.subgroup else None,
            dst=sc.dst(world),
            check_layout=sc.check_layout,
        )
    out.update(_mismatches(rank, world, call))
    return out


def _mismatches(rank: int, world: int, call: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    extra = (*TOKEN_SPECS, MetricSpec("extra", R.MAX))
    fresh = (*TOKEN_SPECS, MetricSpec("fresh", R.MAX))  # never reduced before: checked
    fresh_extra = (*fresh, MetricSpec("extra", R.MAX))
    fresh_sum = (*TOKEN_SPECS[:2], MetricSpec("loss", R.SUM), MetricSpec("fresh", R.MAX))
    chunks = uneven_tokens(rank, world)
    out = {
        # First call: the last rank declares one more MAX metric (its vectors are longer).
        "mm_extra": call(fresh_extra if rank == world - 1 else fresh, chunks),
        # First call: same names, a different reduction on rank 0.
        "mm_reduce": call(fresh_sum if rank == 0 else fresh, chunks),
        # A checked set changes on rank 1 later; the caller asks for the check again.
        "mm_later": call(extra if rank == 1 else TOKEN_SPECS, chunks, check_layout=True),
        # Same (already checked) declarations, disagreeing dst, compact path.
        "mm_dst": call(TOKEN_SPECS, chunks, dst=0 if rank == 0 else 1),
        # Rank 1's open chunk holds a weighted value without its weight: closing it raises.
        "fail_open_chunk": call(TOKEN_SPECS, chunks, {"entropy": [1.0]} if rank == 1 else None),
        # A dst outside the group on rank 0 only.
        "fail_dst": call(TOKEN_SPECS, chunks, dst=world if rank == 0 else 0),
    }
    out["after_mismatch"] = call(TOKEN_SPECS, chunks)  # the group is still usable
    return out


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda w: f"world{w}")
def world(request: pytest.FixtureRequest) -> tuple[int, list[dict[str, Any]]]:
    size = int(request.param)
    return size, run_world(size, world_main, timeout=180.0)


def expected(name: str, world: int) -> dict[str, Any]:
    sc = BY_NAME[name]
    ranks = [0, world - 1] if sc.subgroup else list(range(world))
    return oracle(sc.specs, [sc.data(g, world) for g in range(len(ranks))])


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_it_matches_the_pooled_oracle_on_dst_only(world: Any, name: str) -> None:
    size, per_rank = world
    sc = BY_NAME[name]
    dst = sc.dst(size)
    members = [0, size - 1] if sc.subgroup else list(range(size))
    want = expected(name, size)
    for rank, got in enumerate(per_rank):
        entry = got[name]
        assert entry["error"] is None, (rank, entry["error"])
        group_rank = members.index(rank) if rank in members else -1
        if group_rank >= 0 and (dst is None or group_rank == dst):
            assert_matches(entry["result"], want)
        else:
            assert entry["result"] is None, rank


def test_pooled_mean_is_not_the_mean_of_rank_means(world: Any) -> None:
    size, per_rank = world
    got = per_rank[0]["uneven_tokens"]["result"]
    tokens = [10 * (r + 1) ** 2 for r in range(size)]
    pooled = sum((1.0 + r) * t for r, t in enumerate(tokens)) / sum(tokens)
    naive = sum(1.0 + r for r in range(size)) / size
    assert got["entropy"] == pytest.approx(pooled, rel=1e-12)
    assert got["entropy"] != pytest.approx(naive, rel=1e-3)
    loss_pooled = sum(r * (r + 1) for r in range(size)) / sum(r + 1 for r in range(size))
    assert got["loss"] == pytest.approx(loss_pooled, rel=1e-12)
    assert got["loss"] != pytest.approx(sum(range(size)) / size, rel=1e-3)
    assert got["num_tokens"] == sum(tokens)


def test_hand_checked_edge_values(world: Any) -> None:
    size, per_rank = world
    res = {name: per_rank[0][name]["result"] for name in BY_NAME}
    assert res["missing_keys"] == {"kl_max": 0.5, "only0": 3}  # declared-but-absent: omitted
    assert res["zero_weight"] == {"cnt": 0, "cnt2": 7, "frac2": pytest.approx(0.2)}
    nf = res["nonfinite"]
    assert (nf["loss/nonfinite"], nf["kmax/nonfinite"], nf["m/nonfinite"]) == (1, 1, 1)
    assert (nf["ent/nonfinite"], nf["tok/nonfinite"], nf["s/nonfinite"]) == (1, 1, 1)
    assert nf["ent"] == pytest.approx(2.0) and nf["kmax"] == pytest.approx(
        max(0.2, 0.1 * (size - 1))
    )
    assert res["negative"] == {
        "nmax": -5.0,
        "nmin": -1.0 - (size - 1),
        "imax": -(2**40),
        "imin": -3 - (size - 1),
    }
    ints = res["integers"]
    assert ints["big"] == sum(2**31 + r + 2**31 + 7 for r in range(size))
    assert ints["huge"] == sum(2**53 - 1 - r for r in range(size)) > 2**53
    assert ints["neg"] == sum(-(2**50) - r for r in range(size))
    assert (ints["imax"], ints["ilast"]) == (2**53, 2**53 - 3 - (size - 1))
    chunks = res["uneven_chunks"]
    assert chunks["grad_norm"] == 10.0 * (size - 1) + size  # the rank with the most chunks
    assert chunks["lr"] == pytest.approx(0.001 * size)  # same chunk everywhere: highest rank
    assert chunks["within"] == 7.0  # last add of the last chunk holding it
    assert chunks["n"] == sum(sum(range(1, r + 3)) for r in range(size))


def checked_scenarios(world: int) -> set[str]:
    """The scenarios that run the layout check: the first call per declaration set and group
    (`check_layout=None`), or an explicit `check_layout=True`."""
    seen: set[tuple[tuple[MetricSpec, ...], tuple[int, ...]]] = set()
    checked = set()
    for sc in SCENARIOS:
        key = (sc.specs, (0, world - 1) if sc.subgroup else tuple(range(world)))
        if sc.check_layout or (sc.check_layout is None and key not in seen):
            checked.add(sc.name)
        seen.add(key)
    return checked


STEADY_CALLS = {"gather": 1, "broadcast": 1}


def test_every_step_costs_exactly_two_collectives(world: Any) -> None:
    size, per_rank = world
    checked = checked_scenarios(size)
    assert {"uneven_tokens", "integers_forced_check", "dst_all_checked"} <= checked
    assert {"uneven_tokens_again", "integers_again", "dst_all"}.isdisjoint(checked)
    for rank, got in enumerate(per_rank):
        for name, sc in BY_NAME.items():
            if sc.subgroup and rank not in (0, size - 1):
                assert got[name]["calls"] == {}, (rank, name)  # non-members do nothing
                continue
            if name in checked:  # the header first, then the rows
                rows = "all_gather" if sc.dst(size) is None else "gather"
                want = {"all_reduce": 1, rows: 1}
            else:  # gathered on rank 0, verdict and results broadcast
                want = STEADY_CALLS
            assert got[name]["calls"] == want, (rank, name)
        assert got["after_mismatch"]["calls"] == STEADY_CALLS


@pytest.mark.parametrize("case", ["mm_extra", "mm_reduce", "mm_later", "mm_dst"])
def test_a_declaration_mismatch_raises_on_every_rank_without_hanging(world: Any, case: str) -> None:
    _, per_rank = world
    for rank, got in enumerate(per_rank):
        entry = got[case]
        assert entry["error"] is not None, (rank, case)
        assert entry["error"][0] == "LayoutMismatchError", entry["error"]
        assert entry["result"] is None
        # A checking step raises after the header; a steady one after its broadcast verdict.
        assert entry["calls"] == (STEADY_CALLS if case == "mm_dst" else {"all_reduce": 1})
        assert entry["elapsed"] < 5.0  # detected, not timed out
    assert per_rank[0]["after_mismatch"]["error"] is None
    assert_matches(
        per_rank[0]["after_mismatch"]["result"], expected("uneven_tokens", len(per_rank))
    )


def test_check_and_compact_paths_agree(world: Any) -> None:
    _, per_rank = world
    got = per_rank[0]
    assert got["uneven_tokens"]["result"] == got["uneven_tokens_again"]["result"]
    assert got["integers"]["result"] == got["integers_again"]["result"]
    assert got["integers"]["result"] == got["integers_forced_check"]["result"]


@pytest.mark.parametrize(("case", "culprit"), [("fail_open_chunk", 1), ("fail_dst", 0)])
def test_a_local_failure_on_one_rank_stops_every_rank_without_hanging(
    world: Any, case: str, culprit: int
) -> None:
    _, per_rank = world
    for rank, got in enumerate(per_rank):
        entry = got[case]
        want = "ValueError" if rank == culprit else "PeerFailedError"
        assert entry["error"] is not None and entry["error"][0] == want, (rank, entry["error"])
        assert entry["calls"] == STEADY_CALLS  # the declarations were checked before
        assert entry["elapsed"] < 5.0

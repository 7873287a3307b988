"""`reduce_window`: a `StepWindow` reduced over a torch.distributed group in two collectives.

Layout: the window's specs sorted by name give every metric fixed slots in two float64 vectors.

- SUM vector: one non-finite count per metric, then MEAN (Σv, n), WEIGHTED_MEAN (Σv·w, Σw),
  SUM (Σv, presence; an integer SUM as (high, low) 32-bit halves, exact far beyond 2**53),
  then the LAST values.
- MAX vector: a 9-slot header, then MAX (v), MIN (−v) and LAST priority slots; an absent
  metric sends −inf.

Collective 1 is an all_reduce(MAX), so every rank learns the header and the LAST winners;
collective 2 is a reduce(SUM) to `dst` (all_reduce when `dst` is None), in which only each LAST
winner sends its value. The header holds the layout digest, the mode and `dst`, each as a pair
(x, −x): after MAX they disagree exactly when some rank sent a different x, so every rank sees
the same verdict and raises `LayoutMismatchError` together, before the second collective. Its
last slot flags a rank that failed locally (say, an invalid open chunk): that rank still joins
collective 1, then raises its own error while the others raise `PeerFailedError`.

Gloo aborts the whole process when ranks pass vectors of different lengths, so a checking step
sends the fixed-length header alone in collective 1 and gathers the MAX-like slots through the
SUM collective instead (each rank writes its own row, the others send zeros, so the sum is an
exact gather). That costs world × (MAX-like slots) floats once; steps after a passed check use
the compact layout above.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from trainer_hooks.specs import NONFINITE_SUFFIX, MetricSpec, Reduce, SpecSet
from trainer_hooks.window import KeyState, StepWindow

__all__ = ["LayoutMismatchError", "PeerFailedError", "reduce_window"]

_HEADER = 9  # four agreement pairs, then a local-failure flag
Vectors = tuple[np.ndarray, np.ndarray, np.ndarray]
_CHECK, _COMPACT = 1.0, 2.0
_SPLIT = 2**32
_EXACT = 2**53
# (digest, group ranks) pairs whose layout every rank already confirmed.
_CHECKED: set[tuple[bytes, tuple[int, ...]]] = set()


class LayoutMismatchError(RuntimeError):
    """Ranks of one group called `reduce_window` with different metric declarations (or with
    different `dst` or `check_layout`). Raised on every rank of the group by the same step."""


class PeerFailedError(RuntimeError):
    """Another rank's `reduce_window` failed before the reduction (it raises its own error);
    raised on the other ranks by the same step, so none of them waits for it."""


@dataclass(frozen=True)
class _Slot:
    spec: MetricSpec
    sum_at: int  # first SUM slot (MEAN, WEIGHTED_MEAN, SUM); -1 otherwise
    max_at: int  # MAX-like slot (MAX, MIN, LAST priority); -1 otherwise
    last_at: int  # LAST value index; -1 otherwise
    nonfinite_at: int


@dataclass(frozen=True, eq=False)
class _Layout:
    slots: tuple[_Slot, ...]
    n_sum: int  # SUM slots before the LAST values (non-finite counts included)
    n_max: int
    n_last: int
    digest_words: tuple[float, float]
    last_max: np.ndarray  # MAX-vector index of each LAST priority, in LAST-value order


class _Comm(Protocol):
    rank: int
    world: int

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray: ...

    def sum_to(self, vector: np.ndarray, dst: int | None) -> np.ndarray | None: ...

    def ranks(self) -> tuple[int, ...]: ...


def reduce_window(
    window: StepWindow,
    group: Any = None,
    dst: int | None = 0,
    check_layout: bool | None = None,
    report_nonfinite: bool = True,
) -> dict[str, int | float] | None:
    """Reduce `window` over `group` (a torch.distributed process group) in two collectives.

    Returns the reduced metrics, sorted by name, on group rank `dst` (every rank when `dst`
    is None) and None elsewhere, including on ranks outside `group`. With `group=None` and no
    initialized process group, the reduction is local and never imports torch. An open chunk
    is closed first. A metric no rank observed, and a mean whose total count or weight is 0,
    is omitted — never reported as 0. Integer metrics come back as exact ints.

    LAST across ranks: the value from the rank whose last chunk holding the key is latest in
    its window; ties (the usual case) go to the highest group rank.

    Non-finite values dropped before the reduction are summed over ranks and reported, when
    `report_nonfinite` and non-zero, as `<name>/nonfinite` (an int).

    `check_layout`: True checks on this call, False never, None (default) on the first call
    per declaration set and group. It must resolve identically on every rank. A mismatch
    raises LayoutMismatchError on every rank; a call without the check still compares the
    digest, but ranks whose MAX vectors differ in length are then beyond detection (gloo
    aborts), so pass True after declarations may have changed on some ranks.
    """
    comm = _communicator(group)
    if comm is None:
        return None
    specs = window.specs
    layout = _layout(specs)
    check = _should_check(check_layout, specs, comm)
    try:
        local, failure = _prepare(window, layout, comm, dst), None
    except Exception as exc:
        # Still take part in collective 1, flagged, so the peers raise instead of waiting.
        local, failure = _absent_vectors(layout), exc
    header = _header(layout, check, dst, failed=failure is not None)
    exchange = _exchange_checked if check else _exchange_compact
    reduced = exchange(layout, comm, header, local, dst, failure)
    if check:
        _CHECKED.add((specs.digest, comm.ranks()))
    if reduced is None:
        return None
    return _decode(layout, *reduced, report_nonfinite=report_nonfinite)


def _prepare(window: StepWindow, layout: _Layout, comm: _Comm, dst: int | None) -> Vectors:
    if dst is not None and not 0 <= dst < comm.world:
        raise ValueError(f"dst={dst} is not a rank of a group of {comm.world}")
    if window.open:
        window.end_chunk()
    return _local_vectors(window, layout, comm)


# ---------------------------------------------------------------- layout


@lru_cache(maxsize=64)
def _layout(specs: SpecSet) -> _Layout:
    slots: list[_Slot] = []
    n_sum, n_max, n_last = len(specs), 0, 0  # the SUM vector opens with non-finite counts
    for index, spec in enumerate(specs.specs):
        sum_at = max_at = last_at = -1
        if spec.reduce in (Reduce.MEAN, Reduce.WEIGHTED_MEAN):
            sum_at, n_sum = n_sum, n_sum + 2
        elif spec.reduce is Reduce.SUM:
            sum_at, n_sum = n_sum, n_sum + (3 if spec.integer else 2)
        else:
            max_at, n_max = n_max, n_max + 1
            if spec.reduce is Reduce.LAST:
                last_at, n_last = n_last, n_last + 1
        slots.append(_Slot(spec, sum_at, max_at, last_at, nonfinite_at=index))
    digest = specs.digest
    words = (float(int.from_bytes(digest[:6], "big")), float(int.from_bytes(digest[6:12], "big")))
    last_max = np.array([s.max_at for s in slots if s.last_at >= 0], dtype=np.int64)
    return _Layout(tuple(slots), n_sum, n_max, n_last, words, last_max)


def _header(layout: _Layout, check: bool, dst: int | None, *, failed: bool) -> np.ndarray:
    # Each fact x travels as (x, -x): after MAX, x_max == -(-x)_max iff all ranks agree.
    facts = (*layout.digest_words, _CHECK if check else _COMPACT, -1.0 if dst is None else dst)
    header = np.empty(_HEADER, dtype=np.float64)
    header[0:8:2] = facts
    header[1:8:2] = [-x for x in facts]
    header[8] = 1.0 if failed else 0.0  # MAX: any rank that failed locally
    return header


def _verify(header: np.ndarray, specs_count: int, failure: BaseException | None) -> None:
    if failure is not None:
        raise failure
    if header[8] > 0:
        raise PeerFailedError(
            "reduce_window: another rank of the group failed before the reduction "
            "(see its error); this rank stops too instead of waiting for it"
        )
    disagree = header[0:8:2] != -header[1:8:2]
    if not disagree.any():
        return
    parts = []
    if disagree[0] or disagree[1]:
        parts.append(f"declared metric sets differ (this rank declares {specs_count} metrics)")
    if disagree[2]:
        parts.append("check_layout resolved differently")
    if disagree[3]:
        parts.append("dst differs")
    raise LayoutMismatchError(
        "reduce_window: ranks of the group disagree: "
        + "; ".join(parts)
        + ". Every rank must declare the same MetricSpecs and pass the same dst/check_layout."
    )


def _absent_vectors(layout: _Layout) -> Vectors:
    """What a rank without any value sends: zero sums, -inf maxima and LAST priorities."""
    return (
        np.zeros(layout.n_sum, dtype=np.float64),
        np.full(layout.n_max, -math.inf, dtype=np.float64),
        np.zeros(layout.n_last, dtype=np.float64),
    )


def _local_vectors(window: StepWindow, layout: _Layout, comm: _Comm) -> Vectors:
    sums, maxes, lasts = _absent_vectors(layout)
    nonfinite = window.nonfinite
    for slot in layout.slots:
        name = slot.spec.name
        sums[slot.nonfinite_at] = nonfinite.get(name, 0)
        state = window.state(name)
        if state is None:
            continue  # absent: zero sums, -inf maxima and LAST priority
        if slot.sum_at >= 0:
            _put_sum(sums, slot, state)
        elif slot.spec.reduce is Reduce.MAX:
            maxes[slot.max_at] = state.total
        elif slot.spec.reduce is Reduce.MIN:
            maxes[slot.max_at] = -state.total
        else:
            # LAST priority: latest chunk first, then the highest rank.
            maxes[slot.max_at] = state.chunk * comm.world + comm.rank
            lasts[slot.last_at] = state.total
    return sums, maxes, lasts


def _put_sum(sums: np.ndarray, slot: _Slot, state: KeyState) -> None:
    at = slot.sum_at
    if slot.spec.reduce is not Reduce.SUM:
        sums[at], sums[at + 1] = state.total, state.weight
    elif slot.spec.integer:
        high, low = divmod(int(state.total), _SPLIT)
        if abs(high) >= _EXACT:
            raise OverflowError(f"integer SUM {slot.spec.name!r} exceeds 2**85: {state.total}")
        sums[at], sums[at + 1], sums[at + 2] = high, low, 1.0
    else:
        sums[at], sums[at + 1] = state.total, 1.0


# ---------------------------------------------------------------- exchange


def _exchange_compact(
    layout: _Layout,
    comm: _Comm,
    header: np.ndarray,
    local: Vectors,
    dst: int | None,
    failure: BaseException | None,
) -> Vectors | None:
    sums, maxes, lasts = local
    got = comm.all_reduce_max(np.concatenate([header, maxes]))
    _verify(got[:_HEADER], len(layout.slots), failure)
    extremes = got[_HEADER:]
    priority = extremes[layout.last_max]
    with np.errstate(invalid="ignore"):
        mine = (priority >= 0) & (np.fmod(priority, comm.world) == comm.rank)
    # Only each LAST winner sends its value; x + 0 + ... + 0 == x exactly.
    totals = comm.sum_to(np.concatenate([sums, np.where(mine, lasts, 0.0)]), dst)
    if totals is None:
        return None
    return totals[: layout.n_sum], extremes, totals[layout.n_sum :]


def _exchange_checked(
    layout: _Layout,
    comm: _Comm,
    header: np.ndarray,
    local: Vectors,
    dst: int | None,
    failure: BaseException | None,
) -> Vectors | None:
    sums, maxes, lasts = local
    # Fixed length whatever the declarations, so a mismatch cannot abort gloo.
    _verify(comm.all_reduce_max(header.copy()), len(layout.slots), failure)
    width = layout.n_max + layout.n_last
    rows = np.zeros((comm.world, width), dtype=np.float64)
    rows[comm.rank, : layout.n_max] = maxes
    rows[comm.rank, layout.n_max :] = lasts
    totals = comm.sum_to(np.concatenate([sums, rows.ravel()]), dst)
    if totals is None:
        return None
    gathered = totals[layout.n_sum :].reshape(comm.world, width)
    extremes = gathered[:, : layout.n_max].max(axis=0, initial=-math.inf)
    priority = extremes[layout.last_max]
    present = priority >= 0
    winner = np.where(present, np.fmod(np.where(present, priority, 0), comm.world), 0)
    values = gathered[winner.astype(np.int64), layout.n_max + np.arange(layout.n_last)]
    return totals[: layout.n_sum], extremes, np.where(present, values, 0.0)


# ---------------------------------------------------------------- decoding


def _decode(
    layout: _Layout,
    totals: np.ndarray,
    extremes: np.ndarray,
    last_values: np.ndarray,
    *,
    report_nonfinite: bool,
) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for slot in layout.slots:
        value = _decode_one(slot, totals, extremes, last_values)
        if value is not None and math.isfinite(value):
            out[slot.spec.name] = value
        count = totals[slot.nonfinite_at]
        if report_nonfinite and count > 0:
            out[slot.spec.name + NONFINITE_SUFFIX] = int(count)
    return out


def _decode_one(
    slot: _Slot, totals: np.ndarray, extremes: np.ndarray, last_values: np.ndarray
) -> int | float | None:
    spec, at = slot.spec, slot.sum_at
    reduce = spec.reduce
    if reduce in (Reduce.MEAN, Reduce.WEIGHTED_MEAN):
        # A mean over nothing is omitted, never reported as 0.
        return float(totals[at] / totals[at + 1]) if totals[at + 1] > 0 else None
    if reduce is Reduce.SUM:
        if spec.integer:
            if totals[at + 2] <= 0:
                return None
            return int(totals[at]) * _SPLIT + int(totals[at + 1])
        return float(totals[at]) if totals[at + 1] > 0 else None
    extreme = float(extremes[slot.max_at])
    if extreme == -math.inf:
        return None
    if reduce is Reduce.MAX:
        value = extreme
    elif reduce is Reduce.MIN:
        value = -extreme
    else:
        value = float(last_values[slot.last_at])
    return int(value) if spec.integer else value


# ---------------------------------------------------------------- communicators


class _LocalComm:
    """No process group: both "collectives" are the identity."""

    rank = 0
    world = 1

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray:
        return vector

    def sum_to(self, vector: np.ndarray, dst: int | None) -> np.ndarray | None:
        return vector

    def ranks(self) -> tuple[int, ...]:
        return (0,)


class _TorchComm:
    """One torch.distributed group; calls `dist.all_reduce`/`dist.reduce` by attribute lookup
    at call time, so a test can wrap them to count collectives."""

    def __init__(self, dist: Any, group: Any, rank: int, world: int) -> None:
        self.dist, self.group, self.rank, self.world = dist, group, rank, world

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray:
        import torch

        self.dist.all_reduce(torch.from_numpy(vector), op=self.dist.ReduceOp.MAX, group=self.group)
        return vector

    def sum_to(self, vector: np.ndarray, dst: int | None) -> np.ndarray | None:
        import torch

        tensor, op = torch.from_numpy(vector), self.dist.ReduceOp.SUM
        if dst is None:
            self.dist.all_reduce(tensor, op=op, group=self.group)
            return vector
        self.dist.reduce(tensor, op=op, group=self.group, group_dst=dst)
        return vector if self.rank == dst else None

    def ranks(self) -> tuple[int, ...]:
        group = self.group if self.group is not None else self.dist.group.WORLD
        return tuple(self.dist.get_process_group_ranks(group))


def _communicator(group: Any) -> _LocalComm | _TorchComm | None:
    """The group's communicator; None when this process is not a member of `group`."""
    if group is None:
        # Nobody imported torch.distributed, so no process group can exist: stay torch-free.
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return _LocalComm()
    else:
        import torch.distributed as dist
    rank = dist.get_rank(group)
    if rank < 0:
        return None
    return _TorchComm(dist, group, rank, dist.get_world_size(group))


def _should_check(check_layout: bool | None, specs: SpecSet, comm: _Comm) -> bool:
    if isinstance(comm, _LocalComm):
        return False
    if check_layout is not None:
        return bool(check_layout)
    return (specs.digest, comm.ranks()) not in _CHECKED

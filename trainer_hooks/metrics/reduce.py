"""`reduce_window`: a `StepWindow` reduced over a torch.distributed group in two collectives.

Layout: the window's specs sorted by name give every metric fixed slots in one float64 row.

- header (9 slots): four agreement pairs (digest, digest, mode, dst), each fact x as (x, −x),
  then a local-failure flag. After an element-wise MAX over ranks, x_max == −(−x)_max exactly
  when every rank sent the same x.
- SUM part: one non-finite count per metric, then MEAN (Σv, n), WEIGHTED_MEAN (Σv·w, Σw),
  SUM (Σv, presence; an integer SUM as (high, low) 32-bit halves, exact far beyond 2**53).
- MAX part: MAX (v), MIN (−v) and LAST priorities (chunk ordinal × world + rank); an absent
  metric sends −inf.
- the LAST values.

A steady step (layout already checked) gathers every rank's row on group rank 0, which reduces
them in rank order (sums, maxima, LAST winner by priority) and broadcasts the reduced header and
the results: one gather and one broadcast. Every rank learns the verdict from the broadcast
header, so a disagreement (declarations, `dst`, `check_layout`) raises `LayoutMismatchError` on
every rank, and a rank that failed locally (say, an invalid open chunk) raises its own error
while the others raise `PeerFailedError`, all in the same step.

A gather aborts gloo when ranks send rows of different lengths, so a checking step first
all-reduces (MAX) the fixed-length header alone; only when every rank agrees does it send the
rows, gathered on `dst` (on every rank when `dst` is None). Steady steps use a gather and a
broadcast rather than the all_reduce pair the layout was first built for: on gloo a ring
all_reduce costs one network round per rank and direction, a gather and a broadcast one each
(4 ranks on 2 cores: about 5.5 ms per all_reduce of any length against 0.6 ms per gather or
broadcast, `bench/hooks_reduce.py`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from trainer_hooks.metrics.specs import NONFINITE_SUFFIX, MetricSpec, Reduce, SpecSet
from trainer_hooks.metrics.window import KeyState, StepWindow

__all__ = ["LayoutMismatchError", "PeerFailedError", "reduce_window"]

_HEADER = 9  # four agreement pairs, then a local-failure flag
_CHECK, _STEADY = 1.0, 2.0
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
    """Where one metric lives in the row; every index is absolute, -1 when unused."""

    spec: MetricSpec
    sum_at: int  # first SUM slot (MEAN, WEIGHTED_MEAN, SUM)
    max_at: int  # MAX-like slot (MAX, MIN, LAST priority)
    last_at: int  # LAST value
    nonfinite_at: int


@dataclass(frozen=True, eq=False)
class _Layout:
    slots: tuple[_Slot, ...]
    max_start: int  # the SUM part is [_HEADER, max_start)
    last_start: int  # the MAX part is [max_start, last_start), the LAST values follow
    width: int
    digest_words: tuple[float, float]
    last_priority: np.ndarray  # row index of each LAST priority, in LAST-value order


class _Comm(Protocol):
    rank: int
    world: int

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray: ...

    def gather(self, row: np.ndarray, root: int) -> np.ndarray | None: ...

    def all_gather(self, row: np.ndarray) -> np.ndarray: ...

    def broadcast(self, vector: np.ndarray, root: int) -> np.ndarray: ...

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
    is omitted — never reported as 0. Integer metrics come back as exact ints. The group must
    run CPU collectives: gloo, or a default group initialized without a backend (torch then
    pairs gloo for CPU with NCCL for CUDA); for an NCCL-only job pass
    `dist.new_group(backend="gloo")`.

    LAST across ranks: the value from the rank whose last chunk holding the key is latest in
    its window; ties (the usual case) go to the highest group rank.

    Non-finite values dropped before the reduction are summed over ranks and reported, when
    `report_nonfinite` and non-zero, as `<name>/nonfinite` (an int).

    `check_layout`: True checks on this call, False never, None (default) on the first call
    per declaration set and group. It must resolve identically on every rank. A mismatch
    raises LayoutMismatchError on every rank; a step without the check still compares the
    declarations' digest, but ranks whose rows differ in length are then beyond detection
    (gloo aborts), so pass True after declarations may have changed on some ranks.
    """
    comm = _communicator(group)
    if comm is None:
        return None
    specs = window.specs
    layout = _layout(specs)
    check = _should_check(check_layout, specs, comm)
    try:
        row, failure = _prepare(window, layout, comm, dst), None
    except Exception as exc:
        # Still take part in the first collective, flagged, so the peers raise, not wait.
        row, failure = _absent_row(layout), exc
    row[:_HEADER] = _header(layout, check, dst, failed=failure is not None)
    exchange = _exchange_checked if check else _exchange_steady
    reduced = exchange(layout, comm, row, dst, failure)
    if check:
        _CHECKED.add((specs.digest, comm.ranks()))
    if reduced is None:
        return None
    return _decode(layout, reduced, report_nonfinite=report_nonfinite)


def _prepare(window: StepWindow, layout: _Layout, comm: _Comm, dst: int | None) -> np.ndarray:
    if dst is not None and not 0 <= dst < comm.world:
        raise ValueError(f"dst={dst} is not a rank of a group of {comm.world}")
    if window.open:
        window.end_chunk()
    return _local_row(window, layout, comm)


# ---------------------------------------------------------------- layout


@lru_cache(maxsize=64)
def _layout(specs: SpecSet) -> _Layout:
    sums = [_sum_width(spec) for spec in specs.specs]
    lasts = [spec.reduce is Reduce.LAST for spec in specs.specs]
    max_start = _HEADER + len(sums) + sum(sums)  # non-finite counts open the SUM part
    last_start = max_start + sums.count(0)
    slots: list[_Slot] = []
    next_sum, next_max, next_last = _HEADER + len(sums), max_start, last_start
    for index, (spec, width, last) in enumerate(zip(specs.specs, sums, lasts, strict=True)):
        sum_at = max_at = last_at = -1
        if width:
            sum_at, next_sum = next_sum, next_sum + width
        else:
            max_at, next_max = next_max, next_max + 1
        if last:
            last_at, next_last = next_last, next_last + 1
        slots.append(_Slot(spec, sum_at, max_at, last_at, nonfinite_at=_HEADER + index))
    digest = specs.digest
    words = (float(int.from_bytes(digest[:6], "big")), float(int.from_bytes(digest[6:12], "big")))
    last_priority = np.array([s.max_at for s in slots if s.last_at >= 0], dtype=np.int64)
    return _Layout(tuple(slots), max_start, last_start, next_last, words, last_priority)


def _sum_width(spec: MetricSpec) -> int:
    """SUM-part slots of one metric: (Σ, count or weight), integer SUM (high, low, presence)."""
    if spec.reduce is Reduce.SUM:
        return 3 if spec.integer else 2
    return 2 if spec.reduce in (Reduce.MEAN, Reduce.WEIGHTED_MEAN) else 0


def _header(layout: _Layout, check: bool, dst: int | None, *, failed: bool) -> np.ndarray:
    # Each fact x travels as (x, -x): after MAX, x_max == -(-x)_max iff all ranks agree.
    facts = (*layout.digest_words, _CHECK if check else _STEADY, -1.0 if dst is None else dst)
    header = np.empty(_HEADER, dtype=np.float64)
    header[0:8:2] = facts
    header[1:8:2] = [-x for x in facts]
    header[8] = 1.0 if failed else 0.0  # MAX: any rank that failed locally
    return header


def _verify(header: np.ndarray, specs_count: int, failure: BaseException | None) -> None:
    """Raise on every rank alike, given the header reduced (MAX) over the group."""
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


def _absent_row(layout: _Layout) -> np.ndarray:
    """What a rank without any value sends: zero sums, -inf maxima and LAST priorities."""
    row = np.zeros(layout.width, dtype=np.float64)
    row[layout.max_start : layout.last_start] = -math.inf
    return row


def _local_row(window: StepWindow, layout: _Layout, comm: _Comm) -> np.ndarray:
    row = _absent_row(layout)
    nonfinite = window.nonfinite
    for slot in layout.slots:
        name = slot.spec.name
        row[slot.nonfinite_at] = nonfinite.get(name, 0)
        state = window.state(name)
        if state is None:
            continue  # absent: zero sums, -inf maxima and LAST priority
        if slot.sum_at >= 0:
            _put_sum(row, slot, state, comm.world)
        elif slot.spec.reduce is Reduce.MAX:
            row[slot.max_at] = state.total
        elif slot.spec.reduce is Reduce.MIN:
            row[slot.max_at] = -state.total
        else:
            # LAST priority: latest chunk first, then the highest rank.
            row[slot.max_at] = state.chunk * comm.world + comm.rank
            row[slot.last_at] = state.total
    return row


def _put_sum(row: np.ndarray, slot: _Slot, state: KeyState, world: int) -> None:
    at = slot.sum_at
    if slot.spec.reduce is not Reduce.SUM:
        row[at], row[at + 1] = state.total, state.weight
    elif slot.spec.integer:
        high, low = divmod(int(state.total), _SPLIT)
        if abs(high) >= _EXACT // world:  # so the sum of every rank's high halves stays exact
            raise OverflowError(
                f"integer SUM {slot.spec.name!r} is too large to add up exactly over "
                f"{world} ranks: {state.total} (the limit is 2**85 / ranks)")
        row[at], row[at + 1], row[at + 2] = high, low, 1.0
    else:
        row[at], row[at + 1] = state.total, 1.0


# ---------------------------------------------------------------- exchange


def _exchange_steady(
    layout: _Layout, comm: _Comm, row: np.ndarray, dst: int | None, failure: BaseException | None
) -> np.ndarray | None:
    """Gather on group rank 0, reduce there, broadcast header verdict and results."""
    rows = comm.gather(row, root=0)
    reduced = _reduce_rows(layout, rows) if rows is not None else np.empty_like(row)
    comm.broadcast(reduced, root=0)
    _verify(reduced[:_HEADER], len(layout.slots), failure)
    return reduced if dst is None or comm.rank == dst else None


def _exchange_checked(
    layout: _Layout, comm: _Comm, row: np.ndarray, dst: int | None, failure: BaseException | None
) -> np.ndarray | None:
    """Agree on the fixed-length header first, so differing row lengths never reach gloo."""
    _verify(comm.all_reduce_max(row[:_HEADER].copy()), len(layout.slots), failure)
    rows = comm.all_gather(row) if dst is None else comm.gather(row, root=dst)
    return None if rows is None else _reduce_rows(layout, rows)


def _reduce_rows(layout: _Layout, rows: np.ndarray) -> np.ndarray:
    """Every rank's row (one per group rank, in rank order) reduced into one row."""
    start, end = layout.max_start, layout.last_start
    out = np.empty(layout.width, dtype=np.float64)
    out[:_HEADER] = rows[:, :_HEADER].max(axis=0)
    out[_HEADER:start] = rows[:, _HEADER:start].sum(axis=0)  # exact for the integer halves
    out[start:end] = rows[:, start:end].max(axis=0)
    # LAST: the value of the rank holding the highest priority (they are unique per rank).
    winner = rows[:, layout.last_priority].argmax(axis=0)
    out[end:] = rows[winner, np.arange(end, layout.width)]
    return out


# ---------------------------------------------------------------- decoding


def _decode(layout: _Layout, reduced: np.ndarray, *, report_nonfinite: bool) -> dict[str, Any]:
    out: dict[str, int | float] = {}
    for slot in layout.slots:
        value = _decode_one(slot, reduced)
        if value is not None and math.isfinite(value):
            out[slot.spec.name] = value
        count = reduced[slot.nonfinite_at]
        if report_nonfinite and count > 0:
            out[slot.spec.name + NONFINITE_SUFFIX] = int(count)
    return out


def _decode_one(slot: _Slot, reduced: np.ndarray) -> int | float | None:
    spec, at = slot.spec, slot.sum_at
    reduce = spec.reduce
    if reduce in (Reduce.MEAN, Reduce.WEIGHTED_MEAN):
        # A mean over nothing is omitted, never reported as 0.
        return float(reduced[at] / reduced[at + 1]) if reduced[at + 1] > 0 else None
    if reduce is Reduce.SUM:
        if spec.integer:
            if reduced[at + 2] <= 0:
                return None
            return int(reduced[at]) * _SPLIT + int(reduced[at + 1])
        return float(reduced[at]) if reduced[at + 1] > 0 else None
    extreme = float(reduced[slot.max_at])
    if extreme == -math.inf:
        return None
    if reduce is Reduce.MAX:
        value = extreme
    elif reduce is Reduce.MIN:
        value = -extreme
    else:
        value = float(reduced[slot.last_at])
    return int(value) if spec.integer else value


# ---------------------------------------------------------------- communicators


class _LocalComm:
    """No process group: every "collective" is the identity on a group of one."""

    rank = 0
    world = 1

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray:
        return vector

    def gather(self, row: np.ndarray, root: int) -> np.ndarray | None:
        return row[np.newaxis]

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        return row[np.newaxis]

    def broadcast(self, vector: np.ndarray, root: int) -> np.ndarray:
        return vector

    def ranks(self) -> tuple[int, ...]:
        return (0,)


class _TorchComm:
    """One torch.distributed group; calls the `dist` collectives by attribute lookup at call
    time, so a test can wrap them to count collectives. Roots are group ranks."""

    def __init__(self, dist: Any, group: Any, rank: int, world: int) -> None:
        self.dist, self.group, self.rank, self.world = dist, group, rank, world

    def all_reduce_max(self, vector: np.ndarray) -> np.ndarray:
        import torch

        self.dist.all_reduce(torch.from_numpy(vector), op=self.dist.ReduceOp.MAX, group=self.group)
        return vector

    def gather(self, row: np.ndarray, root: int) -> np.ndarray | None:
        import torch

        rows = np.empty((self.world, row.size), dtype=np.float64) if self.rank == root else None
        targets = list(torch.from_numpy(rows).unbind(0)) if rows is not None else None
        self.dist.gather(torch.from_numpy(row), targets, group=self.group, group_dst=root)
        return rows

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        import torch

        rows = np.empty((self.world, row.size), dtype=np.float64)
        targets = list(torch.from_numpy(rows).unbind(0))
        self.dist.all_gather(targets, torch.from_numpy(row), group=self.group)
        return rows

    def broadcast(self, vector: np.ndarray, root: int) -> np.ndarray:
        import torch

        self.dist.broadcast(torch.from_numpy(vector), group=self.group, group_src=root)
        return vector

    def ranks(self) -> tuple[int, ...]:
        group = self.group if self.group is not None else self.dist.group.WORLD
        return tuple(self.dist.get_process_group_ranks(group))


def _communicator(group: Any) -> _LocalComm | _TorchComm | None:
    """The group's communicator; None when this process is not a member of `group`."""
    if group is None:
        # Nobody imported torch.distributed, so no process group can exist: stay torch-free.
        loaded = sys.modules.get("torch.distributed")
        if loaded is None or not loaded.is_available() or not loaded.is_initialized():
            return _LocalComm()
    import torch.distributed as dist  # with group=None: already imported, a lookup

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

"""`StepWindow`: one optimizer step's metrics, accumulated over gradient-accumulation chunks.

Values are added during a chunk and folded at `end_chunk()`. Per metric the window keeps only
what its `Reduce` needs (Σv and n, Σv·w and Σw, an extremum, or the last value with its chunk
ordinal), so windows merge associatively and `reduce_window` can pack them into one float64 row.
Non-finite values are dropped on arrival and counted per key. Pure Python: no torch import.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer_hooks.metrics.specs import MetricSpec, Reduce, SpecSet, spec_set

Number = int | float


class UnknownMetricError(KeyError):
    """A value was added for a name the window's specs do not declare."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(slots=True)
class KeyState:
    """Accumulated state of one metric over the closed chunks of a window.

    `total`: Σv (MEAN, SUM), Σv·w (WEIGHTED_MEAN), the extremum (MAX, MIN) or the last value
    (LAST). `weight`: observation count (MEAN) or Σw (WEIGHTED_MEAN). `chunk`: ordinal of the
    chunk that supplied a LAST value.
    """

    total: Number
    weight: Number = 0
    chunk: int = -1


class StepWindow:
    """Accumulates one optimizer step's metrics over its chunks.

    `add`/`add_many` record values for the open chunk, `end_chunk` closes it. A WEIGHTED_MEAN
    metric takes one value per chunk, paired with the chunk's total of its weight key (which
    must be added in the same chunk). `a + b` (or `a.merge(b)`) is the window of `a`'s chunks
    followed by `b`'s. Not thread-safe: use one window per thread.
    """

    __slots__ = ("_specs", "_state", "_pending", "_dropped", "_nonfinite", "_chunks")

    def __init__(self, specs: Iterable[MetricSpec] | SpecSet) -> None:
        self._specs = spec_set(specs)
        self._state: dict[str, KeyState] = {}
        self._pending: dict[str, list[Number]] = {}
        self._dropped: set[str] = set()
        self._nonfinite: dict[str, int] = {}
        self._chunks = 0

    # ------------------------------------------------------------------ reading

    @property
    def specs(self) -> SpecSet:
        """The validated declarations, sorted by name."""
        return self._specs

    @property
    def chunks(self) -> int:
        """Number of closed chunks."""
        return self._chunks

    @property
    def open(self) -> bool:
        """True while the current chunk holds values not yet folded by `end_chunk`."""
        return bool(self._pending) or bool(self._dropped)

    @property
    def nonfinite(self) -> dict[str, int]:
        """Non-finite values dropped so far, per key (keys with none are absent)."""
        return dict(self._nonfinite)

    def state(self, name: str) -> KeyState | None:
        """The closed-chunk state of `name`, or None when no chunk had a finite value."""
        return self._state.get(name)

    # ------------------------------------------------------------------ writing

    def add(self, name: str, value: Any) -> None:
        """Record one observation of `name` in the open chunk.

        NaN/±Inf are dropped and counted. Raises UnknownMetricError for an undeclared name,
        TypeError/ValueError for a value the spec cannot take.
        """
        self._add(self._spec(name), name, value)

    def add_many(self, values: Mapping[str, Any]) -> None:
        """`add` every item; names are all checked first, so an unknown one adds nothing."""
        specs = [self._spec(name) for name in values]
        for spec, (name, value) in zip(specs, values.items(), strict=True):
            self._add(spec, name, value)

    def end_chunk(self) -> None:
        """Close the open chunk (an empty chunk still counts toward chunk ordinals)."""
        weights = self._chunk_weights()
        ordinal = self._chunks
        for name, values in self._pending.items():
            spec = self._specs.by_name[name]
            if spec.reduce is Reduce.WEIGHTED_MEAN:
                weight = weights[name]
                if weight is None:
                    # Its weight was non-finite, so the value cannot be placed; count it.
                    self._nonfinite[name] = self._nonfinite.get(name, 0) + 1
                    continue
                self._fold_weighted(name, values[0], weight)
            else:
                self._fold(spec, values, ordinal)
        self._pending = {}
        self._dropped = set()
        self._chunks += 1

    def clear(self) -> None:
        """Forget everything, keeping the declarations (reuse one window across steps)."""
        self._state = {}
        self._pending = {}
        self._dropped = set()
        self._nonfinite = {}
        self._chunks = 0

    # ------------------------------------------------------------------ merging

    def merge(self, other: StepWindow) -> StepWindow:
        """A new window holding this window's chunks followed by `other`'s.

        Both must share declarations and have no open chunk. Associative:
        `(a + b) + c == a + (b + c)` up to float rounding of the sums.
        """
        if not isinstance(other, StepWindow):
            raise TypeError(f"cannot merge StepWindow with {type(other).__name__}")
        if self._specs != other._specs:
            raise ValueError("cannot merge windows with different metric declarations")
        if self.open or other.open:
            raise ValueError("call end_chunk() on both windows before merging them")
        merged = StepWindow(self._specs)
        merged._chunks = self._chunks + other._chunks
        for name in self._nonfinite.keys() | other._nonfinite.keys():
            merged._nonfinite[name] = self._nonfinite.get(name, 0) + other._nonfinite.get(name, 0)
        for name in self._state.keys() | other._state.keys():
            merged._state[name] = _merge_state(
                self._specs.by_name[name],
                self._state.get(name),
                other._state.get(name),
                self._chunks,
            )
        return merged

    def __add__(self, other: StepWindow) -> StepWindow:
        return self.merge(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepWindow):
            return NotImplemented
        return (
            self._specs == other._specs
            and self._chunks == other._chunks
            and self._state == other._state
            and self._nonfinite == other._nonfinite
            and self._pending == other._pending
        )

    # No __hash__: defining __eq__ makes instances unhashable (a window is mutable).

    def __repr__(self) -> str:
        return (
            f"StepWindow({len(self._specs)} specs, {self._chunks} chunks, "
            f"{len(self._state)} keys with values)"
        )

    # ------------------------------------------------------------------ internals

    def _spec(self, name: str) -> MetricSpec:
        spec = self._specs.by_name.get(name)
        if spec is None:
            shown = ", ".join(self._specs.names()[:20])
            more = " …" if len(self._specs) > 20 else ""
            raise UnknownMetricError(
                f"metric {name!r} is not declared in this StepWindow (declared: {shown}{more})"
            )
        return spec

    def _add(self, spec: MetricSpec, name: str, value: Any) -> None:
        number = _coerce(spec, value)
        if number is None:
            self._nonfinite[name] = self._nonfinite.get(name, 0) + 1
            self._dropped.add(name)
            return
        pending = self._pending.get(name)
        if pending is None:
            self._pending[name] = [number]
        else:
            pending.append(number)

    def _chunk_weights(self) -> dict[str, float | None]:
        """Each pending weighted metric's chunk weight (None: the weight was non-finite).

        Validates the whole chunk before anything is folded, so a raise leaves it intact.
        """
        weights: dict[str, float | None] = {}
        for name, values in self._pending.items():
            spec = self._specs.by_name[name]
            if spec.reduce is not Reduce.WEIGHTED_MEAN:
                continue
            if len(values) != 1:
                raise ValueError(
                    f"weighted metric {name!r} was added {len(values)} times in one chunk; "
                    "it takes one value per chunk (its weight is the chunk's "
                    f"{spec.weight_key!r})"
                )
            key = spec.weight_key
            assert key is not None
            if key in self._pending:
                weight = sum(self._pending[key])
                if weight < 0:
                    raise ValueError(f"weight {key!r} of {name!r} is negative ({weight})")
                weights[name] = float(weight)
            elif key in self._dropped:
                weights[name] = None
            else:
                raise ValueError(
                    f"weighted metric {name!r} was added in a chunk without its weight "
                    f"{key!r}; add both in the same chunk"
                )
        return weights

    def _fold_weighted(self, name: str, value: Number, weight: float) -> None:
        state = self._state.get(name)
        if state is None:
            self._state[name] = KeyState(total=value * weight, weight=weight)
        else:
            state.total += value * weight
            state.weight += weight

    def _fold(self, spec: MetricSpec, values: list[Number], ordinal: int) -> None:
        chunk = _chunk_state(spec, values, ordinal)
        state = self._state.get(spec.name)
        self._state[spec.name] = chunk if state is None else _combine(spec, state, chunk)


def _chunk_state(spec: MetricSpec, values: list[Number], ordinal: int) -> KeyState:
    reduce = spec.reduce
    if reduce is Reduce.MAX:
        return KeyState(total=max(values))
    if reduce is Reduce.MIN:
        return KeyState(total=min(values))
    if reduce is Reduce.LAST:
        return KeyState(total=values[-1], chunk=ordinal)
    if reduce is Reduce.MEAN:
        return KeyState(total=math.fsum(values), weight=len(values))
    # SUM: Python ints stay exact at any size.
    return KeyState(total=sum(values) if spec.integer else math.fsum(values))


def _combine(spec: MetricSpec, early: KeyState, late: KeyState) -> KeyState:
    """Compose two states of one metric, `late` covering later chunks than `early`."""
    reduce = spec.reduce
    if reduce is Reduce.MAX:
        return KeyState(total=max(early.total, late.total))
    if reduce is Reduce.MIN:
        return KeyState(total=min(early.total, late.total))
    if reduce is Reduce.LAST:
        return KeyState(total=late.total, chunk=late.chunk)
    return KeyState(total=early.total + late.total, weight=early.weight + late.weight)


def _merge_state(
    spec: MetricSpec, early: KeyState | None, late: KeyState | None, offset: int
) -> KeyState:
    if late is not None:
        # The later window's chunk ordinals continue after the earlier window's chunks.
        late = KeyState(late.total, late.weight, late.chunk + offset if late.chunk >= 0 else -1)
    if early is None:
        assert late is not None
        return late
    if late is None:
        return KeyState(early.total, early.weight, early.chunk)
    return _combine(spec, early, late)


_MAX_EXACT = 2**53


def _coerce(spec: MetricSpec, value: Any) -> Number | None:
    """The value as a Python number, or None when it is NaN/±Inf (dropped and counted)."""
    if type(value) is float and not spec.integer:  # the common case, without ABC checks
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, numbers.Number | bool):
        value = value.item()  # 0-d torch tensors; numpy scalars take the branches below too
    if isinstance(value, bool):
        value = int(value)
    if spec.integer:
        return _coerce_int(spec, value)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"metric {spec.name!r} takes a real number, got {type(value).__name__}")
    number = float(value)
    return number if math.isfinite(number) else None


def _coerce_int(spec: MetricSpec, value: Any) -> int | None:
    if type(value) is int or isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real):
        as_float = float(value)
        if not math.isfinite(as_float):
            return None
        if not as_float.is_integer():
            raise ValueError(f"integer metric {spec.name!r} got the non-integral {value!r}")
        number = int(as_float)
    else:
        raise TypeError(f"metric {spec.name!r} takes an integer, got {type(value).__name__}")
    # Only SUM splits integers across two float64 slots; the others travel as one.
    if spec.reduce is not Reduce.SUM and abs(number) > _MAX_EXACT:
        raise ValueError(
            f"integer metric {spec.name!r} ({spec.reduce.name}) is exact only up to 2**53, "
            f"got {number}"
        )
    return number

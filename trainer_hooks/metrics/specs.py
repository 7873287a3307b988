"""Metric declarations: how each step metric composes across chunks and ranks.

A `MetricSpec` names one metric and its `Reduce`. A `SpecSet` is a validated, name-sorted set of
specs with a digest that is identical in every process that declared the same set; the
distributed reduction uses the order for its slot layout and the digest for its layout check.
Pure Python: importing this module never imports torch.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from trainer_hooks.wire.protocol import check_key

NONFINITE_SUFFIX = "/nonfinite"


class Reduce(enum.Enum):
    """How one metric composes over the chunks of a window and over ranks.

    MEAN: pooled over every observation (Σv / n), not a mean of per-rank means.
    WEIGHTED_MEAN: Σ v·w / Σ w, with w the chunk's value of the spec's `weight_key`.
    SUM: plain sum; `integer=True` metrics come back as exact Python ints.
    MAX / MIN: extremum over every observation.
    LAST: the value of the last chunk that has the key (see `reduce_window` for ranks).
    """

    MEAN = "mean"
    WEIGHTED_MEAN = "weighted_mean"
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    LAST = "last"


# An integer MAX/MIN/LAST value travels as one float64, exact only up to 2**53.
_INTEGER_REDUCES = frozenset({Reduce.SUM, Reduce.MAX, Reduce.MIN, Reduce.LAST})


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric.

    `weight_key` (WEIGHTED_MEAN only, required there) names another declared metric, reduced
    with SUM, whose per-chunk value weights this one. `integer=True` (SUM, MAX, MIN, LAST)
    makes the reduced value an exact `int`.
    """

    name: str
    reduce: Reduce
    weight_key: str | None = None
    integer: bool = False

    def __post_init__(self) -> None:
        check_key(self.name, "name", kind="metric name")
        if not isinstance(self.reduce, Reduce):
            # Accept the enum's string value ("mean") for declarations read from config files.
            object.__setattr__(self, "reduce", Reduce(self.reduce))
        if self.reduce is Reduce.WEIGHTED_MEAN:
            if self.weight_key is None:
                raise ValueError(f"metric {self.name!r}: WEIGHTED_MEAN needs a weight_key")
            check_key(self.weight_key, "weight_key", kind="weight key")
            if self.weight_key == self.name:
                raise ValueError(f"metric {self.name!r} cannot be weighted by itself")
        elif self.weight_key is not None:
            raise ValueError(
                f"metric {self.name!r}: weight_key is only meaningful with WEIGHTED_MEAN, "
                f"not {self.reduce.name}"
            )
        if not isinstance(self.integer, bool):
            raise TypeError(f"metric {self.name!r}: integer must be a bool")
        if self.integer and self.reduce not in _INTEGER_REDUCES:
            raise ValueError(
                f"metric {self.name!r}: integer=True needs SUM, MAX, MIN or LAST, "
                f"not {self.reduce.name} (a mean is not an integer)"
            )


@dataclass(frozen=True, eq=False)
class SpecSet:
    """A validated set of specs, sorted by name, with a process-independent digest.

    Build one with `spec_set(specs)`; identical declarations share one cached instance.
    """

    specs: tuple[MetricSpec, ...]
    by_name: dict[str, MetricSpec]
    digest: bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpecSet) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def names(self) -> tuple[str, ...]:
        """Declared names in layout (sorted) order."""
        return tuple(s.name for s in self.specs)


def spec_set(specs: Iterable[MetricSpec] | SpecSet) -> SpecSet:
    """Validate `specs` into a `SpecSet`.

    Identical duplicates are merged (so ready-made declaration lists can be concatenated);
    two different specs with one name, an undeclared or non-SUM weight key, or a declared
    name that would collide with a reported `<name>/nonfinite` count raise ValueError.
    """
    if isinstance(specs, SpecSet):
        return specs
    items = tuple(specs)
    for spec in items:
        if not isinstance(spec, MetricSpec):
            raise TypeError(f"expected MetricSpec, got {type(spec).__name__}")
    return _spec_set(tuple(sorted(set(items), key=lambda s: s.name)))


@lru_cache(maxsize=256)
def _spec_set(items: tuple[MetricSpec, ...]) -> SpecSet:
    by_name: dict[str, MetricSpec] = {}
    for spec in items:
        if spec.name in by_name:
            raise ValueError(
                f"metric {spec.name!r} is declared twice with different reductions: "
                f"{by_name[spec.name]} and {spec}"
            )
        by_name[spec.name] = spec
    for spec in items:
        _check_weight(spec, by_name)
        if spec.name.endswith(NONFINITE_SUFFIX):
            base = spec.name[: -len(NONFINITE_SUFFIX)]
            if base in by_name:
                raise ValueError(
                    f"metric {spec.name!r} collides with the non-finite count reported for "
                    f"{base!r}; rename one of them"
                )
    return SpecSet(specs=items, by_name=by_name, digest=_digest(items))


def _check_weight(spec: MetricSpec, by_name: dict[str, MetricSpec]) -> None:
    if spec.weight_key is None:
        return
    weight = by_name.get(spec.weight_key)
    if weight is None:
        raise ValueError(
            f"metric {spec.name!r} is weighted by {spec.weight_key!r}, which is not declared"
        )
    # Σw must be what the window's chunks contributed; only a SUM weight reduces to that.
    if weight.reduce is not Reduce.SUM:
        raise ValueError(
            f"weight key {weight.name!r} (weighting {spec.name!r}) must be declared with "
            f"Reduce.SUM, not {weight.reduce.name}"
        )


def _digest(items: tuple[MetricSpec, ...]) -> bytes:
    # Built from the declarations themselves, never from hash(), which is salted per process.
    text = "\n".join(
        f"{s.name}\t{s.reduce.value}\t{s.weight_key or ''}\t{int(s.integer)}" for s in items
    )
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()

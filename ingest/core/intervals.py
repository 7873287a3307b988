"""Vectorized primitives over labelled rows and time intervals, for the timeline's formulas
(ingest.core.timeline): dense factorization of integer keys, canonical label groups, interval
unions per group, overlap of intervals with aligned buckets, and which rows fall in which
half-open (a, b] windows.

Pure: numpy only; no Python loop per row (a loop per group of rows where said).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

L = TypeVar("L", bound=Hashable)


def factorize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each value's index into them) of an integer array, as
    `np.unique(x, return_inverse=True)` gives. Linear through a lookup table when the values
    span a range not much wider than the array (steps, ranks, small composite keys), else
    np.unique's sort."""
    x = np.asarray(x, dtype=np.int64)
    if x.size == 0:
        return x.copy(), np.zeros(0, dtype=np.int64)
    lo, hi = int(x.min()), int(x.max())
    span = hi - lo + 1
    if span > 2 * x.size + 4096:
        uniq, inv = np.unique(x, return_inverse=True)
        return uniq, inv.astype(np.int64, copy=False)
    present = np.zeros(span, dtype=bool)
    offset = x - lo
    present[offset] = True
    table = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present).astype(np.int64) + lo, table[offset]


def distinct(x: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array, as `np.unique(x)` gives them: by one
    sort (numpy 2's hash-based `np.unique` takes 5-20x longer on these arrays, measured)."""
    s = np.sort(np.asarray(x).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def label_groups(values: Sequence[L], codes: np.ndarray) -> tuple[list[L], np.ndarray]:
    """(the distinct labels, each row's group 0..G-1) of a dictionary-encoded column whose list
    may repeat a label; a null row (code -1) is a group of its own, numbered len(labels)."""
    index: dict[L, int] = {}
    canon = [index.setdefault(v, len(index)) for v in values]  # one step per label, not row
    table = np.array([*canon, len(index)], dtype=np.int64)
    return list(index), table[np.asarray(codes, dtype=np.int64)]


def label_mask(values: Sequence[object], codes: np.ndarray, wanted: object) -> np.ndarray:
    """Rows whose label equals `wanted` (any code the list gives it)."""
    hits = [i for i, v in enumerate(values) if v == wanted and type(v) is type(wanted)]
    if not hits:
        return np.zeros(np.shape(codes), dtype=bool)
    mask: np.ndarray = np.asarray(codes) == hits[0] if len(hits) == 1 else np.isin(codes, hits)
    return mask


def distinct_pairs(a: np.ndarray, b: np.ndarray) -> int:
    """How many distinct (a, b) pairs two integer columns hold."""
    if a.size == 0:
        return 0
    codes_b = factorize(b)[1]
    return int(factorize(factorize(a)[1] * (int(codes_b.max()) + 1) + codes_b)[0].size)


def label_pairs(values: Sequence[L], codes: np.ndarray, ints: np.ndarray
                ) -> list[tuple[L | None, int | None]]:
    """The distinct (label, integer) pairs of a label column (codes into `values`, -1 null) and
    an integer column (-1 null), None for a null: one integer key per pair, no sort of pairs
    as rows (a run's inference lanes are its generations' (server, slot) pairs)."""
    if not codes.size:
        return []
    labels, small = np.asarray(codes, dtype=np.int64) + 1, np.asarray(ints, dtype=np.int64) + 1
    width = int(small.max()) + 1
    return [(None if k // width == 0 else values[k // width - 1],
             None if k % width == 0 else k % width - 1)
            for k in distinct(labels * width + small).tolist()]


def union(group: np.ndarray, start: np.ndarray, end: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """The union of each group's intervals [start, end), as disjoint intervals (starts, ends):
    disjoint within a group, touching ones merged. A loop per group (ranks, servers), none per
    interval."""
    n = start.size
    if n == 0:
        return start.copy(), end.copy()
    order = np.argsort(start, kind="stable")
    order = order[np.argsort(group[order], kind="stable")]
    g, s, e = group[order], start[order], end[order]
    bounds = np.flatnonzero(g[1:] != g[:-1]) + 1
    edges = [0, *bounds.tolist(), n]
    reach = np.empty_like(e)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        reach[lo:hi] = np.maximum.accumulate(e[lo:hi])
    new = np.ones(n, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    new[bounds] = True
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, n - 1)
    return s[firsts], reach[lasts]


def overlap(start: np.ndarray, end: np.ndarray, k0: int, nb: int, width: float) -> np.ndarray:
    """Σ over intervals of |[start, end) ∩ bucket k| for the nb buckets [k·width, (k+1)·width),
    k = k0 .. k0+nb−1 (a time t lies in bucket floor(t / width)). Linear: an interval adds its
    partial first and last buckets directly and every bucket between through a difference
    array, so a long span costs no more than a short one."""
    out = np.zeros(nb + 1)
    if nb == 0 or start.size == 0:
        return out[:nb]
    lo_edge, hi_edge = k0 * width, (k0 + nb) * width
    s = np.maximum(start, lo_edge)
    e = np.minimum(end, hi_edge)
    keep = e > s
    s, e = s[keep], e[keep]
    ks = np.clip(np.floor(s / width).astype(np.int64) - k0, 0, nb)
    ke = np.clip(np.floor(e / width).astype(np.int64) - k0, 0, nb)
    same = ks == ke
    out += np.bincount(ks[same], e[same] - s[same], nb + 1)
    cross = ~same
    ks, ke, s, e = ks[cross], ke[cross], s[cross], e[cross]
    out += np.bincount(ks, (k0 + ks + 1) * width - s, nb + 1)
    out += np.bincount(ke, e - (k0 + ke) * width, nb + 1)
    full = np.bincount(ks + 1, minlength=nb + 1) - np.bincount(ke, minlength=nb + 1)
    out += np.cumsum(full) * width
    return np.maximum(out[:nb], 0.0)


def in_windows(end: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (window, row) with a[window] < end[row] ≤ b[window], as two index arrays. Windows
    that do not overlap (the usual case) cost a binary search per row; overlapping ones (times
    that go backwards) list a row once per window holding it."""
    w = a.size
    if w == 0 or end.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    by_b = np.argsort(b, kind="stable")
    sa, sb = a[by_b], b[by_b]
    if np.all(sa[1:] >= sb[:-1]):
        pos = np.searchsorted(sb, end, side="left")
        inside = pos < w
        inside[inside] = end[inside] > sa[pos[inside]]
        rows = np.flatnonzero(inside)
        return by_b[pos[rows]], rows
    order = np.argsort(end, kind="stable")
    e = end[order]
    lo = np.searchsorted(e, a, side="right")
    hi = np.searchsorted(e, b, side="right")
    count = np.maximum(hi - lo, 0)
    win = np.repeat(np.arange(w), count)
    first = np.cumsum(count) - count
    offset = np.arange(win.size) - np.repeat(first, count) + np.repeat(lo, count)
    return win, order[offset]


def group_reduce(ufunc: np.ufunc, index: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """`ufunc` (np.minimum or np.maximum) of `values` per group index 0..m-1; NaN for a group
    with none."""
    start = np.inf if ufunc is np.minimum else -np.inf
    out = np.full(m, start)
    ufunc.at(out, index, values)
    out[out == start] = np.nan
    return out


def mean(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sums / counts, NaN where the count is 0."""
    out = np.full(sums.shape, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out

"""Per-group statistics over a step's samples: Gini (docs/statistics.md) and max / median ratio.

Pure: numpy only, no loop over samples or groups. Values are sorted once within their groups;
every statistic is then a handful of `reduceat` / indexing passes over the sorted array.
A group statistic returns one value per group and whether the group enters the mean.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

# (values sorted within groups, group starts, group sizes) -> (value per group, included per group)
GroupStat = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def sort_within_groups(x: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Order that sorts by group code, then by x within a group (ties in any order).

    Groups are small (a prompt's rollouts), so rather than one comparison sort of all of x the
    groups are laid out as the rows of a padded matrix and sorted row by row (numpy sorts short
    rows by insertion): linear in n for bounded group sizes. Codes usually arrive sorted
    (canonical order); otherwise a stable sort by code comes first. Wildly uneven group sizes
    or non-finite x take one sort of x and a stable sort by code instead.
    """
    n = x.size
    by_code = None if n < 2 or not np.any(codes[1:] < codes[:-1]) else _stable_order(codes)
    xs = x if by_code is None else x[by_code]
    starts, counts = runs(codes if by_code is None else codes[by_code])
    width = int(counts.max()) if n else 0
    if n == 0 or starts.size * width > 2 * n + 64 or not np.isfinite(xs).all():
        order = np.argsort(x)
        return order[_stable_order(codes[order])]
    if starts.size * width == n:  # every group the same size: a reshape, no padding
        within = np.argsort(xs.reshape(starts.size, width), axis=1)
        sorted_pos = (within + starts[:, None]).ravel()
    else:
        row = np.repeat(np.arange(starts.size), counts)
        grid = np.full((starts.size, width), np.inf)
        grid[row, np.arange(n) - starts[row]] = xs
        # Stable: a row's values (all finite) come before its +inf padding.
        within = np.argsort(grid, axis=1, kind="stable")
        sorted_pos = (within + starts[:, None])[np.arange(width) < counts[:, None]]
    return sorted_pos if by_code is None else by_code[sorted_pos]


def _stable_order(codes: np.ndarray) -> np.ndarray:
    if codes.size and int(codes.min()) >= 0 and int(codes.max()) < 1 << 16:
        codes = codes.astype(np.uint16)  # numpy's stable sort is a radix sort for 16 bits
    return np.argsort(codes, kind="stable")


def runs(sorted_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal codes in a sorted code array."""
    n = sorted_codes.size
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    starts = np.concatenate(([0], np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1))
    return starts, np.diff(starts, append=n)


def gini_per_group(
    x: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """G = ΣᵢΣⱼ|xᵢ − xⱼ| / (2n²x̄) per group of x (already shifted by lo and sorted).

    Groups of one value and groups with a value below 0 (below lo) are not included.
    """
    # For sorted x, ΣᵢΣⱼ|xᵢ − xⱼ| = 2 Σᵢ (2i − n − 1) x₍ᵢ₎ with i 1-based.
    # The sums are per-group reductions whatever the path, so a group's Gini has the same bits
    # whichever other groups (steps) share the call: a re-aggregation rewrites nothing unchanged.
    k = int(counts[0]) if counts.size else 0
    if k and k * counts.size == x.size and bool((counts == k).all()):  # groups of one size
        coef = _coefficients(k, counts.size)
        rows = x.reshape(counts.size, k)
        lo, hi = rows[:, 0], rows[:, -1]
    else:
        rank = np.arange(x.size) - np.repeat(starts, counts)  # 0-based rank within the group
        coef = (2 * rank + 1 - np.repeat(counts, counts)).astype(np.float64)
        lo, hi = x[starts], x[starts + counts - 1]
    included = (counts >= 2) & (lo >= 0)
    # All-equal groups (x̄ may be 0) are exactly 0; rounding must not make them tiny non-zeros.
    spread = included & (hi > lo)
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.add.reduceat(coef * x, starts)
        denominator = counts * np.add.reduceat(x, starts)
        over = spread & ~(np.isfinite(num) & np.isfinite(denominator))
        if bool(over.any()) and np.isfinite(hi[over]).all():
            # Huge finite values (1e308) overflow the sums; G is the same for x / max(x).
            scaled = x / np.repeat(np.where(over, hi, 1.0), counts)
            num[over] = np.add.reduceat(coef * scaled, starts)[over]
            denominator[over] = (counts * np.add.reduceat(scaled, starts))[over]
    gini = np.zeros(starts.size)
    np.divide(num, denominator, out=gini, where=spread)
    return gini, included


@functools.lru_cache(maxsize=8)
def _coefficients(k: int, n_groups: int) -> np.ndarray:
    """2i − n − 1 (i 1-based) for n_groups groups of k sorted values, one after another: the
    same for every column of a pass, so made once (read-only)."""
    coef = np.tile(2.0 * np.arange(k) + 1 - k, n_groups)
    coef.flags.writeable = False
    return coef


def max_median_ratio_per_group(
    x: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """max / median per group of sorted x: 1 when max is 0; median 0 with max > 0 left out."""
    hi = x[starts + counts - 1]
    below, above = x[starts + (counts - 1) // 2], x[starts + counts // 2]
    with np.errstate(over="ignore"):
        median = (below + above) / 2
    over = np.isinf(median) & np.isfinite(below) & np.isfinite(above)
    median[over] = below[over] / 2 + above[over] / 2  # huge lengths: their sum overflowed
    included = (hi == 0) | (median != 0)
    ratio = np.ones(starts.size)
    divide = included & (hi != 0)
    with np.errstate(over="ignore"):  # a huge length over a tiny median: inf
        ratio[divide] = hi[divide] / median[divide]
    return ratio, included


def mean_over_groups(value: np.ndarray, included: np.ndarray) -> tuple[float | None, int, int]:
    """(unweighted mean of the included groups or None, n_included, n_excluded)."""
    n_inc = int(np.count_nonzero(included))
    n_exc = int(included.size - n_inc)
    if n_inc == 0:
        return None, 0, n_exc
    return float(np.mean(value[included])), n_inc, n_exc


def per_group(x: np.ndarray, codes: np.ndarray, stat: GroupStat):
    """Apply `stat` to x grouped by codes: (value, included, code) per group, codes ascending."""
    order = sort_within_groups(x, codes)
    sorted_codes = codes[order]
    starts, counts = runs(sorted_codes)
    value, included = stat(x[order], starts, counts)
    return value, included, sorted_codes[starts]


def group_gini(
    values: np.ndarray, groups: np.ndarray, lo: np.ndarray | float
) -> tuple[float | None, int, int]:
    """Unweighted mean over groups of G = ΣᵢΣⱼ|xᵢ − xⱼ| / (2n²x̄), x = value − lo.

    Non-finite values are dropped first. Groups of one value and groups with a value below lo
    are left out and counted as excluded; all-equal groups give 0; the maximum is (n − 1)/n.
    `lo` is a scalar or one per value. Returns (mean or None when no group is included,
    n_included, n_excluded).
    """
    values = np.asarray(values, dtype=np.float64)
    lo_arr = np.broadcast_to(np.asarray(lo, dtype=np.float64), values.shape)
    finite = np.isfinite(values)
    x = values[finite] - lo_arr[finite]
    gini, included, _ = per_group(x, np.asarray(groups, dtype=np.int64)[finite], gini_per_group)
    return mean_over_groups(gini, included)

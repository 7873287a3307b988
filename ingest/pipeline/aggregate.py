"""Per-step aggregation: the metric families of docs/statistics.md, computed from the samples
of many steps at once.

Pure: numpy only. `aggregate_steps` turns a `StepSamples` holding one or more steps (canonical
order) and the declared ranges into a `Table`: one row per step, one column per series
(kind, key, stat, env). Every statistic is a segment reduction over *cells*, a cell being one
step's samples in one scope (all environments, or one environment), so the work of a pass is a
fixed number of numpy calls whatever the number of steps: Python loops run over scopes,
families and metric names, never over samples, groups or steps. A statistic with no value at a
step is NaN in its column (absent), never a stored NaN. `aggregate_step` is the one-step view
as a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ingest.core import columns
from ingest.core.normalize import PREFIX, Observed, normalized_column, observed_in
from ingest.core.ranges import EnvRanges, MetricRange
from ingest.core.samples import CANCELED, KEPT, MAX_ASYNC, ZERO_ADVANTAGE, SeriesKey, StepSamples
from ingest.pipeline.gini import (
    GroupStat,
    gini_per_group,
    group_gini,
    max_median_ratio_per_group,
    per_group,
    runs,
    sort_within_groups,
)

__all__ = ["Table", "aggregate_blobs", "aggregate_step", "aggregate_steps", "group_gini",
           "normalized_steps"]

Bound = Callable[[EnvRanges], float | None]
Family = tuple[str, str, str]  # (kind, key, stat); the env is the cell's scope

# Undeclared bounds: Gini and "all at min" use 0, "all at max" uses 1 (docs/statistics.md).
DEFAULT_LO, DEFAULT_HI = 0.0, 1.0
RATIO = "group_length_max_median_ratio_mean"
NAN = float("nan")


@dataclass
class Table:
    """Aggregates of n steps: `values[i, j]` is series `keys[j]` at step index i, NaN where the
    series has no value at that step."""

    keys: list[SeriesKey]
    values: np.ndarray  # float64 (n_steps, len(keys))

    def row(self, i: int) -> dict[SeriesKey, float]:
        """The series with a value at step index i, as Python floats."""
        v = self.values[i]
        return {self.keys[j]: float(v[j]) for j in np.flatnonzero(~np.isnan(v)).tolist()}


class Cells:
    """The (step, scope) cells of a StepSamples: scope 0 is all samples of the step, scope
    1 + e environment e. Reductions run over *parts*: the samples of one step and one
    environment (or of no environment), sorted by step then environment (canonical order within
    a part; already so when a step's samples come environment by environment, and then nothing
    is gathered). An environment's cell is its part; a step's scope 0 combines the step's parts
    (sums of their sums, the least of their minima, ...), so each statistic is one pass over the
    samples, not one per scope a sample belongs to."""

    def __init__(self, s: StepSamples) -> None:
        self.samples = s
        self.width = w = len(s.env_names) + 1
        self.size = s.n_steps * w
        step = s.step_index
        key = step * w + (s.env + 1)  # the sample's part: its environment's cell (slot 0: none)
        self.order = None
        if s.n > 1 and bool(np.any(key[1:] < key[:-1])):
            self.order = np.argsort(key, kind="stable")
        key = key if self.order is None else key[self.order]  # per sample, in part order
        self.part_starts, self.part_counts = runs(key)
        part_key = key[self.part_starts]
        self.step_parts, _ = runs(part_key // w)  # the parts of each step, one after another
        self.step_cells = part_key[self.step_parts] - part_key[self.step_parts] % w
        env_part = part_key % w > 0
        self.env_parts, self.env_cells = np.flatnonzero(env_part), part_key[env_part]
        self.scope = np.arange(self.size) % w  # per cell
        self.step_of_cell = np.arange(self.size) // w
        self.part_key, self.part_all = part_key, part_key - part_key % w
        self.kept = s.discard == KEPT
        self.n_all = self._cells(self.part_counts, np.add, 0)  # samples per cell
        self.all_kept = bool(self.kept.all())
        self.n_kept = self.n_all if self.all_kept else self.count(self.kept)
        # The samples every statistic of kept values selects when none is missing: None, all.
        self.kept_idx = None if self.all_kept else np.flatnonzero(self.kept)
        self.has_kept = self.n_kept > 0
        self.present = self.n_all > 0
        self.group_step = np.zeros(int(s.group.max()) + 1 if s.n else 0, dtype=np.int64)
        self.group_step[s.group] = step
        self._by_member: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._kept_parts: tuple[np.ndarray, np.ndarray] | None = None
        self._last_units: tuple[np.ndarray | None, Units] | None = None

    def take(self, column: np.ndarray) -> np.ndarray:
        """A per-sample column in part order."""
        return column if self.order is None else column[self.order]

    def _cells(self, parts: np.ndarray, ufunc: np.ufunc, fill: float | int) -> np.ndarray:
        """Per cell, from one value per part: a step's scope 0 is `ufunc` over its parts."""
        out = np.full(self.size, fill, dtype=parts.dtype)
        if parts.size:
            out[self.step_cells] = ufunc.reduceat(parts, self.step_parts)
            out[self.env_cells] = parts[self.env_parts]
        return out

    def _reduce(self, values: np.ndarray, ufunc: np.ufunc = np.add,
                fill: float = 0.0) -> np.ndarray:
        """Per cell `ufunc.reduce` of per-sample values in part order (`fill`: none)."""
        if not self.part_starts.size:
            return np.full(self.size, fill, dtype=np.float64)
        return self._cells(ufunc.reduceat(values, self.part_starts), ufunc, fill)

    def _counts(self, selected: np.ndarray) -> np.ndarray:
        if not self.part_starts.size:
            return np.zeros(self.size, dtype=np.int64)
        parts = np.add.reduceat(selected.view(np.int8), self.part_starts, dtype=np.int64)
        return self._cells(parts, np.add, 0)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per cell, how many samples `mask` selects."""
        if not mask.any():  # (no discarded sample, say)
            return np.zeros(self.size, dtype=np.int64)
        return self._counts(self.take(mask))

    def moments(self, x: np.ndarray, mask: np.ndarray, n: np.ndarray | None = None,
                every: bool = False) -> dict[str, np.ndarray]:
        """mean, std (ddof=1, two-pass), min, max of the selected (finite) values per cell;
        NaN where a cell has too few values. x and the mask are taken into part order once;
        every statistic is then one reduction over the parts. `n`: the mask's counts, when
        known; `every`: the mask selects every sample."""
        xs = self.take(x)
        if every:
            selected = unselected = None
        elif mask is self.kept:  # (the kept samples: every column without a missing value)
            selected, unselected = self._kept_in_part_order()
        else:
            selected, unselected = self.take(mask), None
        if n is None:
            n = self._counts(selected) if selected is not None else self.n_all
        if not n.any():  # nothing selected (no discarded sample, say): no value anywhere
            return {stat: np.full(self.size, NAN) for stat in ("mean", "std", "min", "max")}
        pick = None if selected is None or bool(selected.all()) else selected  # None: all
        if pick is not None and unselected is None:
            unselected = ~pick
        mean, std = self._mean_std(x, mask, xs, pick, unselected, n)
        lo = self._reduce(_where(pick, xs, np.inf), np.minimum, NAN)
        hi = self._reduce(_where(pick, xs, -np.inf), np.maximum, NAN)
        empty = n == 0
        mean[empty] = lo[empty] = hi[empty] = NAN
        return {"mean": mean, "std": std, "min": lo, "max": hi}

    def mean(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Per cell, the mean of the selected (finite) values; NaN where there are none."""
        return self.moments(x, mask)["mean"]

    def _per_sample(self, cell_values: np.ndarray, part_cells: np.ndarray) -> np.ndarray:
        """Per sample in part order, the value of its part's cell (`part_cells`: the cell of
        each part): the same values as indexing by each sample's cell, by one repeat."""
        return np.repeat(cell_values[part_cells], self.part_counts)

    def _kept_in_part_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(kept, not kept) per sample in part order, made once."""
        if self._kept_parts is None:
            kept = self.take(self.kept)
            self._kept_parts = kept, ~kept
        return self._kept_parts

    def _squares(self, xs: np.ndarray, mean: np.ndarray, part_cells: np.ndarray,
                 unselected: np.ndarray | None) -> np.ndarray:
        """Per part, the sum of the squared deviations of its selected values from the mean
        of the cell `part_cells` names."""
        d = np.subtract(xs, self._per_sample(mean, part_cells))
        if unselected is not None:
            d[unselected] = 0.0  # x may be NaN or inf there
        return np.add.reduceat(np.multiply(d, d, out=d), self.part_starts)

    def _mean_std(self, x: np.ndarray, mask: np.ndarray, xs: np.ndarray,
                  selected: np.ndarray | None, unselected: np.ndarray | None, n: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Per cell mean and std of the selected values (in part order). A cell whose sum or
        squared deviations overflow (finite values near 1e154 and over: [1e308, 1e308] sums to
        inf) is computed again on its values divided by their largest magnitude, then scaled
        back: a mean is never lost, nor a std the float range holds. The other cells keep the
        bits they have."""
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            mean = self._reduce(_where(selected, xs, 0.0)) / n
            squares = np.full(self.size, 0.0)
            if self.part_starts.size:
                squares[self.step_cells] = np.add.reduceat(
                    self._squares(xs, mean, self.part_all, unselected), self.step_parts)
                if self.env_parts.size:
                    squares[self.env_cells] = self._squares(
                        xs, mean, self.part_key, unselected)[self.env_parts]
            scale = np.ones(self.size)
            over = (n > 0) & ~(np.isfinite(mean) & np.isfinite(squares))
            if over.any():
                scale[over], mean[over], squares[over] = self._rescaled(x, mask, n, over)
            std = np.sqrt(squares / (n - 1)) * scale
            std[n < 2] = NAN
            return mean * scale, std

    def _rescaled(self, x: np.ndarray, mask: np.ndarray, n: np.ndarray, over: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(scale, mean, squared deviations) of the `over` cells, on their values divided by
        their largest magnitude: every sample once per scope it belongs to (the members)."""
        if self._by_member is None:
            s, w = self.samples, self.width
            has_env = np.flatnonzero(s.env >= 0)
            step = s.step_index
            cell = np.concatenate([step * w, step[has_env] * w + 1 + s.env[has_env]])
            member = np.concatenate([np.arange(s.n), has_env])
            order = np.argsort(cell, kind="stable")
            cell, member = cell[order], member[order]
            starts, _ = runs(cell)
            self._by_member = cell, member, starts, cell[starts]
        cell, member, starts, start_cell = self._by_member

        def reduce(values: np.ndarray, ufunc: np.ufunc = np.add) -> np.ndarray:
            out = np.zeros(self.size)
            out[start_cell] = ufunc.reduceat(values, starts)
            return out

        selected, xm = mask[member], x[member]
        scale = reduce(np.where(selected, np.abs(xm), 0.0), np.maximum)
        scale[~over] = 1.0
        xm = xm / scale[cell]
        mean = reduce(np.where(selected, xm, 0.0)) / n
        d = np.where(selected, xm - mean[cell], 0.0)
        return scale[over], mean[over], reduce(d * d)[over]

    def group_means(self, x: np.ndarray, idx: np.ndarray | None, stat: GroupStat
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per cell, the unweighted mean over groups of `stat` on values x of samples idx (None:
        all), and how many groups were included and excluded. In an environment's scope a
        group is its samples of that environment (a unit: group × env); the overall scope takes
        whole groups, which are the units themselves unless some group mixes environments."""
        units = self._units(idx)
        w = self.width
        if units.starts is None:  # units out of order: sorted by code first
            unit_value, unit_in, unit = per_group(x, units.codes, stat)
            unit_env, unit_group = unit % w - 1, unit // w
        else:
            unit_value, unit_in = stat(units.sorted_values(x), units.starts, units.counts)
            unit_env, unit_group = units.env, units.group
        if units.mixed:
            group_of = self.samples.group if idx is None else self.samples.group[idx]
            value, included, group = per_group(x, group_of, stat)
        else:
            value, included, group = unit_value, unit_in, unit_group
        env_units = unit_env >= 0
        if units.cells is None or units.starts is None or units.mixed:
            cells = np.concatenate([self.group_step[group] * w,
                                    self.group_step[unit_group[env_units]] * w + 1
                                    + unit_env[env_units]])
            if units.starts is not None and not units.mixed:
                units.cells = cells  # the same for every column of these samples
        else:
            cells = units.cells
        if env_units.any():
            value = np.concatenate([value, unit_value[env_units]])
            included = np.concatenate([included, unit_in[env_units]])
        if included.all():
            n_out = np.zeros(self.size, dtype=np.int64)
            mean, n_in = _bincount_mean(cells, value, self.size)
        else:
            n_out = np.bincount(cells[~included], minlength=self.size)
            mean, n_in = _bincount_mean(cells[included], value[included], self.size)
        return mean, n_in, n_out

    def _units(self, idx: np.ndarray | None) -> Units:
        """The units of samples idx (None: all); the last ones again when idx is the same
        (every column whose values are all finite selects the same samples)."""
        last = self._last_units
        if last is not None and (last[0] is idx or (
                idx is not None and last[0] is not None and last[0].size == idx.size
                and np.array_equal(last[0], idx))):
            return last[1]
        units = Units(self, idx)
        self._last_units = (idx, units)
        return units


class Units:
    """The units (group × environment) of some samples `idx` (None: all) of a Cells: their
    codes and, when the codes come in order (canonical order sorts by group, so they do unless
    a group's environments interleave), each unit's start and size, environment and group."""

    def __init__(self, c: Cells, idx: np.ndarray | None) -> None:
        s, w = c.samples, c.width
        if idx is None:
            self.codes = s.group * w + s.env + 1
        else:
            self.codes = s.group[idx] * w + s.env[idx] + 1
        n = self.codes.size
        self.starts: np.ndarray | None = None
        self.counts = np.zeros(0, dtype=np.int64)
        self.mixed = False
        self.size = 0  # every unit has this many samples (0: not so)
        self.cells: np.ndarray | None = None  # per group then per env unit: its cell
        self._grid: tuple[np.ndarray, np.ndarray] | None = None  # (see sorted_values)
        if n > 1 and bool(np.any(self.codes[1:] < self.codes[:-1])):
            groups = np.unique(self.codes) // w
            self.mixed = bool(np.any(groups[1:] == groups[:-1]))
            return
        self.starts, self.counts = runs(self.codes)
        unit = self.codes[self.starts]
        self.env, self.group = unit % w - 1, unit // w
        self.mixed = bool(np.any(self.group[1:] == self.group[:-1]))
        k = int(self.counts[0]) if self.counts.size else 0
        if k and k * self.counts.size == n and bool((self.counts == k).all()):
            self.size = k

    def sorted_values(self, x: np.ndarray) -> np.ndarray:
        """x (one value per sample of idx) sorted within each unit: rows of a matrix sorted
        row by row (numpy sorts short rows by insertion), padded with +inf when the units'
        sizes differ."""
        assert self.starts is not None
        if self.size:
            return np.sort(x.reshape(-1, self.size), axis=1).ravel()
        width = int(self.counts.max()) if self.counts.size else 0
        if not x.size or self.starts.size * width > 2 * x.size + 64 or np.isnan(x).any():
            return x[sort_within_groups(x, self.codes)]
        if self._grid is None:  # where each value goes in the grid, and where it is after
            row = np.repeat(np.arange(self.starts.size), self.counts)
            into = row * width + np.arange(x.size) - self.starts[row]
            out = np.flatnonzero(np.arange(width) < self.counts[:, None])
            self._grid = into, out
        into, out = self._grid
        grid = np.full(self.starts.size * width, np.inf)
        grid[into] = x
        return np.sort(grid.reshape(self.starts.size, width), axis=1).ravel()[out]


def _where(selected: np.ndarray | None, values: np.ndarray, fill: float) -> np.ndarray:
    """The selected values, `fill` elsewhere; None selects every value (nothing to mask)."""
    return values if selected is None else np.where(selected, values, fill)


def _bincount_mean(cells: np.ndarray, values: np.ndarray, size: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(mean of the values per cell, NaN for none; how many). A cell whose sum overflows
    (max / median ratios of huge lengths) is summed again divided by its largest |value|,
    unless one of its own values is infinite: decided per cell, so that a cell's mean never
    depends on the other steps of the pass."""
    n = np.bincount(cells, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = np.bincount(cells, weights=values, minlength=size) / n
        over = (n > 0) & ~np.isfinite(mean)
        if over.any():
            infinite = ~np.isfinite(values)
            if infinite.any():
                over &= np.bincount(cells[infinite], minlength=size) == 0
        if over.any():
            scale = np.ones(size)
            np.maximum.at(scale, cells, np.where(over[cells], np.abs(values), 0.0))
            scale[~over] = 1.0
            scaled = np.bincount(cells, weights=values / scale[cells], minlength=size) / n
            mean[over] = scaled[over] * scale[over]
    mean[n == 0] = NAN
    return mean, n


class Out:
    """Collects per-cell statistic arrays under (kind, key, stat); NaN = no value. The masks
    and the NaN for values beyond float64 are applied to all of them at once, in `table`."""

    def __init__(self, cells: Cells) -> None:
        self.cells = cells
        self.stats: dict[Family, tuple[np.ndarray, np.ndarray | None]] = {}
        self.only: np.ndarray | None = None  # cells a metric may have values in (its steps)

    def put(self, kind: str, key: str, stat: str, values: np.ndarray,
            where: np.ndarray | None = None) -> None:
        keep = self.only if where is None else (where if self.only is None else where & self.only)
        self.stats[(kind, key, stat)] = (np.asarray(values, dtype=np.float64), keep)

    def table(self) -> Table:
        s, w = self.cells.samples, self.cells.width
        if not self.stats:
            return Table([], np.zeros((s.n_steps, 0)))
        families = list(self.stats)
        v = np.stack([values for values, _ in self.stats.values()])
        masked = [(i, keep) for i, (_, keep) in enumerate(self.stats.values())
                  if keep is not None]
        if masked:
            keep = np.ones(v.shape, dtype=bool)
            keep[[i for i, _ in masked]] = np.stack([k for _, k in masked])
            v[~keep] = NAN
        v[np.isinf(v)] = NAN  # a value beyond float64 (a std over 1.3e308): no point, not inf
        grid = v.reshape(len(families), s.n_steps, w)
        envs: list[str | None] = [None, *s.env_names]
        family, env = np.nonzero(~np.isnan(grid).all(axis=1))  # family by family, envs in order
        keys: list[SeriesKey] = [(*families[f], envs[e])
                                 for f, e in zip(family.tolist(), env.tolist(), strict=True)]
        return Table(keys, np.ascontiguousarray(grid[family, :, env].T))


def _per_code(s: StepSamples, ranges: dict[str, EnvRanges], pick: Bound, default: float):
    """One declared bound per env code, `default` where undeclared; index -1 = no environment."""
    found = [pick(ranges.get(name, EnvRanges())) for name in s.env_names]
    return np.array([default if b is None else b for b in found] + [default], dtype=np.float64)


def _metric_bound(m: str, attr: str) -> Bound:
    return lambda r: getattr(r.metrics.get(m, MetricRange()), attr)


def _pct(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(whole > 0, 100.0 * part / np.maximum(whole, 1), NAN)


def _moments(out: Out, kind: str, key: str, x: np.ndarray, mask: np.ndarray,
             prefix: str = "", n: np.ndarray | None = None, every: bool = False) -> None:
    for stat, v in out.cells.moments(x, mask, n, every).items():
        out.put(kind, key, prefix + stat, v)


@dataclass
class Selection:
    """The kept samples with a finite value of a column: mask, indices (None: every sample),
    count per cell; `same`: they are all the kept samples (what most columns select)."""

    mask: np.ndarray
    idx: np.ndarray | None
    n: np.ndarray
    same: bool


def _finite_kept(c: Cells, v: np.ndarray) -> Selection:
    finite = np.isfinite(v)
    if c.all_kept:
        if bool(finite.all()):
            return Selection(finite, None, c.n_all, True)
        return Selection(finite, np.flatnonzero(finite), c.count(finite), False)
    finite &= c.kept
    if bool(np.array_equal(finite, c.kept)):
        return Selection(c.kept, c.kept_idx, c.n_kept, True)
    return Selection(finite, np.flatnonzero(finite), c.count(finite), False)


def _value_family(out: Out, kind: str, key: str, v: np.ndarray, lo_by_code: np.ndarray
                  ) -> Selection:
    """Reward / sample-metric stats: moments, count, Gini mean and exclusions, null count.
    Returns the samples they were taken over."""
    c = out.cells
    sel = _finite_kept(c, v)
    out.put(kind, key, "count", sel.n, c.has_kept)
    _moments(out, kind, key, v, sel.mask, n=sel.n, every=sel.idx is None)
    gini, n_in, n_out = c.group_means(_shifted(c.samples, v, sel.idx, lo_by_code), sel.idx,
                                      gini_per_group)
    out.put(kind, key, "gini_mean", gini, c.has_kept)
    out.put(kind, key, "gini_excluded", n_out, c.has_kept & (n_in + n_out > 0))
    out.put(kind, key, "null_count", c.n_kept - sel.n, c.has_kept & (c.scope == 0))
    return sel


def _shifted(s: StepSamples, v: np.ndarray, idx: np.ndarray | None, lo_by_code: np.ndarray
             ) -> np.ndarray:
    """v − lo for the Gini (the finite values of samples idx, None: all), which no positive
    scale changes: when that overflows for some value (1e308 above a bound of −1e308),
    (v − lo)/2 for every sample of that value's group, computed as v/2 − lo/2. One bound
    for every environment is a scalar (+0, the default, leaves v as it is: v − 0 is v, bit
    for bit)."""
    x = v if idx is None else v[idx]
    if bool((lo_by_code == lo_by_code[0]).all()):
        lo: np.ndarray | float = float(lo_by_code[0])
        if lo == 0.0 and not np.signbit(lo):
            return x  # finite values: v − (+0) = v, −0 included
    else:
        lo = s.by_env(lo_by_code) if idx is None else lo_by_code[s.env[idx]]
    with np.errstate(over="ignore"):
        shifted = x - lo
    overflow = ~np.isfinite(shifted)
    if not overflow.any():
        return shifted
    group = s.group if idx is None else s.group[idx]  # (codes unique across steps)
    halve = np.isin(group, group[overflow])  # its groups only: no other step's Gini moves
    shifted[halve] = x[halve] / 2 - (lo if isinstance(lo, float) else lo[halve]) / 2
    return shifted


def _normalized_family(out: Out, kind: str, key: str, v: np.ndarray) -> None:
    """The normalized family from v′ (see ingest.core.normalize): mean, std, min, max and Gini mean
    (on v′, floor 0), overall and per environment, stored with stats `norm:<stat>`."""
    c = out.cells
    sel = _finite_kept(c, v)
    _moments(out, kind, key, v, sel.mask, PREFIX, n=sel.n, every=sel.idx is None)
    x = v if sel.idx is None else v[sel.idx]
    out.put(kind, key, PREFIX + "gini_mean", c.group_means(x, sel.idx, gini_per_group)[0])


def _ranges_family(out: Out, key: str, v: np.ndarray, lo_by_code: np.ndarray,
                   hi_by_code: np.ndarray) -> None:
    """Share at the declared min / max and count outside, over samples whose env declares."""
    if np.isnan(lo_by_code).all() and np.isnan(hi_by_code).all():
        return
    c = out.cells
    lo, hi = lo_by_code[c.samples.env], hi_by_code[c.samples.env]
    use = c.kept & np.isfinite(v)
    has_lo, has_hi = use & ~np.isnan(lo), use & ~np.isnan(hi)
    n_lo, n_hi = c.count(has_lo), c.count(has_hi)
    out.put("ranges", key, "at_min_pct", _pct(c.count(has_lo & (v == lo)), n_lo))
    out.put("ranges", key, "at_max_pct", _pct(c.count(has_hi & (v == hi)), n_hi))
    outside = c.count(has_lo & (v < lo)) + c.count(has_hi & (v > hi))
    out.put("ranges", key, "outside_count", outside, (n_lo > 0) | (n_hi > 0))


def _groups_family(out: Out, lo_by_code: np.ndarray, hi_by_code: np.ndarray) -> None:
    """Groups of kept samples with finite reward: count, informative, tied, all at min / max.

    A group belongs to the environment of its first sample.
    """
    c, s = out.cells, out.cells.samples
    idx = _finite_kept(c, s.reward).idx
    group = s.group if idx is None else s.group[idx]
    if group.size > 1 and bool(np.any(group[1:] < group[:-1])):
        order = np.argsort(group, kind="stable")  # stable: a group's first sample leads
        idx = order if idx is None else idx[order]
        group = group[order]
    starts, _ = runs(group)
    r = s.reward if idx is None else s.reward[idx]
    if starts.size:
        gmin, gmax = np.minimum.reduceat(r, starts), np.maximum.reduceat(r, starts)
    else:
        gmin = gmax = np.zeros(0)
    first = starts if idx is None else idx[starts]
    genv = s.env[first]
    tied = gmin == gmax
    w = c.width
    cells = np.concatenate([s.step_index[first] * w,
                            (s.step_index[first] * w + 1 + genv)[genv >= 0]])
    in_env = genv >= 0
    masks = {
        "count": np.ones(starts.size, dtype=bool),
        "informative": ~tied,
        "tied": tied,
        "all_min": tied & (gmin == lo_by_code[genv]),
        "all_max": tied & (gmax == hi_by_code[genv]),
    }
    for stat, sel in masks.items():
        both = np.concatenate([sel, sel[in_env]])
        out.put("groups", "groups", stat, np.bincount(cells[both], minlength=c.size), c.has_kept)


def _tokens(s: StepSamples) -> dict[str, np.ndarray]:
    cols: dict[str, np.ndarray] = {}
    if s.prompt_tokens is not None:
        cols["prompt_tokens"] = s.prompt_tokens
    if s.completion_tokens is not None:
        cols["completion_tokens"] = s.completion_tokens
    if s.prompt_tokens is not None and s.completion_tokens is not None:
        both = np.isfinite(s.prompt_tokens) & np.isfinite(s.completion_tokens)
        total = np.full(s.n, np.nan)
        np.add(s.prompt_tokens, s.completion_tokens, out=total, where=both)
        cols["total_tokens"] = total
    return cols


def _length_groups(out: Out) -> None:
    """Completion-token Gini (lo = 0) and max / median ratio, over kept samples per group."""
    c, s = out.cells, out.cells.samples
    if s.completion_tokens is None:
        return
    idx = _finite_kept(c, s.completion_tokens).idx
    x = s.completion_tokens if idx is None else s.completion_tokens[idx]
    gini = c.group_means(x, idx, gini_per_group)[0]
    ratio = c.group_means(x, idx, max_median_ratio_per_group)[0]
    out.put("rollouts", "group_length_gini_mean", "group_length_gini_mean", gini)
    out.put("rollouts", RATIO, RATIO, ratio)


def _rollouts_family(out: Out, tokens: dict[str, np.ndarray]) -> None:
    """Token moments, stop-by-length share, length groups, off-policy lag; kept samples."""
    c, s = out.cells, out.cells.samples
    for key, col in tokens.items():
        sel = _finite_kept(c, col)
        _moments(out, "rollouts", key, col, sel.mask, n=sel.n, every=sel.idx is None)
    if s.stop_length is not None:
        stop = c.kept & np.isfinite(s.stop_length)
        pct = _pct(c.count(stop & (s.stop_length == 1)), c.count(stop))
        out.put("rollouts", "stop_reason_length_pct", "stop_reason_length_pct", pct)
    if s.off_policy_steps is not None:
        lag = c.moments(s.off_policy_steps, c.kept & np.isfinite(s.off_policy_steps))
        out.put("rollouts", "off_policy_steps", "mean", lag["mean"])
        out.put("rollouts", "off_policy_steps", "std", lag["std"])
    _length_groups(out)


def _discarded_family(out: Out, tokens: dict[str, np.ndarray]) -> None:
    """Count by reason, zero-advantage reward breakdown, canceled, token stats of discards.
    Every step has the overall counts; an environment only when it has discarded samples."""
    c, s = out.cells, out.cells.samples
    discarded = s.discard != KEPT
    shown = c.present & ((c.scope == 0) | (c.count(discarded) > 0))
    n_async, n_zero = c.count(s.discard == MAX_ASYNC), c.count(s.discard == ZERO_ADVANTAGE)
    count = n_async + n_zero
    d = ("discarded", "discarded")
    out.put(*d, "count", count, shown)
    out.put(*d, "canceled", c.count(s.discard == CANCELED), shown)
    out.put(*d, "max_async_pct", _pct(n_async, count), shown)
    out.put(*d, "zero_advantage_pct", _pct(n_zero, count), shown)
    za = (s.discard == ZERO_ADVANTAGE) & np.isfinite(s.reward)
    n_za = c.count(za)
    z = ("discarded", "zero_advantage")
    out.put(*z, "reward_zero_pct", _pct(c.count(za & (s.reward == 0)), n_za), shown)
    out.put(*z, "reward_positive_pct", _pct(c.count(za & (s.reward > 0)), n_za), shown)
    out.put(*z, "reward_mean", c.mean(s.reward, za), shown & (n_za > 0))
    for key, col in tokens.items():
        for stat, v in c.moments(col, discarded & np.isfinite(col)).items():
            out.put("discarded", key, stat, v, shown)


def aggregate_steps(s: StepSamples, ranges: dict[str, EnvRanges],
                    observed: Observed | None = None) -> Table:
    """Every per-step series of docs/statistics.md "Families",
    and the normalized family of the reward and each sample metric, for every step of `s`.

    `ranges` maps environment name to its declared ranges (a missing name declares nothing);
    `observed` holds the run's observed ranges (used where a bound is not declared; without
    them the samples' own values stand in). Keys are (kind, key, stat, env) with env None for
    all samples.
    """
    out = Out(Cells(s))
    reward_min = _per_code(s, ranges, lambda r: r.reward_min, NAN)
    reward_max = _per_code(s, ranges, lambda r: r.reward_max, NAN)
    reward_lo = np.where(np.isnan(reward_min), DEFAULT_LO, reward_min)
    reward_hi = np.where(np.isnan(reward_max), DEFAULT_HI, reward_max)
    seen = observed if observed is not None else _observed_here(s)
    _value_family(out, "reward", "reward", s.reward, reward_lo)
    _ranges_family(out, "reward", s.reward, reward_min, reward_max)
    for m, v in s.metrics.items():
        if s.metric_steps is not None:
            out.only = s.metric_steps[m][out.cells.step_of_cell]
        m_min = _per_code(s, ranges, _metric_bound(m, "min"), NAN)
        m_max = _per_code(s, ranges, _metric_bound(m, "max"), NAN)
        _value_family(out, "sample", m, v, np.where(np.isnan(m_min), 0.0, m_min))
        _ranges_family(out, m, v, m_min, m_max)
    _normalized_families(out, ranges, seen)
    if s.advantage is not None:
        _moments(out, "advantage", "advantage", s.advantage,
                 out.cells.kept & np.isfinite(s.advantage))
    _groups_family(out, reward_lo, reward_hi)
    tokens = _tokens(s)
    _rollouts_family(out, tokens)
    _discarded_family(out, tokens)
    return out.table()


def normalized_steps(s: StepSamples, ranges: dict[str, EnvRanges],
                     observed: Observed | None = None) -> Table:
    """The normalized family alone (the columns `aggregate_steps` gives it, with the same
    values): what an observed range's widening changes."""
    out = Out(Cells(s))
    _normalized_families(out, ranges, observed if observed is not None else _observed_here(s))
    return out.table()


def _normalized_families(out: Out, ranges: dict[str, EnvRanges], seen: Observed) -> None:
    """The normalized family of the reward and of each sample metric (a metric only at the
    steps that carried it)."""
    s = out.cells.samples
    out.only = None
    _normalized_family(out, "reward", "reward",
                       normalized_column(s, s.reward, "reward", "reward", ranges, seen))
    for m, v in s.metrics.items():
        if s.metric_steps is not None:
            out.only = s.metric_steps[m][out.cells.step_of_cell]
        _normalized_family(out, "sample", m, normalized_column(s, v, "sample", m, ranges, seen))
    out.only = None


def aggregate_step(s: StepSamples, ranges: dict[str, EnvRanges],
                   observed: Observed | None = None) -> dict[SeriesKey, float]:
    """`aggregate_steps` of one step, as {(kind, key, stat, env): float}."""
    return aggregate_steps(s, ranges, observed).row(0)


def _observed_here(s: StepSamples) -> Observed:
    codes = np.where(s.env < 0, len(s.env_names), s.env)  # -1: no environment, ''
    return observed_in([*s.env_names, ""], codes, s.discard == KEPT,
                       [("reward", "reward", s.reward),
                        *(("sample", m, v) for m, v in s.metrics.items())])


def aggregate_blobs(blobs_by_step: list[list[bytes]], ranges: dict[str, EnvRanges],
                    observed: Observed | None = None, norm_only: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, Table]:
    """Unpack, assemble and aggregate the stored batches of some steps: (samples per step,
    latest sample time per step (NaN: none carried one), table; with `norm_only`, of the
    normalized family alone). Pure, so it also runs in a worker process
    (ingest.pipeline.materialize)."""
    samples, latest = columns.assemble_steps([[columns.unpack(b) for b in blobs]
                                              for blobs in blobs_by_step])
    n = np.bincount(samples.step_index, minlength=samples.n_steps)
    aggregate = normalized_steps if norm_only else aggregate_steps
    return n, latest, aggregate(samples, ranges, observed)

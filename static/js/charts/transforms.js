// @ts-check
// Pure numeric transforms of chart data (no DOM, no Plotly): smoothing (EMA, running mean,
// Gaussian), outlier bounds, time axis, the y autoscale rule, and merging live points into
// (possibly downsampled) arrays.
// (Normalization is the server's: see charts/normalized.js.)
// Tested with `node --test tests/js/`.

export const SPAN_MIN = 2;
export const SPAN_MAX = 100;
export const SPAN_DEFAULT = 10;
export const OUTLIER_K = 6;

/** Span clamped to [2, 100] (integer); anything unparsable gives the default 10. */
export function clampSpan(span) {
  const n = Math.round(Number(span));
  if (!Number.isFinite(n)) return SPAN_DEFAULT;
  return Math.min(SPAN_MAX, Math.max(SPAN_MIN, n));
}

/** Whether point i enters a smoothing window: accepted (or no mask) and finite. */
const accepted = (values, accept, i) => (accept === null || accept[i]) && Number.isFinite(values[i]);

export function emaAlpha(span) {
  return 2 / (clampSpan(span) + 1);
}

/**
 * Exponential moving average, α = 2/(span+1), seeded with the first accepted value.
 * `accept[i] === false` (an outlier, the ignored first step) leaves the state unchanged, and
 * the output there carries the previous EMA (null before the seed). Non-finite values are
 * never accepted.
 */
export function ema(values, span, accept = null) {
  const alpha = emaAlpha(span);
  const out = new Array(values.length);
  /** @type {number | null} */
  let state = null;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (accepted(values, accept, i)) {
      state = state === null ? v : alpha * v + (1 - alpha) * state;
    }
    out[i] = state;
  }
  return out;
}

// ------------------------------------------------------------- smoothing
// The page's smoothing, one of three, each over the points of a run's line as drawn (after the
// max step / time limits and the ignored first step), `span` (2–100) setting its window.
// `accept[i] === false` (an outlier, the ignored first step) and non-finite values never enter
// a window. Definitions: docs/statistics.md, "Smoothing".

/** The smoothing kinds, in the order the control lists them, with their names in words. */
export const SMOOTHERS = Object.freeze({ ema: 'EMA', mean: 'running mean', gauss: 'Gaussian' });
export const SMOOTHING_DEFAULT = 'ema';

/** A smoothing kind, or the default for anything else. */
export function checkSmoothing(kind) {
  return typeof kind === 'string' && Object.hasOwn(SMOOTHERS, kind) ? kind : SMOOTHING_DEFAULT;
}

/** The page's smoothing in words (`page.smoothing`): what a smoothed line is called. */
export function smoothingName(page) {
  return SMOOTHERS[checkSmoothing(page?.smoothing)];
}

/**
 * Running (trailing) mean: at i, the mean of the last `span` accepted values up to and including
 * i; fewer at the start (the mean of those there are). A rejected point carries the mean of
 * the previous point (null before the first accepted value).
 */
export function runningMean(values, span, accept = null) {
  const n = clampSpan(span);
  const out = new Array(values.length);
  const last = [];
  /** @type {number | null} */
  let mean = null;
  for (let i = 0; i < values.length; i++) {
    if (accepted(values, accept, i)) {
      last.push(values[i]);
      if (last.length > n) last.shift();
      // Summed afresh (at most 100 values): a sliding sum would drift by float rounding.
      mean = last.reduce((a, b) => a + b, 0) / last.length;
    }
    out[i] = mean;
  }
  return out;
}

/**
 * Gaussian kernel smoothing, centred: at i, the weighted mean of the accepted values at
 * indices j with |j − i| ≤ h, h = ⌊span / 2⌋, weights exp(−(j − i)² / (2σ²)), σ = h / 2 (the
 * window is ±2σ). Near the ends the window is cut and the weights of the points there are
 * renormalized; a rejected point gets the mean of its accepted neighbours (null when none is
 * within h).
 */
export function gaussian(values, span, accept = null) {
  const half = Math.floor(clampSpan(span) / 2);
  const sigma = half / 2;
  const weights = new Array(half + 1);
  for (let d = 0; d <= half; d++) weights[d] = Math.exp(-(d * d) / (2 * sigma * sigma));
  const ok = values.map((_, i) => accepted(values, accept, i));
  const out = new Array(values.length);
  for (let i = 0; i < values.length; i++) {
    let num = 0;
    let den = 0;
    const lo = Math.max(0, i - half);
    const hi = Math.min(values.length - 1, i + half);
    for (let j = lo; j <= hi; j++) {
      if (!ok[j]) continue;
      const w = weights[Math.abs(j - i)];
      num += w * values[j];
      den += w;
    }
    out[i] = den > 0 ? num / den : null;
  }
  return out;
}

/** The smoothed line of `values` by `kind` (SMOOTHERS; anything else: EMA). */
export function smooth(kind, values, span, accept = null) {
  const k = checkSmoothing(kind);
  if (k === 'mean') return runningMean(values, span, accept);
  if (k === 'gauss') return gaussian(values, span, accept);
  return ema(values, span, accept);
}

/** Quantile of an ascending array with linear interpolation (numpy's default method). */
export function quantile(sorted, q) {
  const n = sorted.length;
  if (n === 0) return NaN;
  const pos = (n - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/**
 * Outlier bounds [Q1 − k·IQR, Q3 + k·IQR] of the finite values (k = 6), or null with fewer
 * than four finite values (too few to call anything an outlier).
 */
export function outlierBounds(values, k = OUTLIER_K) {
  const finite = [];
  for (const v of values) if (Number.isFinite(v)) finite.push(v);
  if (finite.length < 4) return null;
  finite.sort((a, b) => a - b);
  const q1 = quantile(finite, 0.25);
  const q3 = quantile(finite, 0.75);
  const iqr = q3 - q1;
  return { lo: q1 - k * iqr, hi: q3 + k * iqr, q1, q3 };
}

/** true where a value is finite and inside `bounds` (null bounds accept every finite value). */
export function acceptMask(values, bounds) {
  return values.map((v) => Number.isFinite(v) && (bounds === null || (v >= bounds.lo && v <= bounds.hi)));
}

/** Time of the run's first step: the time of the point with the smallest step. */
export function firstStepTime(steps, times) {
  let best = -1;
  for (let i = 0; i < steps.length; i++) if (best < 0 || steps[i] < steps[best]) best = i;
  return best < 0 ? null : { step: steps[best], time: times[best] };
}

export const TIME_UNITS = [
  { unit: 's', seconds: 1 },
  { unit: 'min', seconds: 60 },
  { unit: 'h', seconds: 3600 },
];

/** A readable unit for a time span in seconds: s below 2 min, min below 2 h, else h. */
export function timeUnit(spanSeconds) {
  if (!(spanSeconds >= 120)) return TIME_UNITS[0];
  if (spanSeconds < 7200) return TIME_UNITS[1];
  return TIME_UNITS[2];
}

/** x values of the time axis: seconds since the end of the first step (t0), in `unit`. */
export function timeAxis(times, t0, unit = TIME_UNITS[0]) {
  return times.map((t) => (t - t0) / unit.seconds);
}

/** Min and max of the finite numbers of several arrays (nulls skipped); null if none. */
export function extent(...arrays) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const arr of arrays) {
    if (!arr) continue;
    for (const v of arr) {
      if (v === null || !Number.isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : null;
}

/**
 * Telescope's autoscale padding of a y extent: max(10% of its span, 5% of |max|, 1e-10) on
 * both sides, so a flat line still gets a visible band around it.
 */
export function autoscalePad([lo, hi]) {
  return Math.max(0.1 * (hi - lo), 0.05 * Math.abs(hi), 1e-10);
}

/**
 * [lo, hi] widened on both sides by autoscalePad.
 * @param {number[]} range [lo, hi]
 */
export function padRange([lo, hi]) {
  const pad = autoscalePad([lo, hi]);
  return [lo - pad, hi + pad];
}

/**
 * The autoscaled y-range of an extent (null stays null): zero joins the extent first when
 * `includeZero` (advantage charts, stacked counts), then padRange.
 */
export function autoscale(ext, { includeZero = false } = {}) {
  if (!ext) return null;
  const [lo, hi] = includeZero ? [Math.min(ext[0], 0), Math.max(ext[1], 0)] : ext;
  return padRange([lo, hi]);
}

/** Min and max of the positive finite numbers of several arrays (a log axis); null if none. */
export function positiveExtent(...arrays) {
  return extent(...arrays.map((arr) => (arr ? arr.filter((v) => v > 0) : null)));
}

// ------------------------------------------------------------- series arrays

const COLUMNS = ['step', 'time', 'value', 'bmin', 'bmax'];

/** A fresh series {step, time, value, bmin, bmax, downsampled} from an API payload. */
export function fromPayload(p) {
  const down = Boolean(p.downsampled && p.bucket_min && p.bucket_max);
  return {
    step: Array.from(p.step),
    time: Array.from(p.time),
    value: Array.from(p.value),
    bmin: down ? Array.from(p.bucket_min) : null,
    bmax: down ? Array.from(p.bucket_max) : null,
    downsampled: down,
  };
}

/** Index of the first element of ascending `arr` that is ≥ x. */
export function lowerBound(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function removeAt(s, i) {
  for (const c of COLUMNS) if (s[c]) s[c].splice(i, 1);
}

function insertAt(s, i, step, time, value) {
  s.step.splice(i, 0, step);
  s.time.splice(i, 0, time);
  s.value.splice(i, 0, value);
  if (s.bmin) {
    s.bmin.splice(i, 0, value);
    s.bmax.splice(i, 0, value);
  }
}

/**
 * Upsert live points {step, time, value} into a step-sorted series, in place; a null value
 * withdraws the point at that step. In a downsampled series a point that falls strictly
 * inside a bucket (between two kept points) only widens that bucket's band; points after the
 * last one are appended. When the series grows beyond 2·maxPoints, buckets are merged
 * pairwise (compact) so it stays bounded. Returns the number of changed points.
 */
export function mergePoints(s, pts, maxPoints = Infinity) {
  let changed = 0;
  const n = pts.step.length;
  for (let k = 0; k < n; k++) {
    const step = pts.step[k];
    const value = pts.value[k];
    const time = pts.time[k];
    const i = lowerBound(s.step, step);
    const exact = i < s.step.length && s.step[i] === step;
    // A string is a categorical value (never banded: such series are not downsampled).
    if (value === null || value === undefined || (typeof value !== 'string' && !Number.isFinite(value))) {
      if (exact) {
        removeAt(s, i);
        changed++;
      }
      continue;
    }
    if (exact) {
      s.value[i] = value;
      s.time[i] = time;
      if (s.bmin) {
        s.bmin[i] = Math.min(s.bmin[i], value);
        s.bmax[i] = Math.max(s.bmax[i], value);
      }
    } else if (s.downsampled && i > 0 && i < s.step.length) {
      s.bmin[i - 1] = Math.min(s.bmin[i - 1], value);
      s.bmax[i - 1] = Math.max(s.bmax[i - 1], value);
    } else {
      insertAt(s, i, step, time, value);
    }
    changed++;
  }
  if (s.step.length > 2 * maxPoints) compact(s);
  return changed;
}

/**
 * Halve a series by merging neighbouring points pairwise, keeping every extreme in the band
 * (bmin/bmax) and, alternately, the lower and the higher of each pair as the drawn point (as
 * min/max downsampling does). The newest point is kept exact.
 */
export function compact(s) {
  const n = s.step.length;
  if (n < 3) return s;
  const bmin = s.bmin || s.value;
  const bmax = s.bmax || s.value;
  const out = { step: [], time: [], value: [], bmin: [], bmax: [] };
  let pair = 0;
  for (let i = 0; i < n - 1; i += 2) {
    const j = i + 1 < n - 1 ? i + 1 : i;
    const pickHigh = pair++ % 2 === 1;
    const a = s.value[i];
    const b = s.value[j];
    const k = (pickHigh ? b > a : b < a) ? j : i;
    out.step.push(s.step[k]);
    out.time.push(s.time[k]);
    out.value.push(s.value[k]);
    out.bmin.push(Math.min(bmin[i], bmin[j]));
    out.bmax.push(Math.max(bmax[i], bmax[j]));
  }
  out.step.push(s.step[n - 1]);
  out.time.push(s.time[n - 1]);
  out.value.push(s.value[n - 1]);
  out.bmin.push(bmin[n - 1]);
  out.bmax.push(bmax[n - 1]);
  Object.assign(s, out, { downsampled: true });
  return s;
}

/**
 * The overview series with the points of [lo, hi] replaced by finer `detail` points (zoom).
 * A new object; neither input changes.
 */
export function spliceDetail(overview, detail, lo, hi) {
  const a = lowerBound(overview.step, lo);
  const b = lowerBound(overview.step, hi + 1);
  const banded = Boolean(overview.bmin || detail.bmin);
  const band = (s, c) => s[c] || s.value;
  const part = (s, c, from, to) => (c === 'bmin' || c === 'bmax' ? band(s, c) : s[c]).slice(from, to);
  const out = { downsampled: overview.downsampled || detail.downsampled };
  for (const c of COLUMNS) {
    if ((c === 'bmin' || c === 'bmax') && !banded) {
      out[c] = null;
      continue;
    }
    out[c] = part(overview, c, 0, a).concat(part(detail, c), part(overview, c, b));
  }
  return out;
}

/** Indices of points kept by the page's max step / max time limits (time in seconds since t0). */
export function limitIndices(s, { maxStep = null, maxTime = null, t0 = null } = {}) {
  const keep = [];
  for (let i = 0; i < s.step.length; i++) {
    if (maxStep !== null && s.step[i] > maxStep) continue;
    if (maxTime !== null && t0 !== null && s.time[i] - t0 > maxTime) continue;
    keep.push(i);
  }
  return keep;
}

/** The columns of a series at `idx` (null band columns stay null). */
export function pick(s, idx) {
  const out = { downsampled: s.downsampled };
  for (const c of COLUMNS) out[c] = s[c] ? idx.map((i) => s[c][i]) : null;
  return out;
}

/** Values of `std` (a series) aligned to the steps of `steps`; null where std has no point. */
export function alignByStep(steps, std) {
  const at = new Map();
  for (let i = 0; i < std.step.length; i++) at.set(std.step[i], std.value[i]);
  return steps.map((st) => (at.has(st) ? at.get(st) : null));
}

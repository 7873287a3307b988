// @ts-check
// Pure figure building: what one chart draws (Plotly traces and layout) from the series of
// every overlaid run, the chart's own settings and the page controls. No DOM, no Plotly.
// A normalized chart gets its runs' normalized series (already 0–1, from the server): values
// are drawn as they come, never rescaled here.

import {
  acceptMask, alignByStep, autoscale, extent, limitIndices, outlierBounds, padRange, pick,
  positiveExtent, smooth, smoothingName, timeAxis, timeUnit,
} from './transforms.js';
import { escapePlotly } from '../core/text.js';

/** Colours of the lines a run's chart tells apart (series of a plot, environments). */
export const SERIES_COLORS = ['#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#edc948', '#76b7b2', '#ff9da7',
  '#9c755f', '#4e79a7', '#bab0ac'];
const NEAR = 90; // RGB distance under which two colours read as one

const rgb = (hex) => (/^#[0-9a-f]{6}$/i.test(hex) ? [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)) : null);

/** How far apart two '#rrggbb' colours are (RGB distance; Infinity when one is not a colour). */
export function colorDistance(a, b) {
  const [x, y] = [rgb(a), rgb(b)];
  return x && y ? Math.hypot(x[0] - y[0], x[1] - y[1], x[2] - y[2]) : Infinity;
}

/** Colour of line `i` of a run's chart: the run's own first, then a palette without its like. */
export function seriesColor(i, runColor) {
  if (i === 0) return runColor;
  const rest = SERIES_COLORS.filter((c) => colorDistance(c, runColor) >= NEAR);
  return rest[(i - 1) % rest.length];
}

// ------------------------------------------------------------------ numbers on the y axis

/**
 * How a y axis writes its numbers, its ticks and its hover alike (Plotly's d3-format strings:
 * the traces' hovertemplate `%{y}` takes the axis' hoverformat, so a tooltip never says
 * 0.000001 where the axis says 1µ): whole numbers for an integer axis, SI prefixes for very
 * large or small magnitudes, else plain digits. `range`: the axis' [lo, hi] (log10 of them on a
 * log axis, `log`), null when unknown.
 */
export function numberFormat(range, { integer = false, log = false } = {}) {
  if (integer && !log) return { tickformat: ',d', hoverformat: ',.6~g' };
  const ends = range ? (log ? range.map((v) => 10 ** v) : range) : [1, 1];
  const m = Math.max(Math.abs(ends[0]), Math.abs(ends[1]));
  if (m >= 1e5 || (m > 0 && m < 1e-3)) return { tickformat: '~s', hoverformat: '.4~s' };
  return { tickformat: ',~g', hoverformat: ',.6~g' };
}

/** Spans up to this many units tick every one (or two) exactly: Plotly would tick halves. */
const SMALL_INTEGER_SPAN = 10;

/** Tick settings of an integer axis over `range`: a whole step ≥ 1 when the span is small. */
export function integerTicks(range) {
  if (!range) return {};
  const span = range[1] - range[0];
  if (!(span <= SMALL_INTEGER_SPAN)) return {};
  return { tickmode: 'linear', tick0: 0, dtick: span <= 6 ? 1 : 2 };
}

/** Whether every drawn value of the prepared runs is a whole number (a counter, a 0/1 flag). */
export function wholeValues(prepared) {
  let any = false;
  for (const p of prepared) {
    for (const v of p.y) {
      if (v === null || !Number.isFinite(v)) continue;
      if (!Number.isInteger(v)) return false;
      any = true;
    }
  }
  return any;
}

/** '#rrggbb' → 'rgba(r,g,b,a)'. */
export function withAlpha(hex, alpha) {
  const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex || '');
  if (!m) return `rgba(128,128,128,${alpha})`;
  return `rgba(${parseInt(m[1], 16)},${parseInt(m[2], 16)},${parseInt(m[3], 16)},${alpha})`;
}

export function polygon(x, lo, hi) {
  return { x: x.concat(x.slice().reverse()), y: hi.concat(lo.slice().reverse()) };
}

/** The points of one run after limits and first-step skipping, with outliers, EMA and band. */
export function prepareRun(run, chart, page) {
  const s = run.data;
  if (!s || s.step.length === 0) return null;
  const t0 = run.t0 ?? (s.time.length ? s.time[0] : 0);
  const maxTime = page.maxTime === null || page.maxTime === undefined ? null : page.maxTime * 3600;
  let idx = limitIndices(s, { maxStep: page.maxStep ?? null, maxTime, t0 });
  const first = run.firstStep ?? s.step[0];
  if (chart.ignoreFirst && idx.length && s.step[idx[0]] === first) idx = idx.slice(1);
  const d = pick(s, idx);
  const y = d.value;
  const bounds = chart.ignoreOutliers ? outlierBounds(y) : null;
  const accept = acceptMask(y, bounds);
  const emaY = page.ema ? smooth(page.smoothing, y, page.span, accept) : null; // EMA, mean or Gaussian
  let band = null;
  if (chart.band && run.std) {
    const sd = alignByStep(d.step, run.std);
    const keep = sd.map((v, i) => v !== null && Number.isFinite(y[i]));
    const at = (arr) => arr.filter((_, i) => keep[i]);
    band = { step: at(d.step), time: at(d.time), accept: at(accept),
      lo: at(y.map((v, i) => v - (sd[i] ?? 0))), hi: at(y.map((v, i) => v + (sd[i] ?? 0))) };
  }
  return { run, t0, step: d.step, time: d.time, y, bmin: d.bmin, bmax: d.bmax, bounds, accept,
    ema: emaY, band, downsampled: d.downsampled };
}

export function xOf(p, page, unit, step, time) {
  return page.xaxis === 'time' ? timeAxis(time, p.t0, unit) : step;
}

/** @returns {PlotlyTrace[]} */
export function lineTraces(p, x, page) {
  const name = escapePlotly(p.run.name);
  const color = p.run.color;
  const out = [];
  if (p.bmin && p.downsampled) {
    out.push({ type: 'scatter', mode: 'lines', ...polygon(x, p.bmin, p.bmax), fill: 'toself',
      fillcolor: withAlpha(color, 0.12), line: { width: 0 }, hoverinfo: 'skip', showlegend: false,
      meta: { run: p.run.id, role: 'extremes' }, uid: `r${p.run.id}-extremes` });
  }
  if (p.band) {
    const bx = xOf(p, page, p.unit, p.band.step, p.band.time);
    out.push({ type: 'scatter', mode: 'lines', ...polygon(bx, p.band.lo, p.band.hi), fill: 'toself',
      fillcolor: withAlpha(color, 0.18), line: { width: 0 }, hoverinfo: 'skip', showlegend: false,
      meta: { run: p.run.id, role: 'band' }, uid: `r${p.run.id}-band` });
  }
  const mode = x.length < 3 ? 'lines+markers' : 'lines';
  out.push({ type: 'scatter', mode, x, y: p.y, name, line: { color, width: page.ema ? 1 : 1.6 },
    marker: { color, size: 5 }, opacity: page.ema ? 0.3 : 1, hovertemplate: '%{y}',
    meta: { run: p.run.id, role: 'raw' }, uid: `r${p.run.id}-raw` });
  if (p.ema) {
    out.push({ type: 'scatter', mode, x, y: p.ema, name: `${name} ${smoothingName(page)}`, line: { color, width: 2 },
      marker: { color, size: 5 }, hovertemplate: '%{y}', meta: { run: p.run.id, role: 'ema' },
      uid: `r${p.run.id}-ema` });
  }
  return out;
}

/** The values of `arr` inside its own outlier bounds (all of them when it has too few). */
function withoutOutliers(arr) {
  const b = outlierBounds(arr);
  return b ? arr.filter((v) => v >= b.lo && v <= b.hi) : arr;
}

/**
 * Finite values that decide the y-range: accepted points only when outliers are ignored (a
 * composed chart's min/max envelope, `p.envelope`, then by its own outlier bounds).
 */
function rangeValues(p) {
  const envelope = p.envelope ?? [];
  if (p.bounds) {
    const ok = (arr) => arr.filter((_, i) => p.accept[i]);
    const okBand = (arr) => (p.band ? arr.filter((_, i) => p.band.accept[i]) : null);
    return [ok(p.y), p.ema, okBand(p.band?.lo), okBand(p.band?.hi), ...envelope.map(withoutOutliers)];
  }
  return [p.y, p.ema, p.downsampled ? p.bmin : null, p.downsampled ? p.bmax : null, p.band?.lo, p.band?.hi,
    ...envelope];
}

/** Declared bounds as dotted lines (raw values only), and the zero line of advantage. */
export function referenceShapes(prepared, entry, normalized, theme) {
  const shapes = [];
  const line = (y, dash) => ({ type: 'line', xref: 'paper', x0: 0, x1: 1, yref: 'y', y0: y, y1: y,
    line: { color: theme.muted, width: 1, dash }, layer: 'below' });
  if (!normalized) {
    const seen = new Set();
    for (const p of prepared) {
      const r = p.run.range;
      if (!r || r.source !== 'declared') continue;
      for (const v of [r.min, r.max]) {
        if (Number.isFinite(v) && !seen.has(v)) {
          seen.add(v);
          shapes.push(line(v, 'dot'));
        }
      }
    }
  }
  if (entry.kind === 'advantage') shapes.push(line(0, 'solid'));
  return shapes;
}

/**
 * The y-range, Telescope's autoscale: the extent of what is drawn (accepted points only when
 * outliers are ignored), the declared bounds and, with `includeZero` (advantage, stacked
 * counts), zero; padded by transforms.autoscalePad. A normalized chart spans 0–1 at least.
 * y min / max replace their end. Log y: the same rule in decades, over positive values. Null
 * (Plotly's autorange) only when nothing is drawn. (A flat counter keeps Telescope's tiny
 * range: its integer ticks, yAxisWords, say "0", not ±100p.) A `percent` axis whose values lie
 * within 0–100 % is not padded past them: a share of 100 % throughout shows no 104 %. An
 * `integer` axis whose padded range would hold a single whole number (a flat counter at 4:
 * 3.8–4.2, one "4" tick) spans one more on each side (3–5: "3", "4", "5"); a flat 0 keeps its
 * tiny range.
 */
export function yAxisRange(prepared, chart, { normalized = false, shapes = [], includeZero = false, percent = false,
  integer = false } = {}) {
  const values = prepared.flatMap(rangeValues);
  if (!normalized) values.push(shapes.map((s) => s.y0));
  const given = (v) => v !== null && v !== undefined && Number.isFinite(v);
  if (chart.logY) {
    const pos = positiveExtent(...values);
    let [lo, hi] = pos ? padRange(pos.map(Math.log10)) : [null, null];
    if (given(chart.yMin) && chart.yMin > 0) lo = Math.log10(chart.yMin);
    if (given(chart.yMax) && chart.yMax > 0) hi = Math.log10(chart.yMax);
    return lo !== null && hi !== null && hi > lo ? [lo, hi] : null;
  }
  let ext = extent(...values);
  if (normalized) ext = ext ? [Math.min(0, ext[0]), Math.max(1, ext[1])] : [0, 1];
  let [lo, hi] = autoscale(ext, { includeZero }) ?? [null, null];
  if (integer && ext && !normalized && !(ext[0] === 0 && ext[1] === 0) && Math.floor(hi) - Math.ceil(lo) < 1) {
    [lo, hi] = [Math.floor(ext[0]) - 1, Math.ceil(ext[1]) + 1];
  }
  if (percent && ext && !normalized && ext[0] >= 0 && ext[1] <= 100 && hi - lo > 1e-9) {
    [lo, hi] = [Math.max(lo, 0), Math.min(hi, 100)];
  }
  if (given(chart.yMin)) lo = chart.yMin;
  if (given(chart.yMax)) hi = chart.yMax;
  return lo !== null && hi !== null && hi > lo ? [lo, hi] : null;
}

/**
 * A dot on the last point of a run's main line (its EMA when drawn), in the run's colour with
 * a ring of the background; null when the line has no finite point.
 */
export function lastPointTrace(p, x, theme) {
  const y = p.ema ?? p.y;
  for (let i = y.length - 1; i >= 0; i--) {
    if (y[i] === null || !Number.isFinite(y[i])) continue;
    return { type: 'scatter', mode: 'markers', x: [x[i]], y: [y[i]], hoverinfo: 'skip', showlegend: false,
      marker: { color: p.run.color, size: 7, line: { color: theme.bg, width: 1.5 } },
      meta: { run: p.run.id, role: 'last' }, uid: `r${p.run.id}-last` };
  }
  return null;
}

/**
 * A y axis' words and numbers: its unit as its title (when one is known) and numberFormat's
 * formats, whole-number ticks when `integer`.
 */
export function yAxisWords(yRange, { unit = '', integer = false, log = false } = {}, theme = {}) {
  return { ...numberFormat(yRange, { integer, log }), ...(integer && !log ? integerTicks(yRange) : {}),
    ...(unit ? { title: { text: escapePlotly(unit), standoff: 4, font: { size: 10, color: theme.muted } } } : {}) };
}

// The y axis' labels as Plotly picks them for a chart's plot (210 px high, 30 px of margins:
// axes.prepTicks, about one tick per 40 px, a step of 1, 2 or 5 x 10^n) and their widths at
// 10 px (DejaVu Sans: digits 6.4 px; fonts of other systems are narrower), so that the left
// margin is wide enough from the first draw: a margin Plotly's automargin has to push redraws
// the whole chart (plots.doAutoMargin: a second _doPlot, ~2x a first draw; 2 of the demo's 8
// first-screen charts did).
const Y_AXIS_PX = 180;
const MARGIN_L = 44;
const CHAR_PX = { '.': 3.2, ',': 3.2, '-': 8.4, '\u2212': 8.4, '\u00b5': 6.4 };
const LETTER_PX = 9.7; // an SI prefix: at most an m's width
const SI = ['y', 'z', 'a', 'f', 'p', 'n', '\u00b5', 'm', '', 'k', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'];
const SIX = new Intl.NumberFormat('en-US', { maximumSignificantDigits: 6 });
const PLAIN = new Intl.NumberFormat('en-US', { maximumSignificantDigits: 6, useGrouping: false });
const WHOLE = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** A tick's label as d3-format writes it with numberFormat's tickformat (',d', ',~g', '~s'). */
export function tickLabel(v, tickformat) {
  if (tickformat === ',d') return WHOLE.format(Math.round(v));
  if (tickformat !== '~s' || v === 0) return SIX.format(v);
  const k = Math.max(-8, Math.min(8, Math.floor(Math.log10(Math.abs(Number(v.toPrecision(6)))) / 3)));
  return `${PLAIN.format(v / 10 ** (3 * k))}${SI[k + 8]}`;
}

/** A label's width in px at 10 px (an upper bound of the usual fonts'). */
export function labelWidth(text) {
  let w = 0;
  for (const c of text) w += CHAR_PX[c] ?? (c >= '0' && c <= '9' ? 6.4 : LETTER_PX);
  return w;
}

/**
 * The left margin (px) of a linear y axis over `yRange` with numberFormat's labels, and its
 * unit's title when `unit`: what Plotly's automargin would push it to (the widest label, its
 * 10 px from the plot, the title's 11), at least the charts' 44. An axis that is log or not
 * known keeps 44 (Plotly pushes it when it must, as before).
 */
export function leftMargin(yRange, { integer = false, log = false, unit = '' } = {}) {
  const span = yRange ? yRange[1] - yRange[0] : NaN;
  if (log || !(span > 0) || !Number.isFinite(span)) return MARGIN_L;
  let dtick = integer ? integerTicks(yRange).dtick : undefined;
  if (!dtick) {
    const rough = span / (Math.min(9, Math.max(4, Y_AXIS_PX / 40)) + 1);
    const base = 10 ** Math.floor(Math.log10(rough));
    dtick = base * ([2, 5, 10].find((m) => m >= rough / base) ?? 10);
  }
  const { tickformat } = numberFormat(yRange, { integer, log });
  let widest = 0;
  const first = Math.ceil(yRange[0] / dtick - 1e-9);
  for (let k = first; k <= yRange[1] / dtick + 1e-9 && k < first + 50; k++) {
    widest = Math.max(widest, labelWidth(tickLabel(k * dtick, tickformat)));
  }
  return Math.max(MARGIN_L, Math.ceil(widest + 10 + (unit ? 11 : 0)));
}

/**
 * The layout every line chart shares (axes, theme, hover), with its y-range and shapes; `y`:
 * what the y axis shows, {unit, integer} (yAxisWords).
 * @returns {PlotlyLayout}
 */
export function baseLayout({ chart, page, theme, unit, yRange, zoom, shapes, y = {} }) {
  const axis = { gridcolor: theme.grid, linecolor: theme.grid, zeroline: false, automargin: true,
    tickfont: { size: 10 } };
  return {
    margin: { l: leftMargin(yRange, { ...y, log: Boolean(chart.logY) }), r: 10, t: 6, b: 24 },
    autosize: true,
    paper_bgcolor: 'rgba(0,0,0,0)',
    plot_bgcolor: 'rgba(0,0,0,0)',
    font: { color: theme.fg, size: 11, family: theme.font },
    showlegend: false,
    hovermode: 'x unified',
    hoverlabel: { bgcolor: theme.bg, bordercolor: theme.grid, font: { color: theme.fg } },
    xaxis: { ...axis, ticksuffix: page.xaxis === 'time' ? ` ${unit.unit}` : '',
      ...(zoom?.x ? { range: zoom.x, autorange: false } : { autorange: true }) },
    yaxis: { ...axis, type: chart.logY ? 'log' : 'linear', exponentformat: 'SI',
      ...yAxisWords(yRange, { ...y, log: Boolean(chart.logY) }, theme),
      ...(yRange ? { range: yRange, autorange: false } : { autorange: true }) },
    shapes,
  };
}

/**
 * The figure of one chart: {data, layout, points}. `runs`: [{id, name, color, data, std,
 * range, t0, firstStep}] (data/std are series objects or null); `chart`: per-chart settings;
 * `page`: {xaxis, ema, span, maxStep, maxTime (h)}; `zoom`: {x?, y?} user ranges;
 * `normalized`: the runs' series are normalized twins (0–1, no declared bounds drawn); `axis`:
 * {unit, integer} of the y axis (the registry's; integer too when every value drawn is whole).
 */
export function buildFigure({ entry, runs, chart, page, theme, zoom = null, normalized = false, axis = {} }) {
  const prepared = runs.map((r) => prepareRun(r, chart, page)).filter(Boolean);
  let span = 0;
  for (const p of prepared) {
    for (const t of p.time) span = Math.max(span, t - p.t0);
  }
  const unit = timeUnit(span);
  const fills = [];
  const lines = [];
  const dots = [];
  let points = 0;
  for (const p of prepared) {
    p.unit = unit;
    points += p.y.length;
    const x = xOf(p, page, unit, p.step, p.time);
    for (const t of lineTraces(p, x, page)) (t.fill ? fills : lines).push(t);
    const dot = lastPointTrace(p, x, theme);
    if (dot) dots.push(dot);
  }
  const data = fills.concat(lines, dots); // every band under every line, the dots on top
  const shapes = referenceShapes(prepared, entry, normalized, theme);
  const ax = /** @type {{unit?: string, integer?: boolean}} */ (axis);
  const y = { unit: normalized ? '' : ax.unit ?? '', integer: !normalized && (Boolean(ax.integer) || wholeValues(prepared)) };
  const yRange = zoom?.y ?? yAxisRange(prepared, chart, { normalized, shapes, includeZero: entry.kind === 'advantage',
    percent: y.unit === '%', integer: y.integer });
  const layout = baseLayout({ chart, page, theme, unit, yRange, zoom, shapes, y });
  return { data, layout, points, unit, prepared };
}

// @ts-check
// Pure figure building of a Custom view plot: several series (metrics, statistics,
// environments; any mix), every overlaid run's, on a left and, when needed, a right y axis.
// One run: each series its own colour (the first the run's). Several runs: each run its colour
// (runs are told apart first), each series its dash. A series set to `auto` goes on the right
// when its values are AXIS_RATIO times larger or smaller than the first left series'. Only a
// plot of one series draws its ± std band. No DOM.

import {
  baseLayout, lastPointTrace, lineTraces, prepareRun, referenceShapes, seriesColor, wholeValues, xOf, yAxisRange,
  yAxisWords,
} from '../charts/traces.js';
import { describeSeries } from '../core/registry.js';
import { escapePlotly } from '../core/text.js';
import { smoothingName, timeUnit } from '../charts/transforms.js';

export { colorDistance, SERIES_COLORS, seriesColor } from '../charts/traces.js';

export const AXIS_RATIO = 10;
const DASHES = ['solid', 'dot', 'dash', 'longdash', 'dashdot', 'longdashdot'];

/** The largest |value| among the accepted points of prepared runs (null when none). */
export function magnitude(prepared) {
  let m = null;
  for (const p of prepared) {
    p.y.forEach((v, i) => {
      if (p.accept[i] && v !== null && Number.isFinite(v)) m = Math.max(m ?? 0, Math.abs(v));
    });
  }
  return m;
}

/**
 * The side of each series: 'left' or 'right'. `axes`: each series' choice (auto, left,
 * right); `mags`: its magnitude (null: no data yet, 0: all zero — both fit anywhere). An auto
 * series goes right when its scale is AXIS_RATIO× off the reference: the first series on the
 * left with a scale.
 */
export function assignAxes(axes, mags) {
  const ref = axes.map((a, i) => (a !== 'right' && mags[i] ? mags[i] : null)).find((m) => m !== null) ?? null;
  return axes.map((a, i) => {
    if (a !== 'auto') return a;
    const m = mags[i];
    if (!ref || !m) return 'left';
    const ratio = m > ref ? m / ref : ref / m;
    return ratio >= AXIS_RATIO ? 'right' : 'left';
  });
}

export const seriesDash = (i) => DASHES[i % DASHES.length];

/**
 * What one side's y axis says of the series on it: their unit when they share one, whole-number
 * ticks when every one counts (the registry's words) or every value drawn is whole.
 */
export function sideAxis(entries, prepared) {
  const infos = entries.map((e) => (e ? describeSeries(e) : null));
  const units = new Set(infos.map((i) => i?.unit ?? ''));
  const integer = infos.length > 0 && (infos.every((i) => i?.integer) || wholeValues(prepared));
  return { unit: units.size === 1 ? [...units][0] : '', integer };
}

/**
 * The figure of a plot: {data, layout, points, unit, prepared, sides}. `series`: [{id, name,
 * axis, entry}]; `runs`: [{id, name, color, t0, firstStep, lines: [{data, std, range}]}], one
 * line per series, in order; `normalized`: whether the first series is drawn normalized (its
 * range lines are then left out). `prepared` is the first series' per run (what a one-series
 * chart's is: zoom detail, notes, badges, the run legend).
 */
export function buildPlotFigure({ series, runs, chart, page, theme, zoom = null, normalized = false }) {
  const many = runs.length > 1;
  const bySeries = series.map((s, i) => runs.map((run) => {
    const color = many ? run.color : seriesColor(i, run.color);
    const std = series.length === 1 ? run.lines[i]?.std : null; // bands of several would hide each other
    const p = prepareRun({ ...run, ...run.lines[i], std }, chart, page);
    if (p) p.run = { id: run.id, name: run.name, color, range: run.lines[i]?.range ?? null };
    return p;
  }).filter(Boolean));
  const sides = assignAxes(series.map((s) => s.axis), bySeries.map(magnitude));
  let span = 0;
  for (const p of bySeries.flat()) for (const t of p.time) span = Math.max(span, t - p.t0);
  const unit = timeUnit(span);
  const fills = [];
  const lines = [];
  const dots = [];
  let points = 0;
  bySeries.forEach((preps, i) => {
    const yaxis = sides[i] === 'right' ? 'y2' : 'y';
    for (const p of preps) {
      p.unit = unit;
      points += p.y.length;
      const x = xOf(p, page, unit, p.step, p.time);
      for (const t of lineTraces(p, x, page)) {
        Object.assign(t, { yaxis, uid: `${t.uid}-s${i}`, meta: { ...t.meta, series: series[i].id } });
        if (t.line && !t.fill) t.line = { ...t.line, dash: many ? seriesDash(i) : 'solid' };
        if (t.name) t.name = escapePlotly(many ? `${p.run.name} · ${series[i].name}` : series[i].name)
          + (t.meta.role === 'ema' ? ` ${smoothingName(page)}` : '');
        (t.fill ? fills : lines).push(t);
      }
      const dot = lastPointTrace(p, x, theme);
      if (dot) dots.push(Object.assign(dot, { yaxis, uid: `${dot.uid}-s${i}`, meta: { ...dot.meta, series: series[i].id } }));
    }
  });
  const first = series[0]?.entry ?? null;
  const shapes = first && series.length === 1 ? referenceShapes(bySeries[0], first, normalized, theme) : [];
  const left = bySeries.filter((_, i) => sides[i] === 'left').flat();
  const right = bySeries.filter((_, i) => sides[i] === 'right').flat();
  const on = (side) => series.filter((_, i) => sides[i] === side).map((s) => s.entry);
  const norm = normalized && series.length === 1;
  const yLeft = norm ? {} : sideAxis(on('left'), left);
  const yRange = zoom?.y ?? yAxisRange(left, chart, { normalized: norm, shapes,
    includeZero: first?.kind === 'advantage' && sides[0] === 'left', integer: Boolean(yLeft.integer) });
  const layout = baseLayout({ chart, page, theme, unit, yRange, zoom, shapes, y: yLeft });
  if (right.length) {
    const yRight = sideAxis(on('right'), right);
    const r = yAxisRange(right, { ...chart, yMin: null, yMax: null }, { integer: yRight.integer });
    const { range, title, tickmode, tick0, dtick, ...style } = layout.yaxis; // eslint-disable-line no-unused-vars
    layout.yaxis2 = { ...style, overlaying: 'y', side: 'right', showgrid: false,
      ...yAxisWords(r, { ...yRight, log: Boolean(chart.logY) }, theme),
      ...(r ? { range: r, autorange: false } : { autorange: true }) };
    layout.margin = { ...layout.margin, r: 44 };
  }
  return { data: fills.concat(lines, dots), layout, points, unit, prepared: bySeries[0] ?? [], sides };
}

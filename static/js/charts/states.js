// @ts-check
// Pure figure building for a categorical step key (values are strings, e.g. "applied" /
// "skipped"): a state strip on the step axis, one row per run, one coloured band per run of
// equal consecutive values, a legend of each value with its count of steps. Drawn as one
// heatmap per row whose cells are the bands, so 10k steps cost one image, not 10k shapes.

import { limitIndices } from './transforms.js';
import { escapePlotly } from '../core/text.js';

/** Colours of values (Okabe–Ito, colour-blind safe), by first appearance. */
export const STATE_COLORS = ['#0072b2', '#e69f00', '#009e73', '#d55e00', '#cc79a7', '#56b4e9',
  '#f0e442', '#8c6d31', '#999999', '#7b4173'];

const ROW_HALF = 0.42; // a strip row's half height: rows of overlaid runs stay apart

const isValue = (v) => v !== null && v !== undefined && !(typeof v === 'number' && !Number.isFinite(v));

/**
 * Runs of equal consecutive values: [{value, first, last, end, n}]. A band holds from its first
 * step until the next point (a state lasts until it changes); a null value ends a band and
 * starts a gap. `end` is the band's right edge on the step axis; `n` its number of points.
 */
export function stateRuns(steps, values) {
  const out = [];
  let cur = null;
  for (let i = 0; i < steps.length; i++) {
    const v = values[i];
    if (cur) cur.end = steps[i] - 0.5;
    if (!isValue(v)) {
      cur = null;
      continue;
    }
    if (cur && cur.value === String(v)) {
      cur.last = steps[i];
      cur.n++;
    } else {
      cur = { value: String(v), first: steps[i], last: steps[i], end: null, n: 1 };
      out.push(cur);
    }
  }
  if (cur) cur.end = cur.last + 0.5;
  return out;
}

/** Steps per value, in order of first appearance: Map(value -> count). */
export function stateCounts(values) {
  const counts = new Map();
  for (const v of values) if (isValue(v)) counts.set(String(v), (counts.get(String(v)) ?? 0) + 1);
  return counts;
}

/** Every value of several runs, first run's first (so its colours do not move with overlays). */
export function valueOrder(valueLists) {
  const seen = new Set();
  for (const list of valueLists) for (const v of list) if (isValue(v)) seen.add(String(v));
  return [...seen];
}

/** A discrete Plotly colorscale: code i (of k) in colour i, for z in [−½, k − ½]. */
export function discreteScale(colors) {
  const k = colors.length;
  if (k === 1) return [[0, colors[0]], [1, colors[0]]];
  return colors.flatMap((c, i) => [[i / k, c], [(i + 1) / k, c]]);
}

/**
 * Heatmap cells of one row: x edges (one more than cells), z codes (null in a gap) and hover
 * texts. `codeOf` maps a value to its colour code.
 */
export function stripCells(bands, codeOf) {
  const x = [];
  const z = [];
  const text = [];
  for (const b of bands) {
    const left = b.first - 0.5;
    if (x.length && x.at(-1) < left) { // a gap (null values) before this band
      z.push(null);
      text.push('');
      x.push(left);
    } else if (!x.length) {
      x.push(left);
    }
    const steps = b.first === b.last ? `step ${b.first}` : `steps ${b.first}\u2013${b.last}`;
    z.push(codeOf.get(b.value));
    text.push(`${escapePlotly(b.value)} \u00b7 ${steps} (${b.n})`);
    x.push(b.end);
  }
  return { x, z, text };
}

function limited(run, page) {
  const s = run.data;
  if (!s || !s.step.length) return null;
  const t0 = run.t0 ?? s.time[0];
  const maxTime = page.maxTime === null || page.maxTime === undefined ? null : page.maxTime * 3600;
  const idx = limitIndices(s, { maxStep: page.maxStep ?? null, maxTime, t0 });
  return { run, t0, step: idx.map((i) => s.step[i]), time: idx.map((i) => s.time[i]), values: idx.map((i) => s.value[i]) };
}

/**
 * The figure of a categorical chart: {data, layout, points, prepared, legend}. `runs` as for
 * buildFigure (charts/traces.js); `legend`: [{id, name, items: [{value, color, count}]}], one per run.
 */
export function buildStateFigure({ runs, page, theme, zoom = null }) {
  const prepared = runs.map((r) => limited(r, page)).filter(Boolean);
  const order = valueOrder(prepared.map((p) => p.values));
  const codeOf = new Map(order.map((v, i) => [v, i]));
  const colors = order.map((_, i) => STATE_COLORS[i % STATE_COLORS.length]);
  const data = [];
  const legend = [];
  prepared.forEach((p, row) => {
    const cells = stripCells(stateRuns(p.step, p.values), codeOf);
    const name = escapePlotly(p.run.name);
    if (cells.z.length) {
      data.push({ type: 'heatmap', x: cells.x, y: [row - ROW_HALF, row + ROW_HALF], z: [cells.z],
        text: [cells.text], hovertemplate: `%{text}<extra>${name}</extra>`, zmin: -0.5,
        zmax: order.length - 0.5, colorscale: discreteScale(colors), showscale: false, hoverongaps: false,
        xgap: 0, name, meta: { run: p.run.id, role: 'states', values: order, colors }, uid: `r${p.run.id}-states` });
    }
    const counts = stateCounts(p.values);
    legend.push({ id: p.run.id, name: p.run.name,
      items: order.filter((v) => counts.has(v)).map((v) => ({ value: v, color: colors[codeOf.get(v)], count: counts.get(v) })) });
  });
  const n = Math.max(1, prepared.length);
  const axis = { gridcolor: theme.grid, linecolor: theme.grid, zeroline: false, automargin: true, tickfont: { size: 10 } };
  const layout = {
    // b: what Plotly's automargin pushes a strip's x labels to (24 redrew every strip once:
    // plots.doAutoMargin's second _doPlot).
    margin: { l: 44, r: 10, t: 6, b: 26 }, autosize: true,
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
    font: { color: theme.fg, size: 11, family: theme.font }, showlegend: false, hovermode: 'closest',
    hoverlabel: { bgcolor: theme.bg, bordercolor: theme.grid, font: { color: theme.fg } },
    xaxis: { ...axis, ...(zoom?.x ? { range: zoom.x, autorange: false } : { autorange: true }) },
    // First run on top; y never zooms: rows are runs, not values.
    yaxis: { ...axis, range: [n - 0.5, -0.5], autorange: false, fixedrange: true, showgrid: false, ticks: '',
      tickvals: prepared.map((_, i) => i), ticktext: prepared.map((p) => escapePlotly(p.run.name)),
      showticklabels: prepared.length > 1 },
    shapes: [],
  };
  const points = prepared.reduce((a, p) => a + p.values.filter(isValue).length, 0);
  return { data, layout, points, prepared, legend };
}

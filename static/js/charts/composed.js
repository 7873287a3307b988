// @ts-check
// Pure figure building of a composed chart (one metric, its statistics and environments): per
// run, a line for each environment shown, the ± std band and min/max envelope of one of them,
// or stacked counts, and a dot on the last point of each run's main line. A run alone: its
// all-environments line in the run's colour, each environment its own colour (envColor) and
// dash. Overlaid runs: every line in its run's colour (runs are told apart first), each
// environment its dash. Statistics differ by dash and width, the series of a timeline family
// (its parts) by dash, named by their words. No DOM, no Plotly.

import {
  baseLayout, lastPointTrace, lineTraces, polygon, prepareRun, referenceShapes, seriesColor, wholeValues, withAlpha,
  xOf, yAxisRange,
} from './traces.js';
import { partRank, partWords } from './compose.js';
import { alignByStep, smoothingName, timeUnit } from './transforms.js';
import { escapePlotly } from '../core/text.js';

const DASHES = ['dot', 'dash', 'longdash', 'dashdot', 'longdashdot'];

/** Dash of an environment's line: the pooled series solid, each environment its own dash. */
export function envDash(env, envs) {
  if (env === null || env === undefined) return 'solid';
  const i = envs.indexOf(env);
  return DASHES[(i < 0 ? 0 : i) % DASHES.length];
}

/**
 * Colour of an environment's line in a chart of one run: the pooled series (env null) the
 * run's own, each environment of `envs` (the chart's, sorted) its own, none like the run's.
 */
export function envColor(env, envs, runColor) {
  if (env === null || env === undefined) return runColor;
  const i = envs.indexOf(env);
  return seriesColor(1 + (i < 0 ? envs.length : i), runColor);
}

/** SVG stroke-dasharray of each Plotly dash, for the legend's keys. */
export const DASHARRAY = { solid: '', dot: '2,2', dash: '5,3', longdash: '9,3', dashdot: '5,2,1,2', longdashdot: '9,2,1,2' };

/** Dash of a timeline family's line (charts/compose.js timelinePart): its primary solid. */
export function partDash(rank) {
  return rank > 0 ? DASHES[(rank - 1) % DASHES.length] : 'solid';
}

const envOf = (e) => e.env ?? null;

function lineOrder(primary) {
  const key = (m) => [m.entry.key === primary.key ? 0 : 1, partRank(m.entry), m.entry.stat === primary.stat ? 0 : 1,
    envOf(m.entry) === null ? 0 : 1, m.entry.env ?? '', m.entry.stat ?? ''];
  return (a, b) => {
    const ka = key(a);
    const kb = key(b);
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
  };
}

/**
 * What a line is to the reader: the primary (`raw`, as a one-series chart), another series of
 * the chart's timeline family (`part`), an env, a statistic.
 */
function lineRole(entry, primary) {
  if (entry.key !== primary.key) return 'part';
  if (entry.stat !== primary.stat) return 'stat';
  return envOf(entry) === envOf(primary) ? 'raw' : 'env';
}

function lineDash(entry, role, envs) {
  if (partWords(entry)) return partDash(partRank(entry)); // as the legend's key of that part
  return role === 'stat' ? 'dot' : envDash(envOf(entry), envs);
}

function envelope(p, lo, hi, page) {
  const run = p.run;
  const a = lo ? alignByStep(p.step, lo) : null;
  const b = hi ? alignByStep(p.step, hi) : null;
  const keep = p.step.map((_, i) => (a ? a[i] !== null : true) && (b ? b[i] !== null : true));
  const at = (arr) => arr.filter((_, i) => keep[i]);
  const x = at(xOf(p, page, p.unit, p.step, p.time));
  if (!x.length) return null;
  const loY = a ? at(a) : at(p.y);
  const hiY = b ? at(b) : at(p.y);
  return { type: 'scatter', mode: 'lines', ...polygon(x, loY, hiY), fill: 'toself',
    fillcolor: withAlpha(run.color, 0.08), line: { width: 0.6, color: withAlpha(run.color, 0.35), dash: 'dot' },
    hoverinfo: 'skip', showlegend: false, name: 'min/max',
    meta: { run: run.id, role: 'envelope', env: envOf(p.member) }, uid: `r${run.id}-envelope`,
    _values: [loY, hiY] };
}

/** What a run's stacked counts reach at each step (their sum): the top of the stack. */
function stackTops(stacks) {
  const top = new Map();
  for (const { p } of stacks) {
    p.step.forEach((st, i) => {
      if (p.accept[i]) top.set(st, (top.get(st) ?? 0) + p.y[i]);
    });
  }
  const y = [...top.values()];
  return { y, accept: y.map(() => true), bounds: null, ema: null, band: null, downsampled: false };
}

/**
 * The figure of a composed chart: {data, layout, points, unit, prepared}. `runs`: [{id, name,
 * color, t0, firstStep, range, members: [{entry, role, data}]}] with the members
 * selectMembers chose; `primary`: the chart's naming entry; `envs`: the chart's environments;
 * `axis`: {unit, integer} of its y axis (traces.js buildFigure). `prepared` holds one entry per
 * run (its first line), as a one-series chart's does.
 */
export function buildComposedFigure({ primary, envs = [], runs, chart, page, theme, zoom = null, normalized = false,
  axis = {} }) {
  const lineChart = { ...chart, band: chart.band };
  const alone = runs.length === 1; // environments in colour; overlaid runs keep theirs
  const colorOf = (run, env) => (alone ? envColor(env, envs, run.color) : run.color);
  const perRun = [];
  let span = 0;
  for (const run of runs) {
    const lines = run.members.filter((m) => m.role === 'line' && m.data).sort(lineOrder(primary));
    const byEnv = (role, env) => run.members.find((m) => m.role === role && envOf(m.entry) === env)?.data ?? null;
    const preps = [];
    for (const m of lines) {
      const env = envOf(m.entry);
      const std = m.entry.stat === 'mean' ? byEnv('std', env) : null;
      const p = prepareRun({ ...run, color: colorOf(run, env), data: m.data, std }, lineChart, page);
      if (!p) continue;
      p.member = m.entry;
      preps.push(p);
      for (const t of p.time) span = Math.max(span, t - p.t0);
    }
    const stacks = run.members.filter((m) => m.role === 'stack' && m.data)
      .map((m) => ({ m, p: prepareRun({ ...run, color: colorOf(run, envOf(m.entry)), data: m.data },
        { ...chart, band: false }, page) }))
      .filter((s) => s.p);
    for (const s of stacks) for (const t of s.p.time) span = Math.max(span, t - s.p.t0);
    perRun.push({ run, preps, stacks, byEnv });
  }
  const unit = timeUnit(span);
  const fills = [];
  const lines = [];
  const dots = [];
  const prepared = [];
  const all = [];
  let points = 0;
  for (const { run, preps, stacks, byEnv } of perRun) {
    stacks.forEach(({ m, p }, i) => {
      p.unit = unit;
      points += p.y.length;
      fills.push({ type: 'scatter', mode: 'lines', x: xOf(p, page, unit, p.step, p.time), y: p.y,
        stackgroup: `r${run.id}`, name: escapePlotly(`${run.name} · ${m.entry.stat}`),
        line: { width: 0.6, color: p.run.color }, fillcolor: withAlpha(p.run.color, 0.12 + 0.14 * i),
        hovertemplate: `${escapePlotly(m.entry.stat)} %{y}<extra></extra>`,
        meta: { run: run.id, role: 'stack', stat: m.entry.stat, env: envOf(m.entry) }, uid: `r${run.id}-stack-${m.entry.stat}` });
      all.push(p);
      if (!preps.length && i === 0) prepared.push(p);
    });
    if (stacks.length) all.push(stackTops(stacks));
    preps.forEach((p, i) => {
      p.unit = unit;
      points += p.y.length;
      if (i === 0) prepared.push(p);
      all.push(p);
      const env = envOf(p.member);
      const role = lineRole(p.member, primary);
      const label = [run.name, env ?? (envs.length ? 'all envs' : null), role === 'stat' ? p.member.stat : null,
        partWords(p.member)].filter(Boolean).join(' · ');
      // A uid names a CSS class of Plotly's (`.cb<uid>`, looked up on a react): a word's characters only.
      const tag = `${env ?? ''}-${p.member.stat ?? ''}${role === 'part' ? `-${p.member.key}` : ''}`
        .replace(/[^\w-]/g, (c) => `_${c.charCodeAt(0).toString(16)}`);
      if (role === 'raw' || byEnv('min', env) || byEnv('max', env)) {
        const lo = byEnv('min', env);
        const hi = byEnv('max', env);
        const env2 = (lo || hi) ? envelope(p, lo, hi, page) : null;
        if (env2) {
          env2.uid += `-${tag}`;
          p.envelope = env2._values;
          delete env2._values;
          fills.push(env2);
        }
      }
      const dash = lineDash(p.member, role, envs);
      const keyed = partWords(p.member) ? { key: p.member.key } : {}; // which series of its family
      const x = xOf(p, page, unit, p.step, p.time);
      for (const t of lineTraces(p, x, page)) {
        t.meta = { ...t.meta, env, stat: p.member.stat, ...keyed };
        if (t.meta.role === 'raw' && role !== 'raw') t.meta.role = role;
        if (t.meta.role === 'band' || t.meta.role === 'extremes') {
          if (role !== 'raw') t.fillcolor = withAlpha(p.run.color, 0.1);
        } else {
          t.name = escapePlotly(t.meta.role === 'ema' ? `${label} ${smoothingName(page)}` : label);
          t.line = { ...t.line, dash, width: role === 'raw' ? t.line.width : Math.max(1, t.line.width - 0.4) };
        }
        t.uid = `${t.uid}-${tag}`;
        (t.fill ? fills : lines).push(t);
      }
      const dot = i === 0 ? lastPointTrace(p, x, theme) : null; // the run's main line only
      if (dot) dots.push(Object.assign(dot, { meta: { ...dot.meta, env, stat: p.member.stat, ...keyed } }));
    });
  }
  const data = fills.concat(lines, dots);
  const shapes = referenceShapes(prepared, primary, normalized, theme);
  const stacked = perRun.some((r) => r.stacks.length);
  const ax = /** @type {{unit?: string, integer?: boolean}} */ (axis);
  const y = { unit: normalized ? '' : ax.unit ?? '', integer: !normalized && (Boolean(ax.integer) || wholeValues(all)) };
  const yRange = zoom?.y ?? yAxisRange(all, chart, { normalized, shapes,
    includeZero: primary.kind === 'advantage' || stacked, percent: y.unit === '%', integer: y.integer });
  const layout = baseLayout({ chart, page, theme, unit, yRange, zoom, shapes, y });
  return { data, layout, points, unit, prepared };
}

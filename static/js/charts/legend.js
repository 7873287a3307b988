// @ts-check
// Chart legends. A composed chart's (All view): toggles of the ± std band and the min/max
// envelope, the environment filter, and what its lines are (the pooled series solid in the
// run's colour, each environment its own dash and, for a run alone, its own colour), these keys
// beside the controls when they fit, else on a line of their own under them (css/charts.css); a
// timeline family's, which series each dash is. Plotly's own legend would toggle traces one by one and forget it on the
// next redraw; these are chart settings, read by every redraw and every overlaid run.
// Every line chart's run legend (RunLegend): with overlaid runs, a swatch and name per run;
// hovering a run's item or line dims the other runs' traces until the pointer leaves.

import { ALL_TOGETHER, envOptions, EVERY_ENV, offers, partsOf } from './compose.js';
import { DASHARRAY, envColor, envDash, partDash } from './composed.js';
import { h } from '../core/dom.js';

/** Changes only when the chart's statistics or environments do (a rebuild is due). */
export function legendSignature(entries) {
  return JSON.stringify([offers(entries), envOptions(entries), partsOf(entries).map((p) => p.key)]);
}

function swatch() {
  return h('span', { class: 'legend-swatch', 'aria-hidden': 'true' });
}

function dashLine(dash, color = null) {
  const line = h('span', { class: 'legend-dash', 'aria-hidden': 'true', style: color ? `color:${color}` : null });
  // A fixed drawing (no user text), so innerHTML is safe; SVG needs its namespace.
  line.innerHTML = `<svg width="18" height="6"><line x1="0" y1="3" x2="18" y2="3" stroke="currentColor"
    stroke-width="1.6" stroke-dasharray="${DASHARRAY[dash]}"/></svg>`;
  return line;
}

function dashKey(env, text, named, color) {
  return h('span', { class: 'legend-item env-key', title: env ?? 'all environments together',
    dataset: { env: env ?? '', color: color ?? '' } },
  dashLine(envDash(env, named), color), h('span', { class: 'legend-name' }, text));
}

/** A timeline family's lines (charts/compose.js partsOf): each series' dash and words. */
function partKeys(entries) {
  const parts = partsOf(entries);
  return parts.length > 1 ? parts.map((p) => h('span', { class: 'legend-item part-key', dataset: { part: p.key },
    title: p.key }, dashLine(partDash(p.rank)), ` ${p.words}`)) : [];
}

/**
 * The legend's elements for a chart of `entries` (every run's) under `settings` {band, envelope,
 * env}; `onChange(name, value)` when the reader toggles or filters; `runColor`: the colour of
 * the chart's run when it is alone (its environments then drawn in colour, composed.envColor),
 * null for overlaid runs (environments told apart by dash). May reset a filter whose
 * environment is gone to every env.
 */
export function legendParts(entries, settings, label, onChange, runColor = null) {
  const has = offers(entries);
  const envs = envOptions(entries);
  const toggle = (name, text) => {
    const input = h('input', { type: 'checkbox', name, checked: Boolean(settings[name]) });
    input.addEventListener('change', () => onChange(name, input.checked));
    return h('label', { class: `legend-item ${name}` }, input, swatch(), ` ${text}`);
  };
  const parts = (has.band || has.envelope) && !envs.length ? [h('span', { class: 'legend-item mean' }, swatch(), ' mean')] : [];
  if (has.band) parts.push(toggle('band', '± std'));
  if (has.envelope) parts.push(toggle('envelope', 'min/max'));
  parts.push(...partKeys(entries));
  if (!envs.length) return parts;
  if (!envs.some((o) => o.value === settings.env)) settings.env = EVERY_ENV;
  const select = h('select', { name: 'env', 'aria-label': `Environments of ${label}` },
    ...envs.map((o) => h('option', { value: o.value, selected: o.value === settings.env }, o.label)));
  select.addEventListener('change', () => onChange('env', select.value));
  parts.push(h('label', { class: 'legend-item env' }, select));
  const named = envs.filter((o) => o.value !== EVERY_ENV && o.value !== ALL_TOGETHER).map((o) => o.value);
  const color = (env) => (runColor ? envColor(env, named, runColor) : null);
  const keys = [];
  if (entries.some((e) => (e.env ?? null) === null)) keys.push(dashKey(null, 'all', named, color(null)));
  for (const env of named) keys.push(dashKey(env, env, named, color(env)));
  parts.push(h('span', { class: 'legend-keys' }, ...keys));
  return parts;
}

// ------------------------------------------------------------ runs

/** Opacity factor of the runs not in focus. */
export const DIM = 0.15;
/** How far (px) from a run's point the pointer may be and still focus that run. */
const REACH_PX = 30;

/** The runs a chart names: [{id, name, color}], none for a single run (nothing to tell apart). */
export function runLegendItems(runs) {
  return runs.length > 1 ? runs.map((r) => ({ id: r.id, name: r.name, color: r.color })) : [];
}

/** Trace opacities with every run but `focus` dimmed; `focus` null gives them as drawn. */
export function focusOpacities(traces, focus, dim = DIM) {
  return traces.map((t) => {
    const base = t.opacity ?? 1;
    const run = t.meta?.run;
    return focus === null || run === undefined || run === focus ? base : base * dim;
  });
}

/** The run of the point nearest `y` (pixels) among [{run, y}], null when none is within reach. */
export function nearestRun(points, y, reach = REACH_PX) {
  let best = null;
  for (const p of points) {
    const d = Math.abs(p.y - y);
    if (Number.isFinite(d) && d <= reach && (!best || d < best.d)) best = { run: p.run, d };
  }
  return best ? best.run : null;
}

/**
 * The run legend of one chart card and its focus: `el` goes in the card; `drawn(fig, runs)`
 * after every draw (rebuilt only when the runs change), `attach()` after every newPlot.
 */
export class RunLegend {
  constructor(plot, label) {
    this.plot = plot;
    this.el = h('ul', { class: 'run-legend', dataset: { runLegend: '' }, hidden: true, 'aria-label': `Runs of ${label}` });
    this.sig = '';
    this.focus = null;
    this.traces = [];
    this.points = null;
    this.el.addEventListener('mouseover', (ev) => {
      const li = ev.target.closest?.('li[data-run]');
      if (li) this.setFocus(Number(li.dataset.run));
    });
    this.el.addEventListener('mouseleave', () => this.setFocus(null));
    plot.addEventListener('mousemove', (ev) => this.points && this.pick(ev));
  }

  drawn(fig, runs) {
    this.traces = fig.data.map((t) => ({ opacity: t.opacity ?? 1, meta: { run: t.meta?.run } }));
    const items = runLegendItems(runs);
    const sig = JSON.stringify(items);
    if (sig !== this.sig) {
      this.sig = sig;
      this.el.hidden = items.length === 0;
      this.el.replaceChildren(...items.map((r) => h('li', { class: 'run-item', dataset: { run: String(r.id) } },
        h('span', { class: 'run-swatch', style: `background:${r.color}`, 'aria-hidden': 'true' }), r.name)));
    }
    if (this.focus !== null) this.apply(); // a redraw drew every run at full opacity
  }

  /** Listen to Plotly's hover (its listeners go with every purge). */
  attach() {
    this.plot.on('plotly_hover', (ev) => {
      if (this.sig === '' || this.el.hidden) return;
      this.points = ev.points;
      if (ev.event) this.pick(ev.event);
    });
    this.plot.on('plotly_unhover', () => {
      this.points = null;
      this.setFocus(null);
    });
  }

  /** Focus the run whose hovered point is nearest the pointer, vertically. */
  pick(ev) {
    const top = this.plot.getBoundingClientRect().top;
    const pts = this.points.filter((p) => p.data?.meta?.run !== undefined && p.yaxis).map((p) => ({
      run: p.data.meta.run, y: top + p.yaxis._offset + p.yaxis.c2p(p.y) }));
    this.setFocus(nearestRun(pts, ev.clientY));
  }

  setFocus(run) {
    if (run === this.focus) return;
    this.focus = run;
    for (const li of this.el.children) li.classList.toggle('dimmed', run !== null && Number(li.dataset.run) !== run);
    this.apply();
  }

  apply() {
    if (!this.plot._fullLayout || this.plot.data?.length !== this.traces.length) return; // purged, or redrawn
    window.Plotly.restyle(this.plot, { opacity: focusOpacities(this.traces, this.focus) });
  }
}

// @ts-check
// From a chart to the samples behind it, to read what a curve means: a chart add-on
// (charts/addons.js) on every reward and sample-metric chart. Clicking a point opens the sample viewer at that run and step
// (/runs/<id>/samples?step=S; Ctrl/⌘-click: a new tab), and a "Samples" tool in the card's header
// opens it at the newest step. Registered in charts/features.js; a late import also attaches to the
// charts already drawn. `stepOfClick` is pure, for node tests.

import { registerAddon } from './addons.js';
import { h } from '../core/dom.js';
import { xOf } from './traces.js';

const KINDS = new Set(['reward', 'sample']);
const SKIPPED_ROLES = new Set(['band', 'extremes', 'envelope']);
const handlers = new WeakMap(); // chart -> its click handler
const figures = new WeakMap(); // chart -> its latest figure

export const linksSamples = (chart) => KINDS.has(chart?.entry?.kind);

export function samplesUrl(runId, step = null) {
  const base = `/runs/${encodeURIComponent(runId)}/samples`;
  return step === null ? base : `${base}?step=${encodeURIComponent(step)}`;
}

/**
 * The run and step a Plotly click landed on, {run, step}, or null. `points` are the click's
 * points (each trace's `meta.run` names its run); `fig` the chart's figure ({prepared, unit});
 * `page` its page settings ({xaxis}). On a step axis x is the step; on a time axis the nearest
 * drawn point of the run gives it.
 */
export function stepOfClick(points, fig, page) {
  const pt = (points || []).find((p) => p?.data?.meta?.run !== undefined && !SKIPPED_ROLES.has(p.data.meta.role));
  if (!pt || typeof pt.x !== 'number') return null;
  const run = pt.data.meta.run;
  if (page?.xaxis !== 'time') return { run, step: Math.round(pt.x) };
  const p = fig?.prepared?.find((q) => q.run?.id === run);
  if (!p || !p.step.length) return null;
  const xs = xOf(p, page, fig.unit, p.step, p.time);
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (Math.abs(xs[i] - pt.x) < Math.abs(xs[best] - pt.x)) best = i;
  return { run, step: p.step[best] };
}

function open(url, newTab) {
  if (newTab) window.open(url, '_blank', 'noopener');
  else location.assign(url);
}

/**
 * Listen for clicks on a chart's plot. Again on every draw: a chart released off-screen
 * (Plotly.purge) loses its listeners and gets new ones when it is drawn again.
 */
function attach(chart) {
  const plot = chart.plot;
  if (!plot || typeof plot.on !== 'function') return;
  let handler = handlers.get(chart);
  if (!handler) {
    handler = (ev) => {
      const fig = figures.get(chart) ?? chart.figure?.();
      const at = stepOfClick(ev?.points, fig, chart.page?.settings);
      if (at) open(samplesUrl(at.run, at.step), Boolean(ev.event?.ctrlKey || ev.event?.metaKey));
    };
    handlers.set(chart, handler);
  }
  plot.removeListener?.('plotly_click', handler);
  plot.on('plotly_click', handler);
  plot.classList.add('links-samples');
}

registerAddon({
  tools(chart) {
    if (!linksSamples(chart)) return null;
    return h('button', { type: 'button', class: 'tool', dataset: { samplesLink: '' },
      title: 'Read the samples: the newest step (or click a point for its step)',
      'aria-label': `Samples of ${chart.entry.key}`,
      onclick: (ev) => {
        const run = chart.page?.runs?.[0];
        if (run) open(samplesUrl(run.id ?? run.info?.id), ev.ctrlKey || ev.metaKey);
      } }, 'Samples');
  },
  drawn(chart, fig) {
    if (!linksSamples(chart)) return;
    figures.set(chart, fig);
    attach(chart);
  },
});

// Imported after the charts were drawn (a late import): attach to those on the page now.
if (typeof document !== 'undefined') {
  /** @type {NodeListOf<ChartElement>} */
  const cards = document.querySelectorAll('.chart');
  for (const el of cards) {
    if (el.chart?.rendered && linksSamples(el.chart)) attach(el.chart);
  }
}

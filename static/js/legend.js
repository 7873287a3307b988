// The legend of a composed chart (All view): what its lines are (the pooled series solid, each
// environment its own dash), toggles of the ± std band and the min/max envelope, and the
// environment filter. Plotly's own legend would toggle traces one by one and forget it on the
// next redraw; these are chart settings, read by every redraw and every overlaid run.

import { ALL_TOGETHER, envOptions, EVERY_ENV, offers } from './compose.js';
import { DASHARRAY, envDash } from './composed.js';
import { h } from './dom.js';

/** Changes only when the chart's statistics or environments do (a rebuild is due). */
export function legendSignature(entries) {
  return JSON.stringify([offers(entries), envOptions(entries)]);
}

function swatch() {
  return h('span', { class: 'legend-swatch', 'aria-hidden': 'true' });
}

function dashKey(env, text, named) {
  const line = h('span', { class: 'legend-dash', 'aria-hidden': 'true' });
  // A fixed drawing (no user text), so innerHTML is safe; SVG needs its namespace.
  line.innerHTML = `<svg width="18" height="6"><line x1="0" y1="3" x2="18" y2="3" stroke="currentColor"
    stroke-width="1.6" stroke-dasharray="${DASHARRAY[envDash(env, named)]}"/></svg>`;
  return h('span', { class: 'legend-item env-key', dataset: { env: env ?? '' } }, line, ` ${text}`);
}

/**
 * The legend's elements for a chart of `entries` (every run's) under `settings` {band, envelope,
 * env}; `onChange(name, value)` when the reader toggles or filters. May reset a filter whose
 * environment is gone to every env.
 */
export function legendParts(entries, settings, label, onChange) {
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
  if (!envs.length) return parts;
  if (!envs.some((o) => o.value === settings.env)) settings.env = EVERY_ENV;
  const select = h('select', { name: 'env', 'aria-label': `Environments of ${label}` },
    ...envs.map((o) => h('option', { value: o.value, selected: o.value === settings.env }, o.label)));
  select.addEventListener('change', () => onChange('env', select.value));
  parts.push(h('label', { class: 'legend-item env' }, 'env ', select));
  const named = envs.filter((o) => o.value !== EVERY_ENV && o.value !== ALL_TOGETHER).map((o) => o.value);
  if (entries.some((e) => (e.env ?? null) === null)) parts.push(dashKey(null, 'all', named));
  for (const env of named) parts.push(dashKey(env, env, named));
  return parts;
}

// @ts-check
// A run's environments with their declared ranges: weight, reward range and each
// sample metric's range; a bound not declared is taken from what the run observes.

import { h } from '../core/dom.js';

const num = (v) => (v === null || v === undefined ? null : Number(v).toLocaleString('en-US', { maximumSignificantDigits: 6 }));

/** "0 – 2", "≥ 0 (max observed)", "observed" for a range with neither bound declared. */
export function rangeText(min, max) {
  const lo = num(min);
  const hi = num(max);
  if (lo !== null && hi !== null) return `${lo} – ${hi}`;
  if (lo !== null) return `≥ ${lo} (max observed)`;
  if (hi !== null) return `≤ ${hi} (min observed)`;
  return 'observed';
}

export function renderEnvironments(root, environments) {
  if (!environments?.length) {
    root.replaceChildren(h('p', { class: 'muted' }, 'No environments declared: ranges are taken from what the run '
      + 'observes. Declare them with telescope declare-ranges or connect(…, environments=…).'));
    return;
  }
  const rows = environments.map((env) => {
    const metrics = Object.entries(env.metrics_ranges || {});
    return h('tr', { dataset: { env: env.name } },
      h('th', { scope: 'row' }, env.name),
      h('td', { class: 'num' }, num(env.weight) ?? '—'),
      h('td', { class: 'num' }, rangeText(env.reward_min, env.reward_max)),
      h('td', {}, metrics.length
        ? h('ul', { class: 'env-metrics' }, ...metrics.map(([name, r]) => h('li', {},
          h('code', {}, name), ` ${rangeText(r.min, r.max)}`, r.invert ? ' (inverted)' : '')))
        : h('span', { class: 'muted' }, '—')));
  });
  root.replaceChildren(h('table', { class: 'env-table' },
    h('thead', {}, h('tr', {}, ...['Environment', 'Weight', 'Reward range', 'Metric ranges'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, ...rows)));
}

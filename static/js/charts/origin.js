// @ts-check
// Where a timing chart's numbers come from. The server derives `timing_*` series from the run's
// events (catalog kind `timeline`); a trainer may log step keys of the same names itself. Both
// are drawn, titled alike by the registry (DESIGN "Where the time goes"), and a badge in the
// header tells them apart: a derived chart always says so; a trainer's chart says "logged" only
// when the derived chart of its name is on the page too.

import { h } from '../core/dom.js';

/** The badges: text and tooltip, per catalog kind. */
export const ORIGINS = Object.freeze({
  timeline: { kind: 'timeline', text: 'derived',
    title: 'Derived by the server from the run\u2019s events (catalog kind timeline)' },
  step: { kind: 'step', text: 'logged',
    title: 'Logged by the trainer as a step key; the chart of the same title badged \u201cderived\u201d is computed from the run\u2019s events' },
});

/**
 * The origin badge of a chart of `entry` ({kind, text, title}), or null: a derived series
 * always has one, a trainer's key when `twinShown` (the derived chart of its key is shown).
 */
export function originOf(entry, twinShown = false) {
  if (entry.kind === 'timeline') return ORIGINS.timeline;
  if (entry.kind === 'step' && twinShown) return ORIGINS.step;
  return null;
}

/** Show `origin` (originOf) in a chart's header, after its title and "?": add, change or hide it. */
export function showOrigin(chart, origin) {
  if (!origin && !chart.originBadge) return;
  if (!chart.originBadge) {
    chart.originBadge = h('span', { class: 'badge origin-badge' });
    chart.el.querySelector('.chart-tools')?.before(chart.originBadge);
  }
  const badge = chart.originBadge;
  badge.hidden = !origin;
  badge.dataset.origin = origin?.kind ?? '';
  badge.textContent = origin?.text ?? '';
  badge.title = origin?.title ?? '';
}

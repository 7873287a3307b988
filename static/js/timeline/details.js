// @ts-check
// A clicked span's fields (name, source, lane, step, start, duration, status, tokens, its
// sample) and the link to the sample viewer. `spanFields` and `sampleUrl` are pure (node
// tests); `renderDetails` fills the page's panel.

import { h } from '../core/dom.js';
import { spanText } from './window.js';

/**
 * The sample viewer of the step a span belongs to (/runs/<id>/samples?step=S: the viewer
 * opens a step), null when the span names no sample. A generation's step is the policy
 * step that produced it; without one the viewer opens at the newest step.
 * @param {number} runId
 * @param {Record<string, any>} span  an event record (eventAt)
 */
export function sampleUrl(runId, span) {
  if (span.sample_id === null || span.sample_id === undefined || span.sample_id === '') return null;
  const base = `/runs/${encodeURIComponent(runId)}/samples`;
  const step = span.step;
  return typeof step === 'number' && Number.isInteger(step) ? `${base}?step=${step}` : base;
}

/** Local date and time to the millisecond (a span's bounds). */
export function clockText(t) {
  if (!Number.isFinite(t)) return '—';
  const d = new Date(t * 1000);
  const pad = (v, n = 2) => String(v).padStart(n, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `
    + `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** One event of the API's columns as a plain record. */
export function eventAt(events, i) {
  const out = {};
  for (const [k, col] of Object.entries(events)) out[k] = col[i] ?? null;
  return out;
}

/**
 * The rows the details panel shows for an event record, [label, text] in order; fields the
 * event does not have are left out. `origin` (unix s): the axis's zero, shown beside the start.
 * @param {Record<string, any>} e
 * @param {number} origin
 * @returns {[string, string][]}
 */
export function spanFields(e, origin) {
  /** @type {[string, string][]} */
  const out = [['Name', String(e.name)], ['Source', String(e.source ?? 'trainer')]];
  const add = (label, v) => {
    if (v !== null && v !== undefined && v !== '') out.push([label, String(v)]);
  };
  add('Rank', e.rank);
  add('Server', e.server);
  add('Slot', e.slot);
  add('Step', e.step);
  out.push(['Start', `${clockText(e.start)} (+${(e.start - origin).toFixed(3)} s)`]);
  if (e.end === null || e.end === undefined) out.push(['Duration', 'instant']);
  else out.push(['Duration', spanText(e.end - e.start)]);
  add('Status', e.name === 'generation' ? (e.status ?? 'normal') : e.status);
  add('Tokens', e.tokens);
  add('Sample', e.sample_id);
  add('Group', e.group_id);
  return out;
}

/**
 * Fill `panel` with an event's fields and its sample link (or the hint when `e` is null).
 * @param {HTMLElement} panel
 * @param {Record<string, any> | null} e
 * @param {number} origin
 * @param {number} runId
 */
export function renderDetails(panel, e, origin, runId) {
  if (!e) {
    panel.replaceChildren(h('p', { class: 'muted' },
      'Click a span to see its fields: name, lane, step, start, duration, status, tokens and its sample.'));
    delete panel.dataset.span;
    return;
  }
  const dl = h('dl', { class: 'span-fields' });
  for (const [label, text] of spanFields(e, origin)) {
    dl.append(h('dt', {}, label), h('dd', { dataset: { field: label.toLowerCase() } }, text));
  }
  const url = sampleUrl(runId, e);
  panel.replaceChildren(h('h2', {}, String(e.name)), dl);
  if (url) panel.append(h('a', { class: 'button-link sample-link', href: url }, 'Open its sample in the sample viewer'));
  panel.dataset.span = String(e.name);
}

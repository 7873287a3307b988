// @ts-check
// The Metrics page's view state in its URL, so that a copied link opens the same view in a
// fresh browser (PROTOCOL §6; the parameters: docs/protocol.md, "Page URLs"). Pure (no DOM,
// no storage): URLSearchParams in, settings out, and back. Every read is checked; a
// hand-edited or stale value takes its default, and nothing here throws.
//
// Per-chart settings (the All view's) travel in the URL too, as `chart=<id>!<name>:<value>,…`
// holding only what differs from the chart's defaults: a link then carries its whole view with
// no account or server state (reading is open on loopback, without sign-in), and a view of a
// few changed charts stays a short URL.

import { formatDuration, parseDuration } from '../core/duration.js';
import { checkPage } from './prefs.js';
import { SPAN_DEFAULT, SMOOTHERS, SMOOTHING_DEFAULT } from './transforms.js';

/**
 * The page controls' parameters, each written only when it differs from its default; `x=step`
 * too in a link to copy (`marker`), which then holds the view whatever the browser stored.
 */
export const PAGE_PARAMS = Object.freeze(['x', 'smooth', 'span', 'norm', 'maxstep', 'maxtime', 'q', 're']);
export const CHART_PARAM = 'chart';
/** At most this many charts' settings are read from one URL (the rest are ignored). */
export const MAX_CHARTS = 500;
const MAX_ID = 1000;
const MAX_ENV = 200;

/** A chart setting's name in the URL, and how its value is written and read back. */
const CHART_FIELDS = Object.freeze({
  ignoreOutliers: 'outliers', ignoreFirst: 'first', logY: 'log', band: 'band', envelope: 'minmax',
  yMin: 'lo', yMax: 'hi', env: 'env',
});
const FIELD_OF = Object.fromEntries(Object.entries(CHART_FIELDS).map(([k, v]) => [v, k]));
const BOOL_FIELDS = new Set(['ignoreOutliers', 'ignoreFirst', 'logY', 'band', 'envelope']);

const truthy = (v) => v === '1' || v === 'true';

/** Whether a URL's parameters hold a view (then it wins over the stored settings). */
export function hasView(params) {
  return PAGE_PARAMS.some((k) => params.has(k)) || params.has(CHART_PARAM);
}

/** The page settings a URL's parameters hold (charts/prefs.js checkPage: all of them valid). */
export function pageFromParams(params) {
  const get = (k) => params.get(k) ?? '';
  const smooth = get('smooth');
  const span = get('span');
  const maxStep = get('maxstep');
  const maxTime = parseDuration(get('maxtime'));
  return checkPage({
    xaxis: get('x'),
    ema: Object.hasOwn(SMOOTHERS, smooth),
    smoothing: smooth,
    span: span === '' ? undefined : span, // clamped to 2–100; unreadable: the default
    normalize: truthy(get('norm')),
    maxStep: maxStep === '' ? null : maxStep, // unreadable or negative: no limit
    maxTime: maxTime.ok && maxTime.seconds !== null ? maxTime.seconds / 3600 : null,
    search: get('q'),
    regex: truthy(get('re')),
  });
}

/**
 * Write page settings `s` into `params` (in place): what differs from the defaults, and with
 * `marker` the x axis whatever it is.
 */
export function pageToParams(params, s, marker = false) {
  for (const k of PAGE_PARAMS) params.delete(k);
  if (marker || s.xaxis === 'time') params.set('x', s.xaxis === 'time' ? 'time' : 'step');
  if (s.ema) params.set('smooth', Object.hasOwn(SMOOTHERS, s.smoothing) ? s.smoothing : SMOOTHING_DEFAULT);
  if (s.span !== SPAN_DEFAULT) params.set('span', String(s.span));
  if (s.normalize) params.set('norm', '1');
  if (s.maxStep !== null && s.maxStep !== undefined) params.set('maxstep', String(s.maxStep));
  if (s.maxTime !== null && s.maxTime !== undefined) params.set('maxtime', formatDuration(s.maxTime * 3600));
  if (s.search) params.set('q', s.search);
  if (s.regex) params.set('re', '1');
  return params;
}

/** One chart's overrides as `<id>!<name>:<value>,…` (booleans 1/0; an env's `%` and `,` escaped). */
export function encodeChart(id, diff) {
  const parts = [];
  for (const [field, name] of Object.entries(CHART_FIELDS)) {
    if (!Object.hasOwn(diff, field)) continue;
    const v = diff[field];
    if (BOOL_FIELDS.has(field)) parts.push(`${name}:${v ? 1 : 0}`);
    else if (field === 'env') parts.push(`${name}:${String(v).replace(/[%,]/g, encodeURIComponent)}`);
    else parts.push(`${name}:${v === null ? '' : String(v)}`);
  }
  return `${id}!${parts.join(',')}`;
}

/**
 * [id, overrides] of one `chart=` value, or null when it names no chart. A setting that cannot
 * be read (an unknown name, a value of the wrong kind) is left out: the chart's default then.
 * @returns {[string, Record<string, unknown>] | null}
 */
export function decodeChart(text) {
  const cut = text.indexOf('!'); // a series id has none (its parts are percent-encoded)
  const id = cut < 0 ? '' : text.slice(0, cut);
  if (!id || id.length > MAX_ID || !id.includes('|')) return null;
  /** @type {Record<string, unknown>} */
  const diff = {};
  for (const part of text.slice(cut + 1).split(',')) {
    const colon = part.indexOf(':');
    const field = colon < 0 ? undefined : FIELD_OF[part.slice(0, colon)];
    if (field === undefined) continue;
    const v = part.slice(colon + 1);
    if (BOOL_FIELDS.has(field)) {
      if (v === '1' || v === '0') diff[field] = v === '1';
    } else if (field === 'env') {
      try {
        const env = decodeURIComponent(v);
        if (env && env.length <= MAX_ENV) diff[field] = env;
      } catch {
        // A broken escape: the chart's default filter.
      }
    } else if (v === '') {
      diff[field] = null;
    } else if (Number.isFinite(Number(v))) {
      diff[field] = Number(v);
    }
  }
  return [id, diff];
}

/** Every chart's overrides a URL's parameters hold: {id: overrides}. */
export function chartsFromParams(params) {
  const pairs = params.getAll(CHART_PARAM).slice(0, MAX_CHARTS).map(decodeChart)
    .filter((p) => p !== null && Object.keys(p[1]).length > 0);
  return Object.fromEntries(pairs); // own properties whatever the id (no prototype games)
}

/** Write the charts' overrides `all` ({id: overrides}) into `params` (in place), by id. */
export function chartsToParams(params, all) {
  params.delete(CHART_PARAM);
  for (const id of Object.keys(all).sort()) {
    if (all[id] && Object.keys(all[id]).length) params.append(CHART_PARAM, encodeChart(id, all[id]));
  }
  return params;
}

/**
 * The view a page opens with: from its URL when that holds one (`fromUrl`), else null for the
 * stored settings to apply. `charts`: the URL's per-chart overrides ({} when it holds a view
 * but no chart's; null with no view in the URL).
 * @param {string} search `location.search`
 */
export function viewFromUrl(search) {
  const params = new URLSearchParams(search);
  if (!hasView(params)) return { fromUrl: false, page: null, charts: null };
  return { fromUrl: true, page: pageFromParams(params), charts: chartsFromParams(params) };
}

// Characters a query may hold as they are (RFC 3986 query: pchar, "/", "?"), and which
// URLSearchParams reads back as themselves: kept readable (`overlay=3,4`, a chart's `a|b|c|`).
const READABLE = /%(2C|3A|7C|21|40|2F)/g;
const enc = (s) => encodeURIComponent(s).replace(READABLE, (m) => decodeURIComponent(m));

/** `params` as a query string ('' or `?…`), readable where it can be. */
export function queryString(params) {
  const parts = [...params].map(([k, v]) => `${enc(k)}=${enc(v)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

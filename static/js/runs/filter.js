// @ts-check
// The run list's search, status filter and sort, pure.
//
// A query is words, all of which must match a run: a plain word matches the run's name or the
// text of any config value (case-insensitive substring); `path=value` matches a config leaf
// whose path ends with `path` (at a `.` or `[`) and whose value is `value` (numbers compared as
// numbers: `lr=1e-6` finds 0.000001).

import { STATUSES } from './state.js';
import { stepsDone } from './progress.js';

export { STATUSES };

/** The words of a query: {text} or {path, value}; quotes keep spaces in a word. */
export function parseQuery(query) {
  const words = String(query ?? '').match(/(?:[^\s"]+|"[^"]*")+/g) || [];
  return words.map((w) => w.replace(/"/g, '')).filter(Boolean).map((w) => {
    const eq = w.indexOf('=');
    if (eq > 0) return { path: w.slice(0, eq).toLowerCase(), value: w.slice(eq + 1).toLowerCase() };
    return { text: w.toLowerCase() };
  });
}

function sameValue(text, want) {
  const t = text.toLowerCase();
  if (t === want) return true;
  const a = Number(t);
  const b = Number(want);
  return want !== '' && t !== '' && Number.isFinite(a) && Number.isFinite(b) && a === b;
}

function pathEndsWith(path, suffix) {
  const p = path.toLowerCase();
  if (!p.endsWith(suffix)) return false;
  const before = p[p.length - suffix.length - 1];
  return before === undefined || before === '.' || suffix.startsWith('[');
}

/**
 * Does `run` match every word? `leaves` are its config's leaves (flattenConfig), or null while
 * the config is not loaded: config words then match nothing.
 */
export function matchesQuery(run, words, leaves) {
  const name = String(run.name ?? '').toLowerCase();
  return words.every((w) => {
    if (w.text !== undefined) {
      return name.includes(w.text) || !!leaves?.some((l) => l.text.toLowerCase().includes(w.text));
    }
    return !!leaves?.some((l) => pathEndsWith(l.path, w.path) && sameValue(l.text, w.value));
  });
}

/** A predicate over runs for a query, a status and a tag ('' = any). */
export function runFilter({ query = '', status = '', tag = '' } = {}) {
  const words = parseQuery(query);
  return (run, leaves = null) => (!status || run.status === status) && (!tag || !!run.tags?.includes(tag))
    && matchesQuery(run, words, leaves);
}

const headline = (r) => (typeof r.headline?.value === 'number' && Number.isFinite(r.headline.value) ? r.headline.value : -Infinity);

const STATUS_ORDER = Object.fromEntries(STATUSES.map((s, i) => [s, i]));
const time = (iso) => Date.parse(iso) || 0;
const progress = (r) => (r.total_steps ? stepsDone(r) / r.total_steps : -1);

/** Sort keys: each compares two runs ascending; the page may reverse. */
export const SORTS = {
  updated: { label: 'Updated', cmp: (a, b) => time(a.updated_at) - time(b.updated_at), desc: true },
  started: { label: 'Started', cmp: (a, b) => time(a.started_at) - time(b.started_at), desc: true },
  name: { label: 'Name', cmp: (a, b) => String(a.name).localeCompare(String(b.name), undefined, { numeric: true }), desc: false },
  status: { label: 'Status', cmp: (a, b) => (STATUS_ORDER[a.status] ?? 9) - (STATUS_ORDER[b.status] ?? 9), desc: false },
  step: { label: 'Last step', cmp: (a, b) => (a.last_step ?? -1) - (b.last_step ?? -1), desc: true },
  progress: { label: 'Progress', cmp: (a, b) => progress(a) - progress(b), desc: true },
  headline: { label: 'Headline', cmp: (a, b) => headline(a) - headline(b) || 0, desc: true },
  eta: { label: 'ETA', cmp: (a, b) => (a.eta_seconds ?? Infinity) - (b.eta_seconds ?? Infinity), desc: false },
};

/** A sorted copy: by `key` (its natural direction, or the other with `reverse`), then by id. */
export function sortRuns(runs, key = 'updated', reverse = false) {
  const sort = SORTS[key] ?? SORTS.updated;
  const sign = (sort.desc ? -1 : 1) * (reverse ? -1 : 1);
  return [...runs].sort((a, b) => sign * sort.cmp(a, b) || a.id - b.id);
}

// @ts-check
// Pure text helpers: escaping for Plotly (which renders a subset of HTML in its strings),
// metric search by name or regular expression, CSV, safe file names.

/**
 * Text for a Plotly string attribute (trace name, title): Plotly interprets tags such as
 * <b>, <a href> and <br> and decodes entities, so escaping & < > makes any name plain text.
 */
export function escapePlotly(text) {
  return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** What a search matches against: the whole key, the label and the section/group path. */
export function searchText(entry) {
  return [entry.key, entry.label, [entry.section, entry.group, entry.label].filter(Boolean).join('/')];
}

/**
 * A metric search: `test(entry)` says whether a catalog entry (or {key, label}) matches; `error`
 * is the invalid regex's message.
 * @typedef {{test: (entry: {key?: string, label?: string, section?: string, group?: string}) => boolean,
 *   error?: string | null}} Search
 */

/**
 * A predicate over catalog entries for a metric search. Plain text matches case-insensitively
 * as a substring; with `regex` the query is a JavaScript regular expression (case-insensitive).
 * An empty query matches everything. An invalid regex matches everything and reports `error`.
 * @param {string | null | undefined} query
 * @param {boolean} [regex]
 * @returns {Search}
 */
export function compileSearch(query, regex = false) {
  const q = String(query || '').trim();
  if (!q) return { test: () => true, error: null };
  if (regex) {
    let re;
    try {
      re = new RegExp(q, 'i');
    } catch (err) {
      return { test: () => true, error: err.message };
    }
    return { test: (e) => searchText(e).some((t) => re.test(t)), error: null };
  }
  const needle = q.toLowerCase();
  return { test: (e) => searchText(e).some((t) => t.toLowerCase().includes(needle)), error: null };
}

/** One CSV field (RFC 4180); a leading = + - @ is prefixed with ' so spreadsheets keep text. */
export function csvField(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  let s = String(value);
  if (/^[=+\-@]/.test(s)) s = `'${s}`;
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCSV(header, rows) {
  return [header, ...rows].map((r) => r.map(csvField).join(',')).join('\n') + '\n';
}

/** A file name made from a metric name: letters, digits, . _ - only. */
export function safeFilename(name, ext) {
  const base = String(name).replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'chart';
  return `${base.slice(0, 100)}.${ext}`;
}

/** "3 min ago"-style age of an ISO time relative to `now` (ms). */
export function age(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

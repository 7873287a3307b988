// @ts-check
// The sample viewer's pure rules: a value's place in its range (its colour), number formats,
// groups and their best and worst samples, the search's matches, the API query.

/** Where `value` lies in `range` ({min, max, invert}), 0 (red) … 1 (green); null if unknown. */
export function normalized(value, range) {
  if (typeof value !== 'number' || !Number.isFinite(value) || !range) return null;
  const { min, max, invert } = range;
  if (typeof min !== 'number' || typeof max !== 'number') return null;
  const t = max === min ? 0.5 : Math.min(1, Math.max(0, (value - min) / (max - min)));
  return invert ? 1 - t : t;
}

/** The hue of a normalized value: 0 red, 60 yellow, 120 green. */
export const hueOf = (t) => Math.round(120 * t);

const WHOLE = new Intl.NumberFormat('en-US'); // one formatter: toLocaleString makes one per call

export function fmt(v) {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '—';
  if (typeof v !== 'number') return String(v);
  if (!Number.isInteger(v)) return String(Number(v.toPrecision(4)));
  return Math.abs(v) < 1000 ? String(v) : WHOLE.format(v);
}

/** The API orders samples by group: consecutive samples of one group id, in order. */
export function groupsOf(samples) {
  const out = [];
  for (const s of samples) {
    const id = String(s.group_id);
    if (!out.length || out.at(-1).id !== id) out.push({ id, groupId: s.group_id, samples: [] });
    out.at(-1).samples.push(s);
  }
  return out;
}

/** The best and worst samples of a group by reward (first and last of the highest and lowest). */
export function bestAndWorst(samples) {
  const scored = samples.filter((s) => typeof s.reward === 'number' && Number.isFinite(s.reward));
  if (scored.length < 2) return null;
  let best = scored[0];
  let worst = scored[0];
  for (const s of scored) {
    if (s.reward > best.reward) best = s;
    if (s.reward <= worst.reward) worst = s;
  }
  return best === worst ? null : { best, worst };
}

function searchRegExp(query) {
  const q = String(query || '');
  return q ? new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'giu') : null;
}

/** `text` cut into [{text, match}] pieces around the case-insensitive matches of `query`. */
export function highlightParts(text, query) {
  const re = searchRegExp(query);
  const s = String(text ?? '');
  if (!re) return [{ text: s, match: false }];
  const parts = [];
  let at = 0;
  for (const m of s.matchAll(re)) {
    if (m.index > at) parts.push({ text: s.slice(at, m.index), match: false });
    parts.push({ text: m[0], match: true });
    at = m.index + m[0].length;
  }
  if (at < s.length || !parts.length) parts.push({ text: s.slice(at), match: false });
  return parts;
}

export function countMatches(text, query) {
  const re = searchRegExp(query);
  return re && text ? [...String(text).matchAll(re)].length : 0;
}

/** A sample's identity on the page (its group and id). */
export const keyOf = (s) => `${s.group_id}\u241f${s.sample_id}`;

/** The API query of a step with the page's filters. */
export function samplesQuery(step, filters, { offset = 0, limit = 0, text = false } = {}) {
  const q = new URLSearchParams();
  if (step !== null && step !== undefined) q.set('step', String(step));
  for (const [k, v] of Object.entries(filters)) if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
  q.set('offset', String(offset));
  q.set('limit', String(limit));
  if (text) q.set('text', '1');
  return q.toString();
}

// ------------------------------------------------------------------ the page

// @ts-check
// The run list's headline column: which series it shows (a catalog id, the same in every run;
// the reward's mean by default), the choices offered, and a run's value in words. The server
// adds each run's latest point of it to the run list (GET /api/runs?headline=ID). Pure.

export const HEADLINE_DEFAULT = 'reward|reward|mean|';

const KIND_ORDER = ['reward', 'step', 'sample', 'rollouts', 'groups', 'advantage', 'discarded'];
const MAX_OPTIONS = 400;

/** The four parts of a series id (kind, key, stat, env; '' for none). */
function parts(sid) {
  const p = String(sid).split('|').map((x) => {
    try {
      return decodeURIComponent(x);
    } catch {
      return x;
    }
  });
  return [p[0] ?? '', p[1] ?? '', p[2] ?? '', p[3] ?? ''];
}

/** A series id in words for the column's head and the picker: "reward mean", "loss/policy". */
export function headlineLabel(sid) {
  const [kind, key, stat, env] = parts(sid);
  const words = kind === 'step' || kind === 'timeline' || !stat || stat === key ? key : `${key} ${stat}`;
  const text = env ? `${words} [${env}]` : words;
  return text ? text[0].toUpperCase() + text.slice(1) : String(sid);
}

/** The picker's choices from catalog entries (several runs'): {id, label}, deduplicated. */
export function headlineOptions(entries) {
  const seen = new Map();
  for (const e of entries) {
    if (!e || e.normalized || e.env || seen.has(e.id) || !KIND_ORDER.includes(e.kind)) continue;
    seen.set(e.id, { id: e.id, label: headlineLabel(e.id), rank: KIND_ORDER.indexOf(e.kind) });
  }
  if (!seen.has(HEADLINE_DEFAULT)) seen.set(HEADLINE_DEFAULT, { id: HEADLINE_DEFAULT, label: headlineLabel(HEADLINE_DEFAULT), rank: 0 });
  return [...seen.values()].sort((a, b) => a.rank - b.rank || a.label.localeCompare(b.label, undefined, { numeric: true }))
    .slice(0, MAX_OPTIONS).map(({ id, label }) => ({ id, label }));
}

/** A number for the column: 4 significant digits, whole numbers grouped. */
export function formatValue(v) {
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(4)));
}

/** {text, title} of a run's headline ({step, value} or null). */
export function headlineText(headline) {
  if (!headline || headline.value === null || headline.value === undefined) return { text: '—', title: 'No value yet' };
  return { text: formatValue(headline.value), title: `${headline.value} at step ${headline.step}` };
}

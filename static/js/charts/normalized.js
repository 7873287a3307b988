// @ts-check
// Pure rules of the Normalize toggle (docs/statistics.md "Normalization"): which charts switch,
// how a series finds its normalized twin in a run's catalog, and the badge that says where a
// normalized chart's range came from. The values themselves are normalized on the server.

/** Only ranged families normalize: reward and sample metrics. */
export const RANGED_KINDS = new Set(['reward', 'sample']);

/** Whether a chart of `entry` switches to the normalized twin when Normalize is on. */
export function normalizes(entry) {
  return RANGED_KINDS.has(entry.kind) && !entry.normalized && !entry.categorical;
}

/** Identity shared by a series and its normalized twin: kind, key, stat and environment. */
export function twinKey(entry) {
  return [entry.kind, entry.key, entry.stat ?? '', entry.env ?? ''].join('\u0000');
}

/**
 * Index of one run's catalog for twin look-ups. Ids are opaque, so a twin is found by its
 * fields, in each run's own catalog (overlaid runs never borrow another run's series).
 */
export class TwinIndex {
  constructor() {
    this.twins = new Map(); // twinKey -> normalized series id
    this.raws = new Map(); // twinKey -> raw series id
  }

  add(entry) {
    if (!RANGED_KINDS.has(entry.kind)) return;
    (entry.normalized ? this.twins : this.raws).set(twinKey(entry), entry.id);
  }

  /** The normalized twin id of `entry` (or of its sibling with `stat`), null when none. */
  twinOf(entry, stat = entry.stat) {
    return this.twins.get(twinKey({ ...entry, stat })) ?? null;
  }

  /** The raw id a normalized `entry` is the twin of (null for anything else). */
  rawOf(entry) {
    return entry?.normalized ? this.raws.get(twinKey(entry)) ?? null : null;
  }
}

/** A bound for a badge: up to 4 significant digits, a true minus sign. */
export function formatBound(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '?';
  return String(Number(v.toPrecision(4))).replace('-', '\u2212');
}

/** One environment's range: `declared 0–2`, `observed −0.3–1.7`, `degenerate`. */
export function rangeText(part) {
  if (part.source === 'degenerate') return 'degenerate';
  const text = `${part.source} ${formatBound(part.min)}\u2013${formatBound(part.max)}`;
  return part.invert ? `${text} inverted` : text;
}

function envName(part) {
  return part.env ?? '(no env)';
}

function detail(part) {
  if (part.source === 'degenerate') {
    return `${envName(part)}: every value was ${formatBound(part.min)}, so all map to 0.5`;
  }
  return `${envName(part)}: ${rangeText(part)}`;
}

/**
 * The badge of one normalized series' `range` (the series payload's), or null for a raw one:
 * {text, title, degenerate}. All environments together list each environment's range.
 */
export function badgeFor(range) {
  if (!range?.normalized) return null;
  const parts = range.envs ?? [range];
  let text;
  if (parts.length === 0) text = 'normalized';
  else if (parts.length === 1) text = rangeText(parts[0]);
  else text = `per env: ${parts.map((p) => `${envName(p)} ${rangeText(p)}`).join(' \u00b7 ')}`;
  const how = range.envs ? 'each sample by its environment\u2019s range' : 'by the environment\u2019s range';
  const title = [`Normalized onto 0\u20131, ${how}:`, ...parts.map(detail)].join('\n');
  return { text, title, degenerate: parts.some((p) => p.source === 'degenerate') };
}

/**
 * The badge of a chart from its runs [{name, range}]: one text when every run says the same,
 * else each run's own, named. Null when no run shows a normalized series.
 */
export function chartBadge(runs) {
  const shown = runs.map((r) => ({ name: r.name, badge: badgeFor(r.range) })).filter((r) => r.badge);
  if (!shown.length) return null;
  const texts = new Set(shown.map((r) => r.badge.text));
  const named = (r, field) => `${r.name}: ${r.badge[field]}`;
  return {
    text: texts.size === 1 ? shown[0].badge.text : shown.map((r) => named(r, 'text')).join(' | '),
    title: shown.length === 1 ? shown[0].badge.title : shown.map((r) => named(r, 'title')).join('\n\n'),
    degenerate: shown.some((r) => r.badge.degenerate),
  };
}

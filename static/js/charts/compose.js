// @ts-check
// Pure rules of composed charts (fewer, denser charts): which catalog entries share one chart of the All
// view, the part each plays in it (mean line, ± std band, min/max envelope, stacked count, plain
// line), which environments a chart offers, and which series are data-quality counters.
// One chart per metric, not per statistic: the reader sees a distribution at a glance. The
// derived timing series (kind `timeline`) compose by meaning instead: the parts of one question
// (where the step went, how the lanes' time split) share a chart, one line per series.

import { describe, tooltip } from '../core/registry.js';

/** Statistics drawn together as one value: mean line, ± std band, min/max envelope. */
const VALUE_STATS = new Set(['mean', 'std', 'min', 'max']);

/** Counters that are normally zero and only say something went wrong: the Data quality section. */
export const QUALITY_STATS = new Set(['null_count', 'gini_excluded', 'outside_count', 'canceled']);

export const QUALITY_SECTION = 'Data quality';

/** Series with a normalized twin: a composed chart normalizes only when its primary stat has one. */
export const TWINNED_STATS = new Set(['mean', 'std', 'min', 'max', 'gini_mean']);

const STATUS_WORDS = { all: 'all statuses', normal: 'normal', discarded: 'discarded', canceled: 'canceled' };
const shares = (prefix, statuses) => statuses.map((s) => [`timing_${prefix}_${s}_pct`, STATUS_WORDS[s]]);

/**
 * The derived timing series drawn as one chart (DESIGN "Where the time goes"): each family's
 * keys with the words of their lines, in legend order, the first its primary. Besides these, a
 * `timing_<op>_total` and its `timing_<op>_microbatch_mean` share a chart per op (timelinePart);
 * any other derived key (inference idle, the complement of two of these charts; rank spread,
 * slowest rank, microbatch count) is a chart alone.
 */
export const TIMELINE_FAMILIES = Object.freeze([
  { family: 'step', title: 'Training step', parts: [['timing_step_total', 'whole step'],
    ['timing_step_active', 'active'], ['timing_waiting_for_data', 'waiting for data']] },
  { family: 'weight_sync', title: 'Weight sync', parts: [['timing_weight_sync_trainer_total', 'trainer'],
    ['timing_weight_sync_inference_total', 'inference']] },
  { family: 'mean_time', title: 'Time per call (mean)', parts: [
    ['timing_avg_inference_time', 'generation'], ['timing_avg_compute_reward_time', 'reward computation']] },
  { family: 'generation', title: 'Generating (% of lanes)',
    parts: shares('generation', ['all', 'normal', 'discarded', 'canceled']) },
  { family: 'compute_reward', title: 'Computing rewards (% of lanes)',
    parts: shares('compute_reward', ['all', 'normal', 'discarded']) },
]);

const TIMELINE_PARTS = new Map(TIMELINE_FAMILIES.flatMap((f) => f.parts.map(([key, words], rank) =>
  [key, { family: f.family, title: f.title, words, rank, keys: f.parts.map(([k]) => k) }])));
const OP_PART = /^timing_(.+)_(total|microbatch_mean)$/;

/**
 * The composed chart a derived timing key is part of: {family, title, words (its line's), rank
 * (0: the primary), keys (the family's, in legend order)}; null for a key drawn alone.
 */
export function timelinePart(key) {
  const known = TIMELINE_PARTS.get(key);
  if (known) return known;
  const m = OP_PART.exec(key);
  if (!m) return null;
  const keys = [`timing_${m[1]}_total`, `timing_${m[1]}_microbatch_mean`];
  const total = m[2] === 'total';
  return { family: `op:${m[1]}`, title: describe(keys[0])?.title ?? `timing_${m[1]}`,
    words: total ? 'step total (slowest rank)' : 'per microbatch', rank: total ? 0 : 1, keys };
}

/** The timeline part of an entry (kind `timeline` only: a trainer's own key keeps its chart). */
function partOf(entry) {
  return entry.kind === 'timeline' ? timelinePart(entry.key) : null;
}

export function isQuality(entry) {
  return entry.kind !== 'step' && QUALITY_STATS.has(entry.stat);
}

/**
 * The chart an entry belongs to. Environments never split a chart (they are overlaid and
 * filtered on it); a trainer step key keeps a chart of its own.
 */
export function familyKey(entry) {
  const part = partOf(entry);
  if (part) return `${entry.kind}\u0000${part.family}\u0000composed`; // its keys span groups
  const base = `${entry.kind}\u0000${entry.key}\u0000${entry.group ?? ''}`;
  if (entry.kind === 'step') return `${base}\u0000${entry.id}`;
  if (isQuality(entry)) return `${base}\u0000q:${entry.stat}`;
  if (entry.kind === 'groups') return `${base}\u0000groups`; // counts that add up: one stacked chart
  if (entry.kind === 'ranges') return `${base}\u0000bounds`; // at_min_pct beside at_max_pct
  if (VALUE_STATS.has(entry.stat)) return `${base}\u0000value`;
  return `${base}\u0000${entry.stat ?? ''}`;
}

const STACKED_GROUPS = new Set(['informative', 'tied']);

/** The part an entry plays in its chart: line, std (band), min / max (envelope) or stack. */
export function roleOf(entry) {
  // informative + tied = count: those two stack; all_min / all_max are subsets of tied, so they
  // are lines over the stack (stacking them too would count groups twice)
  if (entry.kind === 'groups') return STACKED_GROUPS.has(entry.stat) ? 'stack' : 'line';
  if (entry.kind !== 'step' && VALUE_STATS.has(entry.stat) && entry.stat !== 'mean') return entry.stat;
  return 'line';
}

const PRIMARY_ORDER = ['mean', 'count', 'at_min_pct'];

function primaryRank(entry) {
  const i = PRIMARY_ORDER.indexOf(entry.stat);
  return [entry.env === null || entry.env === undefined ? 0 : 1, roleOf(entry) === 'line' ? 0 : 1, i < 0 ? 9 : i,
    partOf(entry)?.rank ?? 0];
}

function before(a, b) {
  const i = a.findIndex((v, k) => v !== b[k]);
  return i >= 0 && a[i] < b[i];
}

/**
 * The entry that names a chart (its data-series-id): the all-environment mean, or the best there
 * is; of a timeline family, its first part present.
 */
export function primaryOf(entries) {
  let best = null;
  for (const e of entries) {
    if (!best || before(primaryRank(e), primaryRank(best))) best = e;
  }
  return best;
}

/** Filter value: every environment overlaid; ALL_TOGETHER: only the pooled (env null) series. */
export const EVERY_ENV = '*';
export const ALL_TOGETHER = '@';

/** The filter's choices for a chart whose entries span `envs` (null = all environments together). */
export function envOptions(entries) {
  const envs = [...new Set(entries.map((e) => e.env ?? null))];
  const named = envs.filter((e) => e !== null).sort();
  if (!named.length) return [];
  const out = [{ value: EVERY_ENV, label: 'every env' }];
  if (envs.includes(null)) out.push({ value: ALL_TOGETHER, label: 'all together' });
  return out.concat(named.map((e) => ({ value: e, label: e })));
}

/**
 * What a chart draws from one run's `entries` under `settings` {env, band, envelope}: the
 * lines (each environment the filter lets through), and the environments whose band,
 * envelope and stack are drawn — only one, so a chart of every env stays readable: the
 * pooled series when there is one.
 */
export function selectMembers(entries, settings) {
  const env = settings.env ?? EVERY_ENV;
  const envOf = (e) => e.env ?? null;
  const pass = (e) => env === EVERY_ENV || (env === ALL_TOGETHER ? envOf(e) === null : envOf(e) === env);
  const shown = entries.filter(pass);
  let spreadEnv;
  if (env !== EVERY_ENV) spreadEnv = env === ALL_TOGETHER ? null : env;
  else spreadEnv = shown.some((e) => envOf(e) === null) ? null : (shown.map(envOf).sort()[0] ?? null);
  const spread = (e) => envOf(e) === spreadEnv;
  const out = [];
  for (const e of shown) {
    const role = roleOf(e);
    if (role === 'line') out.push({ entry: e, role });
    else if (role === 'std' && settings.band && spread(e)) out.push({ entry: e, role });
    else if ((role === 'min' || role === 'max') && settings.envelope && spread(e)) out.push({ entry: e, role });
    else if (role === 'stack' && spread(e)) out.push({ entry: e, role });
  }
  return out;
}

/** Which of a family's statistics exist: what its legend offers to toggle. */
export function offers(entries) {
  const roles = new Set(entries.map(roleOf));
  return { band: roles.has('std'), envelope: roles.has('min') || roles.has('max') };
}

/**
 * A chart's title: the metric, with the statistic when the chart is not its value family; a
 * timeline family's own, a derived key alone the registry's (as a trainer's key of its name).
 */
export function familyTitle(primary) {
  if (primary.kind === 'timeline') return partOf(primary)?.title ?? describe(primary.key)?.title ?? primary.key;
  if (primary.kind === 'step') return primary.label || primary.key;
  if (isQuality(primary)) return `${primary.key} ${primary.stat}`;
  if (primary.kind === 'groups') return 'groups';
  if (primary.kind === 'ranges') return `${primary.key} at its bounds (%)`;
  if (VALUE_STATS.has(primary.stat) || !primary.stat || primary.stat === primary.key) return primary.key;
  return `${primary.key} ${primary.stat}`;
}

/**
 * The "?" of a chart named by `primary`: {title, description, tip} or null. A registered key's
 * (a trainer's, or a derived series alone); a timeline family's lists each line's meaning.
 */
export function familyHelp(primary) {
  const part = partOf(primary);
  if (part) {
    const lines = part.keys.map((key) => [key, describe(key)]).filter(([, info]) => info);
    if (!lines.length) return null;
    const units = [...new Set(lines.map(([, info]) => info.unit).filter(Boolean))];
    const description = lines.map(([key, info]) => `${timelinePart(key)?.words}: ${info.description}`).join('\n');
    const facts = [units.length ? `unit: ${units.join(', ')}` : '', `keys: ${part.keys.join(', ')}`];
    return { title: part.title, description, tip: [description, ...facts].filter(Boolean).join('\n') };
  }
  const info = primary.kind === 'step' || primary.kind === 'timeline' ? describe(primary.key) : null;
  return info && { title: info.title, description: info.description, tip: tooltip(primary.key, info) };
}

/** What names a line of a composed chart beside its run and env: a timeline part's words. */
export function partWords(entry) {
  return partOf(entry)?.words ?? null;
}

/** The legend order of a composed chart's lines of distinct series: a timeline part's rank. */
export function partRank(entry) {
  return partOf(entry)?.rank ?? 0;
}

/** The timeline parts among `entries` (every run's), in legend order: [{key, words, rank}]. */
export function partsOf(entries) {
  const seen = new Map();
  for (const e of entries) {
    const part = partOf(e);
    if (part && !seen.has(e.key)) seen.set(e.key, { key: e.key, words: part.words, rank: part.rank });
  }
  return [...seen.values()].sort((a, b) => a.rank - b.rank);
}

/** Whether any loaded point of a data-quality series is non-zero (ignoring nulls). */
export function anyNonZero(values) {
  for (const v of values || []) if (v !== null && v !== 0 && !Number.isNaN(v)) return true;
  return false;
}

// @ts-check
// Pure rules of composed charts (fewer, denser charts): which catalog entries share one chart of the All
// view, the part each plays in it (mean line, ± std band, min/max envelope, stacked count, plain
// line), which environments a chart offers, and which series are data-quality counters.
// One chart per metric, not per statistic: the reader sees a distribution at a glance.

/** Statistics drawn together as one value: mean line, ± std band, min/max envelope. */
const VALUE_STATS = new Set(['mean', 'std', 'min', 'max']);

/** Counters that are normally zero and only say something went wrong: the Data quality section. */
export const QUALITY_STATS = new Set(['null_count', 'gini_excluded', 'outside_count', 'canceled']);

export const QUALITY_SECTION = 'Data quality';

/** Series with a normalized twin: a composed chart normalizes only when its primary stat has one. */
export const TWINNED_STATS = new Set(['mean', 'std', 'min', 'max', 'gini_mean']);

export function isQuality(entry) {
  return entry.kind !== 'step' && QUALITY_STATS.has(entry.stat);
}

/**
 * The chart an entry belongs to. Environments never split a chart (they are overlaid and
 * filtered on it); a trainer step key keeps a chart of its own.
 */
export function familyKey(entry) {
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
  return [entry.env === null || entry.env === undefined ? 0 : 1, roleOf(entry) === 'line' ? 0 : 1, i < 0 ? 9 : i];
}

/** The entry that names a chart (its data-series-id): the all-environment mean, or the best there is. */
export function primaryOf(entries) {
  let best = null;
  for (const e of entries) {
    if (!best) { best = e; continue; }
    const a = primaryRank(e);
    const b = primaryRank(best);
    if (a[0] < b[0] || (a[0] === b[0] && (a[1] < b[1] || (a[1] === b[1] && a[2] < b[2])))) best = e;
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

/** A chart's title: the metric, with the statistic when the chart is not its value family. */
export function familyTitle(primary) {
  if (primary.kind === 'step') return primary.label || primary.key;
  if (isQuality(primary)) return `${primary.key} ${primary.stat}`;
  if (primary.kind === 'groups') return 'groups';
  if (primary.kind === 'ranges') return `${primary.key} at its bounds (%)`;
  if (VALUE_STATS.has(primary.stat) || !primary.stat || primary.stat === primary.key) return primary.key;
  return `${primary.key} ${primary.stat}`;
}

/** Whether any loaded point of a data-quality series is non-zero (ignoring nulls). */
export function anyNonZero(values) {
  for (const v of values || []) if (v !== null && v !== 0 && !Number.isNaN(v)) return true;
  return false;
}

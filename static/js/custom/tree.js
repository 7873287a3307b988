// @ts-check
// Words of the Custom view: the metric list as a tree (section → group → metric, in the All
// view's order, with counts of what the search lets through), readable labels for metrics and
// series, and a plot's default title (the metric registry's, else the key). Pure; tested with
// `node --test`.

import { compareRanks, sectionKey, sectionRank } from '../core/catalog.js';
import { parseId } from './layout.js';
import { describe, describeSeries } from '../core/registry.js';

const STAT_ORDER = ['mean', 'std', 'min', 'max', 'gini_mean', 'count'];
const STAT_WORDS = { gini_mean: 'Gini mean', gini_excluded: 'Gini excluded', null_count: 'null count',
  at_min_pct: 'at min %', at_max_pct: 'at max %', outside_count: 'outside range', all_min: 'all at min',
  all_max: 'all at max' };

/** A statistic in words (`gini_mean` → "Gini mean"); a family's own name through the registry. */
export function statWords(stat, key = null) {
  if (!stat) return '';
  if (stat === key) return describe(key)?.title ?? stat.replace(/_/g, ' ');
  return STAT_WORDS[stat] ?? stat.replace(/_pct$/, ' %').replace(/_/g, ' ');
}

/** Kinds whose keys the registry titles: a trainer's step keys and the derived `timing_*` series. */
const TITLED_KINDS = new Set(['step', 'timeline']);

/**
 * How the metric list names an entry: {title, detail} (detail: the whole key, or env). A derived
 * timing series is titled as a trainer's key of its name, its detail saying it is derived.
 */
export function metricLabel(entry) {
  if (TITLED_KINDS.has(entry.kind)) {
    const title = describe(entry.key)?.title ?? (entry.label || entry.key);
    return { title, detail: entry.kind === 'timeline' ? `${entry.key} · derived` : entry.key };
  }
  const stat = statWords(entry.stat, entry.key) || entry.key;
  return { title: entry.env ? `${stat} · ${entry.env}` : stat, detail: entry.env ? '' : 'all envs' };
}

/**
 * A series' name on a plot, from its id alone (so a series no run has yet is named too); a
 * derived timing series says so, to be told from a trainer's key of the same title.
 */
export function seriesName(sid) {
  const [kind, key, stat, env] = parseId(sid);
  if (!key) return sid;
  const titled = TITLED_KINDS.has(kind) ? describe(key)?.title ?? key : null;
  const base = titled !== null ? (kind === 'timeline' ? `${titled} (derived)` : titled)
    : derivedName(kind, key, stat);
  return env ? `${base} · ${env}` : base;
}

/** A derived series in the registry's words (as its All-view chart is titled), with the
 * statistic named when the title leaves it out (a family's own chart draws its mean). */
function derivedName(kind, key, stat) {
  const title = describeSeries({ kind, key, stat })?.title;
  if (!title) return stat === key ? statWords(stat, key) : [key, statWords(stat)].filter(Boolean).join(' ');
  const bare = stat && stat !== key && describeSeries({ kind, key, stat: null })?.title === title;
  return bare ? `${title} ${statWords(stat)}` : title;
}

/** A plot's title: its own, else its series' names (the registry's title, else the key). */
export function plotTitle(plot) {
  return plot.title || plot.series.map((s) => seriesName(s.id)).join(', ');
}

function statRank(entry) {
  const i = STAT_ORDER.indexOf(entry.stat);
  return [i < 0 ? STAT_ORDER.length : i, entry.env ? 1 : 0, entry.env ?? '', entry.stat ?? ''];
}

/** Whether the search lets an entry through: by its key, catalog label or readable title. */
export function passes(test, entry) {
  if (test(entry)) return true;
  const { title } = metricLabel(entry);
  return test({ key: title, label: title, section: entry.section, group: entry.group });
}

/**
 * The metric list: [{key, title, count, items: [metric | group]}] in the All view's section
 * order; a metric is {type: 'metric', entry}, a group {type: 'group', key, title, count,
 * entries}. Normalized twins are left out (the Normalize toggle shows them); `test` (the
 * search) keeps matching entries only, and counts say how many there are.
 */
export function paletteTree(entries, test = () => true) {
  const sections = new Map();
  for (const e of entries) {
    if (e.normalized || !passes(test, e)) continue;
    const sk = sectionKey(e);
    if (!sections.has(sk)) sections.set(sk, { key: sk, title: e.section, count: 0, items: [], groups: new Map() });
    const sec = sections.get(sk);
    sec.count++;
    if (!e.group) {
      sec.items.push({ type: 'metric', entry: e });
      continue;
    }
    let g = sec.groups.get(e.group);
    if (!g) {
      g = { type: 'group', key: `${sk}\u0000${e.group}`, title: e.group, count: 0, entries: [] };
      sec.groups.set(e.group, g);
      sec.items.push(g);
    }
    g.count++;
    g.entries.push(e);
  }
  const order = [...sections.values()];
  const firstSeen = new Map(order.map((s, i) => [s.key, i]));
  order.sort((a, b) => compareRanks(sectionRank(a.key, firstSeen.get(a.key)), sectionRank(b.key, firstSeen.get(b.key))));
  for (const sec of order) {
    for (const g of sec.groups.values()) g.entries.sort((a, b) => compareRanks(statRank(a), statRank(b)));
    delete sec.groups;
  }
  return order;
}

/** Every metric of `entries` for a plot's Add series list: [{title, options: [{id, text}]}]. */
export function seriesChoices(entries) {
  return paletteTree(entries).map((sec) => ({ title: sec.title,
    options: sec.items.flatMap((it) => (it.type === 'group' ? it.entries.map((e) => [it.title, e]) : [[null, it.entry]]))
      .map(([group, e]) => ({ id: e.id, text: [group, metricLabel(e).title].filter(Boolean).join(' · ') })) }));
}

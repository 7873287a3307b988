// @ts-check
// Pure placement rules of the All view: which section and group a catalog entry goes to, in
// which order sections, groups and charts appear, and per-chart defaults.

/** Derived and fixed sections, in page order after General and the trainer's own sections. */
export const FIXED_SECTIONS = [
  'Reward', 'Sample metrics', 'Advantage', 'Groups', 'Rollouts', 'Discarded rollouts',
  'Timeline', 'Ranges', 'Data quality',
];

/**
 * The Timeline section's groups in page order (the server names them: ingest/core/series_ids.py
 * timing_group); a group not listed comes after them, by arrival.
 */
export const TIMELINE_GROUPS = ['Full step', 'Per microbatch', 'Ranks', 'Weight sync', 'Inference'];

const STAT_ORDER = ['mean', 'std', 'min', 'max', 'gini_mean', 'count'];

/**
 * A series of the Timeline section: a `timing_*` series derived from the run's events (kind
 * `timeline`) or a trainer's own `timing_*` step key of the same grammar.
 */
export function isTimelineKey(entry) {
  if (entry.kind === 'timeline') return true;
  return entry.kind === 'step' && entry.section === 'Timeline' && entry.key.startsWith('timing_')
    && !entry.key.includes('/');
}

/**
 * The group an entry's chart is placed in: a trainer key's and a timeline series' own; a
 * derived family's group names its metric's statistics, drawn as one chart: no group.
 */
export function chartGroup(entry) {
  return entry.kind === 'step' || entry.kind === 'timeline' ? entry.group ?? null : null;
}

/**
 * Identity of an entry's section. A trainer key may name a section "Reward": it must not merge
 * into the derived Reward section, so trainer sections and fixed ones live in separate spaces.
 */
export function sectionKey(entry) {
  if (entry.kind === 'step' && !isTimelineKey(entry)) {
    return entry.section === 'General' ? 'general' : `user:${entry.section}`;
  }
  return `fixed:${entry.section}`;
}

/** Sort rank of a section: General, trainer sections by first appearance, then fixed order. */
export function sectionRank(key, firstSeen) {
  if (key === 'general') return [0, 0];
  if (key.startsWith('user:')) return [1, firstSeen];
  return [2, FIXED_SECTIONS.indexOf(key.slice('fixed:'.length))];
}

/** Identity of a group inside its section: the catalog group, split by environment. */
export function groupKey(entry) {
  return `${entry.group ?? ''}\u0000${entry.env ?? ''}`;
}

/** Heading of a group: the group name, with the environment when there is one. */
export function groupTitle(entry) {
  const name = entry.group ?? '';
  return entry.env ? `${name} · ${entry.env}` : name;
}

function statRank(stat) {
  const i = STAT_ORDER.indexOf(stat);
  return i < 0 ? STAT_ORDER.length : i;
}

function cmp(a, b) {
  for (let i = 0; i < a.length; i++) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return 0;
}

export function compareRanks(a, b) {
  return cmp(a, b);
}

/**
 * Order of groups in a section: the group's first appearance, overall before environments;
 * the Timeline section's known groups first, in TIMELINE_GROUPS order.
 */
export function groupRank(entry, firstSeen) {
  const fixed = isTimelineKey(entry) ? TIMELINE_GROUPS.indexOf(entry.group) : -1;
  const at = isTimelineKey(entry) ? (fixed < 0 ? TIMELINE_GROUPS.length + firstSeen : fixed) : firstSeen;
  return [at, entry.env ? 1 : 0, entry.env ?? ''];
}

/**
 * Order of charts in a group: known statistics first (mean, std, min, max, …), then arrival.
 * A timing key's two charts (the trainer's, then the derived one) sit together, at the first
 * arrival of the key (`keyArrival`).
 */
export function chartRank(entry, arrival, keyArrival = arrival) {
  if (isTimelineKey(entry)) return [statRank(entry.stat), keyArrival, entry.kind === 'timeline' ? 1 : 0];
  return [statRank(entry.stat), arrival];
}

/**
 * Incremental placement: entries arrive in catalog order (a snapshot, then live additions) and
 * each gets its section, group and chart ranks; ranks never change once given, so the page can
 * insert a new chart in place without moving the others.
 */
export class Placer {
  constructor() {
    this.sectionsSeen = new Map();
    this.groupsSeen = new Map();
    this.keysSeen = new Map(); // a timing key -> its first arrival
    this.arrival = 0;
  }

  /** Only the section of an entry (a section shown before any chart of it, e.g. a flag). */
  placeSection(entry) {
    const sk = sectionKey(entry);
    if (!this.sectionsSeen.has(sk)) this.sectionsSeen.set(sk, this.sectionsSeen.size);
    return { sectionKey: sk, sectionTitle: entry.section, sectionRank: sectionRank(sk, this.sectionsSeen.get(sk)) };
  }

  place(entry) {
    const sk = sectionKey(entry);
    if (!this.sectionsSeen.has(sk)) this.sectionsSeen.set(sk, this.sectionsSeen.size);
    const gname = `${sk}\u0000${entry.group ?? ''}`;
    if (!this.groupsSeen.has(gname)) this.groupsSeen.set(gname, this.groupsSeen.size);
    const arrival = this.arrival++;
    if (isTimelineKey(entry) && !this.keysSeen.has(entry.key)) this.keysSeen.set(entry.key, arrival);
    return {
      sectionKey: sk,
      sectionTitle: entry.section,
      sectionRank: sectionRank(sk, this.sectionsSeen.get(sk)),
      groupKey: groupKey(entry),
      groupTitle: groupTitle(entry),
      groupRank: groupRank(entry, this.groupsSeen.get(gname)),
      chartRank: chartRank(entry, arrival, this.keysSeen.get(entry.key) ?? arrival),
    };
  }
}

/**
 * Lay out catalog entries: [{key, title, groups: [{key, title, entries}]}] with sections,
 * groups and charts in page order.
 */
export function layout(entries) {
  const placer = new Placer();
  const sections = new Map();
  for (const e of entries) {
    const p = placer.place(e);
    if (!sections.has(p.sectionKey)) {
      sections.set(p.sectionKey, { key: p.sectionKey, title: p.sectionTitle, rank: p.sectionRank, groups: new Map() });
    }
    const groups = sections.get(p.sectionKey).groups;
    if (!groups.has(p.groupKey)) groups.set(p.groupKey, { key: p.groupKey, title: p.groupTitle, rank: p.groupRank, charts: [] });
    groups.get(p.groupKey).charts.push({ entry: e, rank: p.chartRank });
  }
  const byRank = (a, b) => cmp(a.rank, b.rank);
  return [...sections.values()].sort(byRank).map((sec) => ({
    key: sec.key,
    title: sec.title,
    groups: [...sec.groups.values()].sort(byRank).map((g) => ({
      key: g.key, title: g.title, entries: g.charts.sort(byRank).map((c) => c.entry),
    })),
  }));
}

/** Timing charts, the derived ones too, ignore the (compilation-slow) first step by default. */
export function isTiming(entry) {
  if (isTimelineKey(entry)) return true;
  return entry.kind === 'step' && (entry.key.startsWith('timing/') || entry.key.startsWith('timing_'));
}

/** Key shared by a mean series and the std series of the same kind, key and environment. */
export function siblingKey(entry) {
  return `${entry.kind}\u0000${entry.key}\u0000${entry.env ?? ''}`;
}

/** Aggregated mean charts can draw a ± std band from their std sibling. */
export function wantsBand(entry) {
  return entry.stat === 'mean' && entry.kind !== 'step';
}

/** The chart's default settings (page-level overrides are applied elsewhere). */
export function defaultChartSettings(entry) {
  return { ignoreOutliers: false, ignoreFirst: isTiming(entry), logY: false, yMin: null, yMax: null, band: true };
}

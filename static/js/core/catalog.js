// @ts-check
// Pure placement rules of the All view: which section and group a catalog entry goes to, in
// which order sections, groups and charts appear, and per-chart defaults.

/** Derived and fixed sections, in page order after General and the trainer's own sections. */
export const FIXED_SECTIONS = [
  'Reward', 'Sample metrics', 'Advantage', 'Groups', 'Rollouts', 'Discarded rollouts',
  'Timeline', 'Ranges', 'Data quality',
];

const STAT_ORDER = ['mean', 'std', 'min', 'max', 'gini_mean', 'count'];

function isTimelineKey(entry) {
  return entry.kind === 'step' && entry.section === 'Timeline' && entry.key.startsWith('timing_')
    && !entry.key.includes('/');
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

/** Order of groups in a section: the group's first appearance, overall before environments. */
export function groupRank(entry, firstSeen) {
  return [firstSeen, entry.env ? 1 : 0, entry.env ?? ''];
}

/** Order of charts in a group: known statistics first (mean, std, min, max, …), then arrival. */
export function chartRank(entry, arrival) {
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
    return {
      sectionKey: sk,
      sectionTitle: entry.section,
      sectionRank: sectionRank(sk, this.sectionsSeen.get(sk)),
      groupKey: groupKey(entry),
      groupTitle: groupTitle(entry),
      groupRank: groupRank(entry, this.groupsSeen.get(gname)),
      chartRank: chartRank(entry, this.arrival++),
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

/** Timing charts ignore the (compilation-slow) first step by default. */
export function isTiming(entry) {
  if (entry.kind !== 'step') return false;
  return isTimelineKey(entry) || entry.key.startsWith('timing/') || entry.key.startsWith('timing_');
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

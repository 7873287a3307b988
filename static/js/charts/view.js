// @ts-check
// The All view: collapsible sections and groups of chart cards, built incrementally as catalog
// entries arrive (snapshot, then live), kept in page order, filtered by the metric search.

import { chartGroup, compareRanks, isTimelineKey, Placer } from '../core/catalog.js';
import { Chart } from './chart.js';
import { anyNonZero, familyKey, isQuality, primaryOf, QUALITY_SECTION, timelinePart } from './compose.js';
import { h } from '../core/dom.js';
import { describe } from '../core/registry.js';
import { originOf, showOrigin } from './origin.js';
import { loadCollapsed, saveCollapsed } from './prefs.js';

function insertSorted(parent, list, item) {
  let i = list.findIndex((other) => compareRanks(item.rank, other.rank) < 0);
  if (i < 0) i = list.length;
  const before = list[i]?.el ?? null;
  list.splice(i, 0, item);
  parent.insertBefore(item.el, before);
}

/**
 * The key a chart is placed by (core/catalog.js Placer): a timing key by its timeline family's
 * primary key, so that a trainer's own timing_* charts sit just before the derived chart
 * drawing their names.
 */
function placeKey(entry) {
  return isTimelineKey(entry) ? timelinePart(entry.key)?.keys[0] ?? entry.key : entry.key;
}

export class AllView {
  constructor(root, page) {
    this.root = root;
    this.page = page;
    this.placer = new Placer();
    this.sections = [];
    this.sectionByKey = new Map();
    this.charts = new Map(); // primary series id -> Chart
    this.families = new Map(); // compose.familyKey -> Chart
    this.bySeries = new Map(); // any raw series id a chart draws -> Chart
    this.quality = new Set(); // the Data quality section's charts
    this.timing = new Map(); // a timing_* key -> the charts drawing it (the trainer's, the derived one)
    this.collapsed = loadCollapsed();
    /** @type {import('../core/text.js').Search} */
    this.filter = { test: () => true };
    this.order = 0;
  }

  /**
   * Add catalog entries (any run): an entry joins its metric's chart (compose.familyKey) or
   * starts one. Returns the new Chart objects.
   */
  add(entries) {
    const made = [];
    let shown = false; // a hidden chart found by the search through a new series of it
    for (const entry of entries) {
      // A normalized series is not a chart of its own: Normalize switches its twin's chart.
      if (entry.normalized || this.bySeries.has(entry.id)) continue;
      const fk = familyKey(entry);
      const have = this.families.get(fk);
      if (have) {
        this.bySeries.set(entry.id, have);
        if (primaryOf([have.entry, entry]) === entry) this.rekey(have, entry);
        if (entry.kind === 'timeline') this.pairTiming(have, entry.key);
        if (have.near) have.invalidate();
        if (have.el.hidden && this.matches(have)) {
          have.el.hidden = false;
          shown = true;
        }
        continue;
      }
      const quality = isQuality(entry);
      const lead = this.leadOf(entry, fk);
      // Environments share the chart, so groups are never split by env; a derived section's
      // group was its metric's statistics, now one chart: the section is one grid instead.
      const where = quality ? { ...entry, env: null, section: QUALITY_SECTION, group: entry.section }
        : { ...lead, env: null, group: chartGroup(lead), key: placeKey(lead) };
      const place = this.placer.place(where);
      const group = this.group(this.section(place), place);
      const chart = new Chart(lead, this.page, fk);
      chart.place = place;
      chart.quality = quality;
      this.charts.set(lead.id, chart);
      this.families.set(fk, chart);
      this.bySeries.set(entry.id, chart);
      if (quality) this.quality.add(chart);
      if (isTimelineKey(entry)) this.pairTiming(chart, entry.key);
      insertSorted(group.grid, group.charts, { rank: place.chartRank, el: chart.el, chart });
      chart.el.hidden = !this.matches(chart);
      made.push(chart);
    }
    if (entries.some((e) => !e.normalized && (isQuality(e) || e.nonfinite > 0))) this.watchQuality();
    if (shown && !made.length) this.refreshCounts();
    if (made.length) {
      this.renumber();
      this.refreshCounts();
      for (const chart of made) this.page.visibility.observe(chart);
    }
    return made;
  }

  /**
   * The entry a new chart is named and placed by: its own, or for a timeline family (whose
   * keys span the server's groups) the primary among the family's entries the runs already
   * list, so that the chart sits in the primary's group whichever key the catalog lists first.
   */
  leadOf(entry, fk) {
    if (entry.kind !== 'timeline') return entry;
    return primaryOf([entry, ...(this.page.runs ?? []).flatMap((store) => store.families?.get(fk) ?? [])]);
  }

  /**
   * A search finds a chart by any series it draws (`std`, an environment's name, a
   * statistic, a timeline family's keys and their human titles) or by its title (the
   * registry's human one included).
   */
  matches(chart) {
    const f = this.filter;
    const title = chart.title.textContent;
    if (f.test(chart.entry) || f.test({ key: title, label: title })) return true;
    return chart.familyEntries().some((e) => {
      if (f.test(e)) return true;
      const human = e.kind === 'timeline' ? describe(e.key)?.title : null;
      return Boolean(human) && f.test({ key: human, label: human });
    });
  }

  /**
   * A timing key is drawn twice when the trainer logs it and the server derives it from the
   * events: the trainer's chart then says "logged" beside the "derived" one drawing that key
   * (charts/origin.js; a timeline family's chart draws several keys).
   */
  pairTiming(chart, key) {
    const charts = this.timing.get(key) ?? [];
    if (!charts.includes(chart)) charts.push(chart);
    this.timing.set(key, charts);
    const derived = charts.some((c) => c.entry.kind === 'timeline');
    for (const c of charts) showOrigin(c, originOf(c.entry, derived));
  }

  /** The chart that draws raw series `sid` (null when none). */
  chartFor(sid) {
    return this.bySeries.get(sid) ?? null;
  }

  rekey(chart, entry) {
    this.charts.delete(chart.id);
    chart.setPrimary(entry);
    this.charts.set(entry.id, chart);
  }

  // ------------------------------------------------------------ data quality

  /**
   * The Data quality section is collapsed, so its charts never load on their own: its series
   * are loaded here (a few small ones) to flag, in its header, any counter that is not zero.
   */
  watchQuality() {
    for (const chart of this.quality) {
      for (const store of this.page.runs) {
        for (const e of store.families.get(chart.family) || []) {
          if (store.series.has(e.id) || this.page.loader.isPending(store, e.id)) continue;
          this.page.loader.request(store, e.id, false).then(() => this.refreshQualitySoon());
        }
      }
    }
    this.refreshQualitySoon();
  }

  refreshQualitySoon() {
    if (this.qualityTimer) return;
    this.qualityTimer = setTimeout(() => { this.qualityTimer = null; this.refreshQuality(); }, 50);
  }

  /** Name every non-zero counter (and every step key with dropped values) in the header. */
  refreshQuality() {
    const bad = [];
    for (const chart of this.quality) {
      const hit = this.page.runs.some((store) => (store.families.get(chart.family) || [])
        .some((e) => anyNonZero(store.series.get(e.id)?.data?.value)));
      if (hit) bad.push(chart.title.textContent);
      chart.el.classList.toggle('quality-bad', hit);
    }
    for (const store of this.page.runs) {
      for (const e of store.catalog.values()) {
        if (e.kind === 'step' && e.nonfinite > 0) bad.push(`${e.key}: ${e.nonfinite} non-finite`);
      }
    }
    let sec = this.sectionByKey.get(`fixed:${QUALITY_SECTION}`);
    if (!sec && bad.length) sec = this.section(this.placer.placeSection({ kind: 'quality', section: QUALITY_SECTION }));
    if (!sec) return;
    const flag = sec.flag;
    const names = [...new Set(bad)];
    flag.hidden = names.length === 0;
    flag.textContent = names.length ? `\u26a0 ${names.length} not zero` : '';
    flag.title = names.join('\n');
    sec.el.classList.toggle('flagged', names.length > 0);
    if (sec.list) {
      const steps = names.filter((n) => n.endsWith(' non-finite'));
      sec.list.hidden = steps.length === 0;
      sec.list.replaceChildren(...steps.map((n) => h('li', {}, `${n} value(s) dropped`)));
    }
    this.refreshCounts();
  }

  // ------------------------------------------------------------ health hints

  /**
   * The firing health hints of a chart (charts/health.js; [] when none): its section's header counts
   * the charts that warn and lists their messages in its tooltip.
   */
  setHealth(chart, messages) {
    const sec = chart.place && this.sectionByKey.get(chart.place.sectionKey);
    if (!sec) return;
    sec.health ??= new Map();
    if (messages.length) sec.health.set(chart, messages);
    else if (!sec.health.delete(chart)) return;
    if (!sec.healthFlag) {
      sec.healthFlag = h('span', { class: 'badge health-flag', dataset: { healthFlag: '' } });
      sec.toggle.append(sec.healthFlag);
    }
    const lines = [...sec.health].map(([c, m]) => `${c.title.textContent}: ${m.join(' · ')}`);
    sec.healthFlag.hidden = lines.length === 0;
    sec.healthFlag.textContent = lines.length ? `\u26a0 ${lines.length}` : '';
    sec.healthFlag.title = lines.join('\n');
  }

  section(place) {
    let sec = this.sectionByKey.get(place.sectionKey);
    if (sec) return sec;
    const key = place.sectionKey;
    const open = this.isOpen(key);
    const bodyId = `sec-${this.sectionByKey.size + 1}`;
    const toggle = h('button', { type: 'button', class: 'section-toggle', 'aria-expanded': String(open),
      'aria-controls': bodyId }, h('span', { class: 'caret', 'aria-hidden': 'true' }),
    h('span', { class: 'section-title' }, place.sectionTitle), h('span', { class: 'count' }));
    const quality = key === `fixed:${QUALITY_SECTION}`;
    const flag = quality ? h('span', { class: 'badge quality-flag', dataset: { qualityFlag: '' }, hidden: true }) : null;
    if (flag) toggle.append(flag);
    const list = quality ? h('ul', { class: 'quality-list', hidden: true }) : null;
    const body = h('div', { class: 'section-body', id: bodyId, hidden: !open }, list);
    const el = h('section', { class: 'section', dataset: { section: key } }, h('h2', {}, toggle), body);
    sec = { key, rank: place.sectionRank, el, body, toggle, flag, list, groups: [], groupByKey: new Map() };
    toggle.addEventListener('click', () => this.setOpen(sec, toggle.getAttribute('aria-expanded') !== 'true'));
    this.sectionByKey.set(key, sec);
    insertSorted(this.root, this.sections, sec);
    return sec;
  }

  group(sec, place) {
    let g = sec.groupByKey.get(place.groupKey);
    if (g) return g;
    const grid = h('div', { class: 'grid' });
    const el = h('div', { class: 'group' }, place.groupTitle ? h('h3', { class: 'group-title' }, place.groupTitle) : null, grid);
    g = { rank: place.groupRank, el, grid, charts: [] };
    sec.groupByKey.set(place.groupKey, g);
    insertSorted(sec.body, sec.groups, g);
    return g;
  }

  setOpen(sec, open) {
    sec.toggle.setAttribute('aria-expanded', String(open));
    sec.body.hidden = !open;
    // Data quality opens on request only: what is remembered for it is being open.
    const mark = sec.key === `fixed:${QUALITY_SECTION}` ? `open:${sec.key}` : sec.key;
    if (open === (mark !== sec.key)) this.collapsed.add(mark);
    else this.collapsed.delete(mark);
    saveCollapsed(this.collapsed);
  }

  isOpen(key) {
    return key === `fixed:${QUALITY_SECTION}` ? this.collapsed.has(`open:${key}`) : !this.collapsed.has(key);
  }

  /** Page order of every chart (the draw queue's tie-breaker). */
  renumber() {
    let n = 0;
    for (const sec of this.sections) {
      for (const g of sec.groups) for (const c of g.charts) c.chart.order = n++;
    }
  }

  /** Show only charts matching the search; hide groups and sections left empty. */
  setFilter(filter) {
    this.filter = filter;
    for (const chart of this.charts.values()) chart.el.hidden = !this.matches(chart);
    this.refreshCounts();
  }

  refreshCounts() {
    for (const sec of this.sections) {
      let shown = 0;
      for (const g of sec.groups) {
        const n = g.charts.filter((c) => !c.el.hidden).length;
        g.el.hidden = n === 0;
        shown += n;
      }
      sec.el.hidden = shown === 0 && !(sec.flag && !sec.flag.hidden);
      sec.toggle.querySelector('.count').textContent = String(shown);
    }
  }

  hasEntries() {
    return this.charts.size > 0;
  }

  visibleCount() {
    let n = 0;
    for (const c of this.charts.values()) if (!c.el.hidden) n++;
    return n;
  }

  /** Redraw every chart near the viewport (settings, colours or theme changed). */
  invalidateAll() {
    for (const c of this.charts.values()) if (c.near) c.setNear(true);
  }
}

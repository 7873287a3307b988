// The All view: collapsible sections and groups of chart cards, built incrementally as catalog
// entries arrive (snapshot, then live), kept in page order, filtered by the metric search.

import { compareRanks, Placer } from './catalog.js';
import { Chart } from './chart.js';
import { h } from './dom.js';
import { loadCollapsed, saveCollapsed } from './prefs.js';

function insertSorted(parent, list, item) {
  let i = list.findIndex((other) => compareRanks(item.rank, other.rank) < 0);
  if (i < 0) i = list.length;
  const before = list[i]?.el ?? null;
  list.splice(i, 0, item);
  parent.insertBefore(item.el, before);
}

export class AllView {
  constructor(root, page) {
    this.root = root;
    this.page = page;
    this.placer = new Placer();
    this.sections = [];
    this.sectionByKey = new Map();
    this.charts = new Map();
    this.collapsed = loadCollapsed();
    this.filter = { test: () => true };
    this.order = 0;
  }

  /** Add charts for new catalog entries (any run); returns the new Chart objects. */
  add(entries) {
    const made = [];
    for (const entry of entries) {
      // A normalized series is not a chart of its own: Normalize switches its twin's chart.
      if (entry.normalized || this.charts.has(entry.id)) continue;
      const place = this.placer.place(entry);
      const group = this.group(this.section(place), place);
      const chart = new Chart(entry, this.page);
      chart.place = place;
      this.charts.set(entry.id, chart);
      insertSorted(group.grid, group.charts, { rank: place.chartRank, el: chart.el, chart });
      chart.el.hidden = !this.filter.test(entry);
      made.push(chart);
    }
    if (made.length) {
      this.renumber();
      this.refreshCounts();
      for (const chart of made) this.page.visibility.observe(chart);
    }
    return made;
  }

  section(place) {
    let sec = this.sectionByKey.get(place.sectionKey);
    if (sec) return sec;
    const key = place.sectionKey;
    const open = !this.collapsed.has(key);
    const bodyId = `sec-${this.sectionByKey.size + 1}`;
    const toggle = h('button', { type: 'button', class: 'section-toggle', 'aria-expanded': String(open),
      'aria-controls': bodyId }, h('span', { class: 'caret', 'aria-hidden': 'true' }),
    h('span', { class: 'section-title' }, place.sectionTitle), h('span', { class: 'count' }));
    const body = h('div', { class: 'section-body', id: bodyId, hidden: !open });
    const el = h('section', { class: 'section', dataset: { section: key } }, h('h2', {}, toggle), body);
    sec = { key, rank: place.sectionRank, el, body, toggle, groups: [], groupByKey: new Map() };
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
    if (open) this.collapsed.delete(sec.key);
    else this.collapsed.add(sec.key);
    saveCollapsed(this.collapsed);
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
    for (const chart of this.charts.values()) chart.el.hidden = !filter.test(chart.entry);
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
      sec.el.hidden = shown === 0;
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

// @ts-check
// The Custom view's metric list: every metric of the runs shown as a tree (section → group →
// metric, custom/tree.js) with its own search, counts and readable labels. A metric drags onto
// the board as a new plot, a group as a new group of plots (the metrics its search shows);
// their Add buttons do the same at the end of the last section. Metrics on the board are
// marked. Everything starts open; what the reader closes stays closed in this browser. Built
// again when entries arrive or a search changes (never in the middle of a drag).

import { PLOTS, sortable, whenIdle } from './drag.js';
import { metricLabel, paletteTree } from './tree.js';
import { h } from '../core/dom.js';
import { compileSearch } from '../core/text.js';

const CLOSED_KEY = 'telescope.palette.closed.v1';

function loadClosed() {
  try {
    const v = JSON.parse(localStorage.getItem(CLOSED_KEY) ?? '[]');
    return new Set(Array.isArray(v) ? v.filter((k) => typeof k === 'string') : []);
  } catch {
    return new Set();
  }
}

function saveClosed(set) {
  try {
    localStorage.setItem(CLOSED_KEY, JSON.stringify([...set]));
  } catch {
    // storage full or off: the tree just opens again next time
  }
}

export class Palette {
  /** `view`: {drop(el, container, index), addMetric(entry), addGroup(group), onBoard()}. */
  constructor(view) {
    this.view = view;
    this.entries = [];
    this.closed = loadClosed(); // keys of the sections and groups the reader closed
    this.groups = new Map(); // group key -> {title, section, entries}
    this.sortables = [];
    /** @type {import('../core/text.js').Search} */
    this.pageFilter = { test: () => true };
    this.search = h('input', { type: 'search', class: 'palette-search', name: 'palette-search',
      placeholder: 'Find a metric', 'aria-label': 'Find a metric', autocomplete: 'off' });
    this.search.addEventListener('input', () => this.renderSoon());
    this.total = h('span', { class: 'count' });
    this.tree = h('ul', { class: 'palette-tree', 'aria-label': 'Metrics to add' });
    this.tree.addEventListener('click', (ev) => this.clicked(ev));
    this.el = h('aside', { class: 'palette', 'aria-label': 'Metrics' }, h('h2', {}, 'Metrics ', this.total),
      this.search, h('p', { class: 'muted palette-help' }, 'Drag a metric or a whole group onto the board, or press Add.'),
      this.tree);
  }

  add(entries) {
    this.entries.push(...entries.filter((e) => !e.normalized));
    this.renderSoon();
  }

  setFilter(filter) {
    this.pageFilter = filter;
    this.renderSoon();
  }

  renderSoon() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => whenIdle(() => {
      this.queued = false;
      this.render();
    }));
  }

  render() {
    const own = compileSearch(this.search.value);
    const tree = paletteTree(this.entries, (e) => this.pageFilter.test(e) && own.test(e));
    const searching = Boolean(this.search.value.trim());
    const key = /** @type {HTMLElement | null} */ (document.activeElement)?.dataset?.focusKey;
    for (const s of this.sortables) s.destroy();
    this.sortables = [];
    this.groups.clear();
    this.tree.replaceChildren(...tree.map((sec) => this.section(sec, searching)));
    this.total.textContent = String(tree.reduce((n, s) => n + s.count, 0));
    if (key) this.tree.querySelector(`[data-focus-key="${CSS.escape(key)}"]`)?.focus();
    this.mark(this.view.onBoard());
  }

  /** A list of the tree: dragged from as copies, never dropped on. */
  list(items, hidden) {
    const ul = h('ul', { class: 'palette-list', hidden }, ...items);
    this.sortables.push(sortable(ul, { group: { name: PLOTS, pull: 'clone', put: false }, sort: false,
      draggable: '.palette-item, .palette-group' }, (el, cid, index) => this.view.drop(el, cid, index)));
    return ul;
  }

  toggle(key, title, count, open) {
    return h('button', { type: 'button', class: 'palette-toggle', 'aria-expanded': String(open),
      dataset: { toggle: key, focusKey: `t:${key}` } }, h('span', { class: 'caret', 'aria-hidden': 'true' }),
    h('span', { class: 'palette-name' }, title), h('span', { class: 'count' }, String(count)));
  }

  section(sec, searching) {
    const open = searching || !this.closed.has(sec.key);
    const items = sec.items.map((it) => (it.type === 'group' ? this.group(it, sec, searching) : this.metric(it.entry, sec)));
    return h('li', { class: 'palette-section', dataset: { key: sec.key } },
      this.toggle(sec.key, sec.title, sec.count, open), this.list(items, !open));
  }

  group(g, sec, searching) {
    const open = searching || !this.closed.has(g.key);
    this.groups.set(g.key, { title: g.title, section: sec.title, entries: g.entries });
    const add = h('button', { type: 'button', class: 'tool add', dataset: { addGroup: g.key, focusKey: `g:${g.key}` },
      'aria-label': `Add group ${g.title} (${g.count} plots)` }, 'Add');
    return h('li', { class: 'palette-group', dataset: { drag: 'metrics', groupKey: g.key, section: sec.title } },
      h('div', { class: 'palette-group-head' }, this.toggle(g.key, g.title, g.count, open), add),
      this.list(g.entries.map((e) => this.metric(e, sec)), !open));
  }

  metric(entry, sec) {
    const { title, detail } = metricLabel(entry);
    const add = h('button', { type: 'button', class: 'tool add', dataset: { addMetric: entry.id, focusKey: `m:${entry.id}` },
      'aria-label': `Add ${title}${detail ? ` (${detail})` : ''}` }, 'Add');
    return h('li', { class: 'palette-item', title: entry.id,
      dataset: { drag: 'metric', metricId: entry.id, section: sec.title } },
    h('span', { class: 'palette-label' }, h('span', { class: 'palette-title' }, title),
      detail ? h('span', { class: 'palette-detail muted' }, ` ${detail}`) : null), add);
  }

  /** Buttons of the tree: open or close a section or group, add a metric or a group. */
  clicked(ev) {
    const btn = ev.target.closest('button');
    if (!btn) return;
    const d = btn.dataset;
    if (d.toggle !== undefined) {
      const open = btn.getAttribute('aria-expanded') !== 'true';
      btn.setAttribute('aria-expanded', String(open));
      btn.parentElement.closest('li').querySelector(':scope > ul, :scope > .palette-list').hidden = !open;
      if (open) this.closed.delete(d.toggle);
      else this.closed.add(d.toggle);
      saveClosed(this.closed);
    } else if (d.addMetric) {
      const entry = this.entries.find((e) => e.id === d.addMetric);
      if (entry) this.view.addMetric(entry, btn.closest('li').dataset.section);
    } else if (d.addGroup) {
      const g = this.groups.get(d.addGroup);
      if (g) this.view.addGroup(g);
    }
  }

  /** A group of the list by key (what a dragged group brings): {title, section, entries}. */
  groupOf(key) {
    return this.groups.get(key) ?? null;
  }

  /** Mark the metrics on the board (`ids`: a Set of series ids). */
  mark(ids) {
    for (const li of this.tree.querySelectorAll('.palette-item')) {
      li.classList.toggle('on-board', ids.has(li.dataset.metricId));
    }
  }

  focus() {
    this.search.focus();
  }
}

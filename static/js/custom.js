// The Custom view: the project's own dashboard. A palette lists every metric of the runs shown;
// charts are added from it (button or drag and drop), reordered by dragging a card's header
// (or with its ← → buttons), made wide or removed. The layout, with each chart's settings, is
// saved on the server for the whole project (debounced), so it fits every run of it.

import { saveLayout } from './api.js';
import { defaultChartSettings } from './catalog.js';
import { Chart } from './chart.js';
import { h } from './dom.js';
import { addChart, labelOfId, moveChart, normalizeLayout, removeChart, setSettings, setWide } from './layout.js';

const SAVE_DELAY_MS = 400;
const DRAG_TYPE = 'application/x-telescope-series';

function entryTitle(entry) {
  const label = entry.label || entry.key;
  const where = [entry.section, entry.group].filter(Boolean).join(' / ');
  return `${where ? `${where} · ` : ''}${label}`;
}

export class CustomView {
  constructor(root, page, layout) {
    this.root = root;
    this.page = page;
    this.layout = normalizeLayout(layout);
    this.entries = new Map(); // catalog entries of every run shown, by series id
    this.charts = new Map(); // series id -> Chart, for layout charts with a known entry
    this.cards = new Map(); // series id -> card element (a Chart's, or a placeholder)
    this.items = new Map(); // series id -> palette item
    this.filter = { test: () => true };
    this.prefs = {
      get: (entry) => ({ ...defaultChartSettings(entry), ...this.item(entry.id)?.settings }),
      set: (entry, settings) => this.update(setSettings(this.layout.charts, entry.id, settings,
        defaultChartSettings(entry)), false),
    };
    this.build();
    this.renderBoard();
  }

  build() {
    this.status = h('span', { class: 'muted save-status', role: 'status' });
    this.list = h('ul', { class: 'palette-list', 'aria-label': 'Metrics to add' });
    this.hint = h('p', { class: 'board-hint muted' },
      'Your dashboard is empty. Drag metrics here from the list, or press Add.');
    this.board = h('div', { class: 'grid board', 'aria-label': 'Dashboard charts' });
    this.board.addEventListener('dragover', (ev) => this.dragOver(ev, null));
    this.board.addEventListener('drop', (ev) => this.drop(ev, null));
    const palette = h('aside', { class: 'palette', 'aria-label': 'Metrics' },
      h('h2', {}, 'Metrics'), h('p', { class: 'muted' }, 'Search with the box above.'), this.list);
    this.root.classList.add('custom');
    this.root.replaceChildren(h('div', { class: 'custom-layout' }, palette,
      h('div', { class: 'board-wrap' }, h('div', { class: 'board-head' }, this.status), this.hint, this.board)));
  }

  item(id) {
    return this.layout.charts.find((c) => c.id === id);
  }

  // ------------------------------------------------------------ the page's view interface

  /** New catalog entries (any run): list them; draw the layout charts they complete. */
  add(entries) {
    const made = [];
    for (const entry of entries) {
      if (this.entries.has(entry.id)) continue;
      this.entries.set(entry.id, entry);
      this.listEntry(entry);
      if (this.item(entry.id)) made.push(this.mount(entry.id));
    }
    if (made.length) this.renumber();
    return made.filter(Boolean);
  }

  hasEntries() {
    return this.entries.size > 0;
  }

  setFilter(filter) {
    this.filter = filter;
    for (const [id, li] of this.items) li.hidden = !filter.test(this.entries.get(id));
    for (const [id, card] of this.cards) {
      const entry = this.entries.get(id);
      card.hidden = Boolean(entry) && !filter.test(entry);
    }
  }

  visibleCount() {
    let n = 0;
    for (const card of this.cards.values()) if (!card.hidden) n++;
    return n;
  }

  invalidateAll() {
    for (const c of this.charts.values()) if (c.near) c.setNear(true);
  }

  // ------------------------------------------------------------ palette

  listEntry(entry) {
    const add = h('button', { type: 'button', class: 'tool add', 'aria-label': `Add ${entryTitle(entry)}`,
      onclick: () => this.update(addChart(this.layout.charts, entry.id)) }, 'Add');
    const li = h('li', { class: 'palette-item', draggable: 'true', dataset: { metricId: entry.id } },
      h('span', { class: 'palette-label', title: entry.id }, entryTitle(entry),
        entry.kind === 'step' || !entry.stat ? null : h('span', { class: 'muted' }, ` ${entry.stat}`),
        entry.env ? h('span', { class: 'muted' }, ` (${entry.env})`) : null), add);
    li.addEventListener('dragstart', (ev) => this.dragStart(ev, entry.id));
    li.hidden = !this.filter.test(entry);
    this.items.set(entry.id, li);
    this.list.append(li);
    this.markListed(entry.id);
  }

  markListed(id) {
    const li = this.items.get(id);
    if (!li) return;
    const added = Boolean(this.item(id));
    li.classList.toggle('added', added);
    const btn = li.querySelector('button.add');
    btn.disabled = added;
    btn.textContent = added ? 'Added' : 'Add';
  }

  // ------------------------------------------------------------ board

  /** Make the board's cards follow the layout: create, reorder, drop what left it. */
  renderBoard() {
    const wanted = new Set(this.layout.charts.map((c) => c.id));
    for (const id of [...this.cards.keys()]) if (!wanted.has(id)) this.unmount(id);
    for (const c of this.layout.charts) {
      if (!this.cards.has(c.id)) this.mount(c.id);
      this.cards.get(c.id).classList.toggle('wide', c.wide);
    }
    this.board.replaceChildren(...this.layout.charts.map((c) => this.cards.get(c.id)));
    this.hint.hidden = this.layout.charts.length > 0;
    for (const id of this.items.keys()) this.markListed(id);
    this.renumber();
  }

  /** The card of a layout chart: a live Chart once its entry is known, else a placeholder. */
  mount(id) {
    const entry = this.entries.get(id);
    const old = this.cards.get(id);
    if (old?.chart) return null;
    let card;
    let chart = null;
    if (entry) {
      chart = new Chart(entry, this.page);
      // Out of its section, a chart needs its full name (`loss/policy`, not `policy`).
      chart.title.textContent = entry.kind === 'step' ? entry.key : entryTitle(entry);
      this.charts.set(id, chart);
      card = chart.el;
    } else {
      card = h('article', { class: 'chart missing' }, h('header', { class: 'chart-head' },
        h('h4', { class: 'chart-title', title: id }, labelOfId(id)), h('div', { class: 'chart-tools' })),
      h('p', { class: 'chart-note' }, 'Not in the runs shown (yet).'));
    }
    card.dataset.layoutId = id;
    card.classList.toggle('wide', Boolean(this.item(id)?.wide));
    card.hidden = Boolean(entry) && !this.filter.test(entry);
    this.decorate(card, id);
    this.cards.set(id, card);
    if (old) old.replaceWith(card);
    if (chart) this.page.visibility.observe(chart);
    return chart;
  }

  unmount(id) {
    const chart = this.charts.get(id);
    if (chart) {
      this.page.visibility.unobserve(chart);
      chart.purge();
      this.charts.delete(id);
    }
    this.cards.get(id)?.remove();
    this.cards.delete(id);
  }

  /** The layout tools on a card, and its header as the drag handle. */
  decorate(card, id) {
    const name = card.querySelector('.chart-title').textContent;
    const tool = (label, text, onclick) => h('button', { type: 'button', class: 'tool', 'aria-label': `${label} ${name}`,
      title: label, onclick }, text);
    card.querySelector('.chart-tools').append(
      tool('Move earlier', '←', () => this.shift(id, -1)),
      tool('Move later', '→', () => this.shift(id, 1)),
      tool('Toggle wide', '⇔', () => this.update(setWide(this.layout.charts, id, !this.item(id)?.wide))),
      tool('Remove', '×', () => this.update(removeChart(this.layout.charts, id))));
    const head = card.querySelector('.chart-head');
    head.draggable = true;
    head.classList.add('drag-handle');
    head.addEventListener('dragstart', (ev) => this.dragStart(ev, id));
    card.addEventListener('dragover', (ev) => this.dragOver(ev, id));
    card.addEventListener('drop', (ev) => this.drop(ev, id));
  }

  shift(id, by) {
    const at = this.layout.charts.findIndex((c) => c.id === id);
    this.update(moveChart(this.layout.charts, id, by > 0 ? at + 2 : at - 1));
    this.cards.get(id)?.querySelector(`.tool[title="${by > 0 ? 'Move later' : 'Move earlier'}"]`)?.focus();
  }

  renumber() {
    this.layout.charts.forEach((c, i) => {
      const chart = this.charts.get(c.id);
      if (chart) chart.order = i;
    });
  }

  // ------------------------------------------------------------ drag and drop

  dragStart(ev, id) {
    ev.dataTransfer.setData(DRAG_TYPE, id);
    ev.dataTransfer.setData('text/plain', id);
    ev.dataTransfer.effectAllowed = 'copyMove';
  }

  dragOver(ev, targetId) {
    if (!ev.dataTransfer.types.includes(DRAG_TYPE)) return;
    ev.preventDefault();
    if (targetId !== null) ev.stopPropagation();
    ev.dataTransfer.dropEffect = 'move';
  }

  /** Dropped on a card: the chart goes before it; on the board's free space: at the end. */
  drop(ev, targetId) {
    const id = ev.dataTransfer.getData(DRAG_TYPE);
    if (!id) return;
    ev.preventDefault();
    if (targetId !== null) ev.stopPropagation();
    if (id === targetId) return;
    const at = targetId === null ? this.layout.charts.length : this.layout.charts.findIndex((c) => c.id === targetId);
    this.update(addChart(this.layout.charts, id, at));
  }

  // ------------------------------------------------------------ saving

  update(charts, rerender = true) {
    if (charts === this.layout.charts) return;
    this.layout = { charts };
    if (rerender) {
      this.renderBoard();
      this.invalidateAll();
    }
    clearTimeout(this.saveTimer);
    this.status.textContent = 'Saving…';
    this.saveTimer = setTimeout(() => this.save(), SAVE_DELAY_MS);
  }

  async save() {
    const runId = this.page.runs[0]?.id;
    try {
      await saveLayout(runId, this.layout);
      this.status.textContent = 'Saved';
    } catch (err) {
      const why = err.body?.error ? `${err.body.field}: ${err.body.error}` : err.message;
      this.status.textContent = `Not saved (${why})`;
    }
  }
}

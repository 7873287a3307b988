// The Custom view: the project's own dashboard. A palette lists every metric of the runs shown;
// charts are added from it (button or drag and drop), reordered by dragging a card's header
// (or with its ← → buttons), made wide or removed. The layout, with each chart's settings, is
// saved on the server for the whole project (debounced), so it fits every run of it; a chart
// added starts from the settings this browser keeps for it in the All view.

import { deleteLayout, renameLayout, saveLayout } from './api.js';
import { defaultChartSettings } from './catalog.js';
import { Chart } from './chart.js';
import { h } from './dom.js';
import { ChartPrefs } from './prefs.js';
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
    this.name = layout?.name ?? 'default';
    this.names = Array.isArray(layout?.names) ? layout.names : [];
    this.base = layout?.updated_at ?? null; // the stored version these edits start from
    this.dirty = false;
    this.saving = null;
    addEventListener('pagehide', () => this.flush({ leaving: true }));
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
    this.allViewPrefs = new ChartPrefs();
    this.build();
    this.renderBoard();
  }

  build() {
    this.status = h('span', { class: 'muted save-status', role: 'status' });
    this.list = h('ul', { class: 'palette-list', 'aria-label': 'Metrics to add' });
    this.hint = h('p', { class: 'board-hint muted' },
      'Your dashboard is empty. Drag metrics here from the list, or press Add.');
    this.board = h('div', { class: 'grid board', 'aria-label': 'Dashboard charts' });
    for (const zone of [this.board, this.hint]) { // free space: the chart goes last
      zone.addEventListener('dragover', (ev) => this.dragOver(ev, null));
      zone.addEventListener('drop', (ev) => this.drop(ev, null));
    }
    const palette = h('aside', { class: 'palette', 'aria-label': 'Metrics' },
      h('h2', {}, 'Metrics'), h('p', { class: 'muted' }, 'Search with the box above.'), this.list);
    this.root.classList.add('custom');
    this.root.replaceChildren(h('div', { class: 'custom-layout' }, palette,
      h('div', { class: 'board-wrap' }, h('div', { class: 'board-head' }, this.dashboards(), this.status),
        this.hint, this.board)));
  }

  // ------------------------------------------------------------ dashboards of the project

  /** The dashboard picker with New, Rename and Delete. */
  dashboards() {
    this.picker = h('select', { class: 'dashboard-picker', 'aria-label': 'Dashboard' });
    this.picker.addEventListener('change', () => this.open(this.picker.value));
    this.fillPicker();
    this.nameInput = h('input', { type: 'text', name: 'dashboard', maxlength: '100', required: true,
      'aria-label': 'Dashboard name' });
    this.nameForm = h('form', { class: 'dashboard-name', hidden: true }, this.nameInput,
      h('button', { type: 'submit' }, 'OK'),
      h('button', { type: 'button', onclick: () => { this.nameForm.hidden = true; } }, 'Cancel'));
    this.nameForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.named(this.nameInput.value.trim());
    });
    const ask = (mode, value) => () => {
      this.nameMode = mode;
      this.nameInput.value = value;
      this.nameForm.hidden = false;
      this.nameInput.focus();
    };
    return h('div', { class: 'dashboards' }, this.picker,
      h('button', { type: 'button', class: 'tool', onclick: ask('new', '') }, 'New…'),
      h('button', { type: 'button', class: 'tool', onclick: () => ask('rename', this.name)() }, 'Rename…'),
      h('button', { type: 'button', class: 'tool', onclick: () => this.deleteDashboard() }, 'Delete'),
      this.nameForm);
  }

  fillPicker() {
    const names = this.names.includes(this.name) ? this.names : [...this.names, this.name];
    this.picker.replaceChildren(...names.map((n) => h('option', { value: n, selected: n === this.name }, n)));
  }

  async named(name) {
    if (!name) return;
    this.nameForm.hidden = true;
    if (this.nameMode === 'new') {
      this.open(name); // empty until its first chart; saved then
      return;
    }
    if (name === this.name) return;
    try {
      await this.flush();
      const got = await renameLayout(this.root.dataset.runId, this.name, name);
      this.name = got.name;
      this.names = got.names;
      this.fillPicker();
      history.replaceState(null, '', this.url(this.name));
      this.page.syncUrl(); // the view tabs follow
      this.status.textContent = 'Renamed';
    } catch (err) {
      this.status.textContent = err.status === 404 ? 'Not renamed: this dashboard is not saved yet.'
        : `Not renamed (${err.body?.error ?? err.message})`;
    }
  }

  async deleteDashboard() {
    if (!confirm(`Delete the dashboard “${this.name}” for the whole project?`)) return;
    clearTimeout(this.saveTimer);
    this.dirty = false;
    try {
      await this.saving;
      await deleteLayout(this.root.dataset.runId, this.name);
      location.assign(this.url(null));
    } catch (err) {
      this.status.textContent = `Not deleted (${err.body?.error ?? err.message})`;
    }
  }

  url(name) {
    const url = new URL(location.href);
    if (name === null || name === 'default') url.searchParams.delete('dashboard');
    else url.searchParams.set('dashboard', name);
    return url.toString();
  }

  async open(name) {
    await this.flush();
    location.assign(this.url(name));
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
      // Normalized series are shown through the Normalize toggle, not offered as charts.
      if (!entry.normalized) this.listEntry(entry);
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
      onclick: () => !this.item(entry.id) && this.place(entry.id, this.layout.charts.length) }, 'Add');
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
    btn.setAttribute('aria-disabled', String(added)); // not `disabled`: it keeps the focus
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
    const focused = document.activeElement;
    this.board.replaceChildren(...this.layout.charts.map((c) => this.cards.get(c.id)));
    if (focused && focused !== document.activeElement && focused.isConnected) focused.focus();
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
      tool('Remove', '×', () => this.remove(id)));
    const head = card.querySelector('.chart-head');
    head.draggable = true;
    head.classList.add('drag-handle');
    head.addEventListener('dragstart', (ev) => this.dragStart(ev, id));
    card.addEventListener('dragover', (ev) => this.dragOver(ev, id));
    card.addEventListener('drop', (ev) => this.drop(ev, id));
  }

  remove(id) {
    const at = this.layout.charts.findIndex((c) => c.id === id);
    this.update(removeChart(this.layout.charts, id));
    const next = this.layout.charts[Math.min(at, this.layout.charts.length - 1)];
    const target = next ? this.cards.get(next.id)?.querySelector('.chart-tools .tool') : this.items.get(id)?.querySelector('button.add');
    (target ?? this.list).focus?.();
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
    this.place(id, at);
  }

  /** Put `id` before index `at`: a move, or an addition that starts from the settings this
   * browser keeps for the chart in the All view. */
  place(id, at) {
    const fresh = !this.item(id);
    let charts = addChart(this.layout.charts, id, at);
    const entry = this.entries.get(id);
    if (fresh && entry) {
      charts = setSettings(charts, id, this.allViewPrefs.get(entry), defaultChartSettings(entry));
    }
    this.update(charts);
  }

  // ------------------------------------------------------------ saving

  update(charts, rerender = true) {
    const same = charts.length === this.layout.charts.length
      && charts.every((c, i) => c === this.layout.charts[i]);
    if (same) return; // e.g. the first chart moved earlier
    this.layout = { charts };
    if (rerender) {
      this.renderBoard();
      this.invalidateAll();
      this.page.applyFilter(); // the chart count follows
    }
    this.dirty = true;
    this.failed = false;
    clearTimeout(this.saveTimer);
    this.status.textContent = 'Saving…';
    this.saveTimer = setTimeout(() => this.flush(), SAVE_DELAY_MS);
  }

  /**
   * Save now if anything changed: one request at a time, based on the version last saved (a
   * dashboard changed elsewhere meanwhile is refused, not overwritten). `leaving`: the page is
   * going away, so the request must outlive it.
   */
  flush({ leaving = false } = {}) {
    clearTimeout(this.saveTimer);
    if (!this.dirty || this.conflict) return this.saving ?? Promise.resolve();
    if (this.saving && !leaving) return this.saving.then(() => this.flush());
    this.dirty = false;
    const runId = Number(this.root.dataset.runId);
    // Leaving during a save: its result never comes back, so this one cannot name a base.
    const body = this.saving ? { charts: this.layout.charts } : { charts: this.layout.charts, base: this.base };
    const request = saveLayout(runId, this.name, body, { keepalive: leaving }).then((saved) => {
      this.base = saved.updated_at;
      if (saved.names.join('\n') !== this.names.join('\n')) {
        this.names = saved.names;
        this.fillPicker();
      }
      if (!this.dirty) this.status.textContent = 'Saved';
    }, (err) => {
      if (err.status === 409) {
        this.conflict = true;
        this.status.textContent = 'Not saved: this dashboard was changed elsewhere. Reload to see it.';
        return;
      }
      this.dirty = true;
      this.failed = true;
      const why = err.body?.error ? `${err.body.field}: ${err.body.error}` : err.message;
      this.status.textContent = `Not saved (${why}); the next change retries.`;
    }).finally(() => {
      if (this.saving === request) this.saving = null;
      if (this.dirty && !this.failed && !this.conflict) this.flush();
    });
    this.saving = request;
    return request;
  }
}

// @ts-check
// The Custom view (`?view=custom`): the project's own dashboards. This module puts the parts
// together and is the Metrics page's view (add, setFilter, charts, chartFor, flush, ...): the
// dashboards above (custom/dashboards.js), the metric list (custom/palette.js), the board of
// sections, groups and plots (custom/board.js, on SortableJS through custom/drag.js), each plot
// a chart card (custom/plot.js), and saving (custom/store.js). The layout (custom/layout.js, edited by
// custom/ops.js) is the one truth: every edit makes a new one, the board follows, it is saved.

import { defaultChartSettings } from '../core/catalog.js';
import { Board } from './board.js';
import { Dashboards } from './dashboards.js';
import { dragged, whenIdle } from './drag.js';
import {
  addSeries, dropInto, findNode, NEW_SECTION, removeSeries, setAxis, setPlotSettings,
} from './ops.js';
import { Palette } from './palette.js';
import { nameCard, placeholder, Plot } from './plot.js';
import { LayoutSaver } from './store.js';
import { metricLabel, passes, plotTitle, seriesChoices } from './tree.js';
import { h } from '../core/dom.js';
import { normalizeLayout, plotsOf, SETTINGS } from './layout.js';
import { ChartPrefs } from '../charts/prefs.js';

export class CustomView {
  constructor(root, page, stored) {
    this.root = root;
    this.page = page;
    this.runId = Number(root.dataset.runId);
    this.name = stored?.name ?? 'default';
    this.names = Array.isArray(stored?.names) ? stored.names : [];
    this.layout = normalizeLayout(stored);
    this.entries = new Map(); // catalog entries of every run shown, by series id
    this.charts = new Map(); // plot id -> Plot (a plot some run shown has a series of)
    this.placeholders = new Map(); // plot id -> card of a plot no run shown has yet
    /** @type {import('../core/text.js').Search} */
    this.filter = { test: () => true };
    this.allViewPrefs = new ChartPrefs(); // a plot added starts from its All view settings
    this.prefs = {
      get: (entry) => ({ ...defaultChartSettings(entry), ...findNode(this.layout, entry.plotId)?.node.settings }),
      set: (entry, settings) => this.edit((l) => setPlotSettings(l, entry.plotId, settings, defaultChartSettings(entry)),
        { rerender: false }),
    };
    this.saver = new LayoutSaver({ runId: this.runId, name: this.name, base: stored?.updated_at ?? null,
      read: () => this.layout, onStatus: (text) => this.status(text), onSaved: (saved) => this.saved(saved) });
    addEventListener('pagehide', () => this.flush({ leaving: true }));
    this.statusEl = h('span', { class: 'muted save-status', role: 'status' });
    this.palette = new Palette(this);
    this.board = new Board(this);
    this.dashboards = new Dashboards(this);
    root.classList.add('custom');
    root.replaceChildren(h('div', { class: 'custom-layout' }, this.palette.el,
      h('div', { class: 'board-wrap' }, h('div', { class: 'board-head' }, this.dashboards.el, this.statusEl),
        this.board.wrap)));
    this.render();
  }

  // ------------------------------------------------------------ the page's view interface

  /** New catalog entries (any run): listed; the plots they complete are drawn. */
  add(entries) {
    const fresh = entries.filter((e) => !this.entries.has(e.id));
    for (const e of fresh) this.entries.set(e.id, e);
    if (!fresh.length) return [];
    this.palette.add(fresh);
    const ids = new Set(fresh.map((e) => e.id));
    const made = [];
    for (const { plot } of plotsOf(this.layout)) {
      if (!plot.series.some((s) => ids.has(s.id))) continue;
      const have = this.charts.get(plot.id);
      if (have) have.refresh();
      else made.push(plot.id);
    }
    if (made.length) whenIdle(() => this.render());
    this.index = null;
    return made.map((id) => this.charts.get(id)).filter(Boolean);
  }

  hasEntries() {
    return this.entries.size > 0;
  }

  setFilter(filter) {
    this.filter = filter;
    this.palette.setFilter(filter);
    this.applyFilter();
  }

  visibleCount() {
    return plotsOf(this.layout).filter(({ plot }) => !this.cardFor(plot).hidden).length;
  }

  invalidateAll() {
    for (const c of this.charts.values()) if (c.near) c.setNear(true);
  }

  /** What to redraw when series `sid` changes: every plot drawing it (several may). */
  chartFor(sid) {
    if (!this.index) {
      this.index = new Map();
      for (const plot of this.charts.values()) {
        for (const id of plot.rawIds()) (this.index.get(id) ?? this.index.set(id, new Set()).get(id)).add(plot);
      }
    }
    const plots = this.index.get(sid);
    return plots ? { invalidate: () => plots.forEach((p) => p.invalidate()) } : null;
  }

  flush(options) {
    return this.saver.flush(options);
  }

  // ------------------------------------------------------------ edits

  /** Apply `fn` to the layout; the board follows and the layout is saved when it changed. */
  edit(fn, { always = false, rerender = true } = {}) {
    const next = fn(this.layout);
    if (next === this.layout) {
      if (always) this.render(); // a refused drop: the DOM goes back
      return false;
    }
    this.layout = next;
    if (rerender) this.render();
    this.saver.changed();
    return true;
  }

  render() {
    const widths = new Map([...this.charts].map(([id, c]) => [id, c.el.classList.contains('wide')]));
    this.board.render(this.layout);
    const alive = new Set();
    plotsOf(this.layout).forEach(({ plot }, i) => {
      alive.add(plot.id);
      const chart = this.charts.get(plot.id);
      if (!chart) return;
      chart.order = i;
      if (chart.rendered && widths.has(plot.id) && widths.get(plot.id) !== plot.wide) window.Plotly.Plots.resize(chart.plot);
    });
    for (const [id, chart] of this.charts) {
      if (alive.has(id)) continue;
      this.page.visibility.unobserve(chart);
      chart.purge();
      this.charts.delete(id);
    }
    for (const id of this.placeholders.keys()) if (!alive.has(id)) this.placeholders.delete(id);
    this.index = null;
    this.palette.mark(this.onBoard());
    this.applyFilter();
    this.invalidateAll();
  }

  /** The card of a layout plot: a live Plot once a run shown has one of its series. */
  cardFor(node) {
    const chart = this.charts.get(node.id);
    if (chart) {
      chart.setNode(node);
      return chart.el;
    }
    if (node.series.some((s) => this.entries.has(s.id))) {
      const id = node.id;
      const plot = new Plot(node, this.entries, this.page, {
        setAxis: (sid, axis) => this.edit((l) => setAxis(l, id, sid, axis)),
        removeSeries: (sid) => this.edit((l) => removeSeries(l, id, sid)),
        addSeries: (sid, axis) => this.edit((l) => addSeries(l, id, sid, axis)),
        options: () => seriesChoices([...this.entries.values()]),
      });
      this.charts.set(id, plot);
      this.placeholders.delete(id);
      this.page.visibility.observe(plot);
      return plot.el;
    }
    if (!this.placeholders.has(node.id)) this.placeholders.set(node.id, placeholder());
    const card = this.placeholders.get(node.id);
    nameCard(card, node);
    return card;
  }

  plotOf(id) {
    return this.charts.get(id) ?? null;
  }

  /** Show only plots the search finds (by a series or their title). */
  applyFilter() {
    const f = this.filter;
    for (const { plot } of plotsOf(this.layout)) {
      const card = this.cardFor(plot);
      const title = plotTitle(plot);
      const known = plot.series.map((s) => this.entries.get(s.id)).filter(Boolean);
      card.hidden = known.length > 0 && !f.test({ key: title, label: title }) && !known.some((e) => passes(f.test, e));
    }
  }

  onBoard() {
    return new Set(plotsOf(this.layout).flatMap(({ plot }) => plot.series.map((s) => s.id)));
  }

  // ------------------------------------------------------------ from the metric list

  /** The settings a new plot of `entry` starts from: this browser's All view ones. */
  initialSettings(entry) {
    const defaults = defaultChartSettings(entry);
    const mine = this.allViewPrefs.get(entry);
    return Object.fromEntries(SETTINGS.filter((k) => k in mine && mine[k] !== defaults[k]).map((k) => [k, mine[k]]));
  }

  /** What a dropped element brings: a node of the board, a metric or a group of the list. */
  dropped(el) {
    const d = dragged(el);
    if (d.node) return d;
    if (d.metric) {
      const entry = this.entries.get(d.metric);
      return entry ? { metric: d.metric, settings: this.initialSettings(entry), section: d.section } : null;
    }
    const g = this.palette.groupOf(d.group);
    return g ? { ids: g.entries.map((e) => e.id), title: g.title, section: g.section } : null;
  }

  drop(el, cid, index) {
    this.board.drop(el, cid, index);
  }

  /** Add at the end of the last section (a new one when there is none). */
  addAtEnd(what, text) {
    const last = this.layout.sections.at(-1);
    const ok = this.edit((l) => dropInto(l, what, last ? last.id : NEW_SECTION, last ? last.items.length : 0));
    this.status(ok ? `Added ${text} to “${this.layout.sections.at(-1).title}”` : `Not added: ${text}`);
  }

  addMetric(entry, section) {
    this.addAtEnd({ metric: entry.id, settings: this.initialSettings(entry), section }, metricLabel(entry).title);
  }

  addGroup(g) {
    this.addAtEnd({ ids: g.entries.map((e) => e.id), title: g.title, section: g.section }, `group ${g.title}`);
  }

  focusList() {
    this.palette.focus();
  }

  // ------------------------------------------------------------ dashboards and saving

  status(text) {
    this.statusEl.textContent = text;
  }

  saved(stored) {
    if (stored.names.join('\n') === this.names.join('\n')) return;
    this.names = stored.names;
    this.dashboards.fill();
  }

  discard() {
    this.saver.drop();
  }

  renamed(stored) {
    this.name = stored.name;
    this.names = stored.names;
    this.saver.name = stored.name;
    this.page.syncUrl(); // the view tabs follow
  }
}

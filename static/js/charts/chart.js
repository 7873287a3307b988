// @ts-check
// One chart card, the base of both views' cards: its DOM, per-chart settings (and their badges),
// Plotly rendering and release, zoom-driven detail loading, fullscreen, CSV and PNG export. The
// All view (charts/view.js) makes a Chart per family of series (compose.familyKey); the Custom view's
// plots (custom/plot.js `Plot`) extend it to draw a layout plot's series. The run legend
// (charts/legend.js) and the synced cursor (charts/cursor.js) attach to its plot.

import { addonDrawn, addonTools } from './addons.js';
import { getSeries, MAX_POINTS_LIMIT } from '../core/api.js';
import { download, h, icon } from '../core/dom.js';
import { familyHelp, familyTitle, offers, selectMembers, TWINNED_STATS } from './compose.js';
import { buildComposedFigure } from './composed.js';
import { attachCursor } from './cursor.js';
import { legendParts, legendSignature, RunLegend } from './legend.js';
import { chartBadge, normalizes } from './normalized.js';
import { originOf, showOrigin } from './origin.js';
import { chartDefaults, settingBadges } from './prefs.js';
import { describe, describeSeries, tooltip } from '../core/registry.js';
import { escapePlotly, safeFilename, toCSV } from '../core/text.js';
import { sketch } from './sketch.js';
import { buildStateFigure } from './states.js';
import { RANGE_REFRESH_MS } from './store.js';
import { buildFigure } from './traces.js';
import { fromPayload, spliceDetail } from './transforms.js';

const PLOT_CONFIG = { displayModeBar: false, responsive: true, doubleClick: 'autosize' };
// One formatter: toLocaleString makes one per call (a state strip's legend, first drawn with the
// first screen, spent ~25 ms of a cold load in them).
const COUNT = new Intl.NumberFormat('en-US');

let settingsCounter = 0;

// Charts drawn since the page was last idle, whose folded toolbar is placed then: all their
// plots' tops read in one layout, after the draws (read after each draw, it forced a layout per
// chart of the first screen), so the toolbar is where it opens before anyone points at it.
const unplaced = new Set();
const whenIdle = window.requestIdleCallback ?? ((fn) => setTimeout(fn, 50));

function placeLater(chart) {
  if (!unplaced.size) {
    whenIdle(() => {
      const charts = [...unplaced];
      unplaced.clear();
      const tops = charts.map((c) => c.plot.offsetTop); // every read, then every write
      charts.forEach((c, i) => c.placeTools(tops[i]));
    });
  }
  unplaced.add(chart);
}

/**
 * What a chart of the All view says of itself, from the registry: {title, description, tip,
 * unit, integer} of the entry naming it, null for a key the registry does not know (it keeps
 * its key). A timeline family's "?" lists each of its lines; a derived family's names its
 * statistic in words (`reasoning_steps · inequality within groups (Gini)`).
 */
export function chartWords(entry) {
  const info = describeSeries(entry);
  if (!info) return null;
  const help = entry.kind === 'timeline' ? familyHelp(entry) : null;
  const id = entry.kind === 'step' || entry.kind === 'timeline' || !entry.stat || entry.stat === entry.key
    ? entry.key : `${entry.key} \u00b7 ${entry.stat}`;
  return { ...info, ...(help ?? { tip: tooltip(id, info) }) };
}

export class Chart {
  /**
   * `page` supplies: runs (RunStores, primary first, each with .info.name and .color), loader,
   * scheduler, prefs (ChartPrefs), settings (page controls), theme(), stdIdFor(entry).
   */
  constructor(entry, page, family = null) {
    this.entry = entry;
    this.id = entry.id;
    this.page = page;
    // With a family (the All view's charts), a composed chart: every series of its
    // compose.familyKey, each run's own. Without one (the Custom view's Plot), its entry's
    // series and band: what a Plot's state strip draws; its line plots override ids/figure.
    this.family = family;
    // A composed chart's legend choices (envelope, env filter) are settings too, saved with them.
    this.settings = { ...chartDefaults(entry, Boolean(family)), ...page.prefs.get(entry, Boolean(family)) };
    /** @type {object | null} its place in the All view (core/catalog.js Placer; charts/view.js) */
    this.place = null;
    /** whether it is in the All view's Data quality section */
    this.quality = false;
    this.near = false;
    this.inView = false;
    this.rendered = false;
    this.lastDraw = 0;
    this.zoom = null;
    this.detail = new Map();
    this.order = 0;
    this.build();
  }

  build() {
    const e = this.entry;
    const label = this.family ? familyTitle(e) : e.label || e.key;
    // A categorical key is a state strip: no EMA, outliers, log y or band, so no settings.
    this.categorical = Boolean(e.categorical);
    // A registered step key (or a derived timing_* series of its name) gets its human title and
    // a "?" with what it means; others keep the key. A timeline family's (charts/compose.js)
    // names what its lines are.
    const keyed = e.kind === 'step' || e.kind === 'timeline';
    const info = this.family ? chartWords(e) : keyed ? describe(e.key) : null;
    this.words = this.family ? info : null; // the y axis' unit and integer ticks
    const tip = info && (this.family ? info.tip : tooltip(e.key, info));
    this.title = h('h4', { class: 'chart-title', title: keyed ? e.key : `${e.key} · ${e.stat ?? ''}` },
      info ? info.title : label);
    const help = info ? h('span', { class: 'chart-help', tabindex: '0', role: 'img', title: tip,
      'aria-label': `About ${info.title}: ${info.description}`, dataset: { help: e.key } }, '?') : null;
    this.settingsBtn = h('button', { type: 'button', class: 'tool', 'aria-expanded': 'false',
      'aria-label': `Settings of ${label}`, title: 'Chart settings', onclick: () => this.toggleSettings() }, icon('gear'));
    const tools = h('div', { class: 'chart-tools' },
      this.categorical ? null : this.settingsBtn,
      h('button', { type: 'button', class: 'tool', 'aria-label': `Fullscreen ${label}`, title: 'Fullscreen',
        onclick: () => this.fullscreen() }, icon('expand')),
      h('button', { type: 'button', class: 'tool', 'aria-label': `Download CSV of ${label}`, title: 'Download CSV',
        onclick: () => this.exportCSV() }, 'CSV'),
      h('button', { type: 'button', class: 'tool', 'aria-label': `Download PNG of ${label}`, title: 'Download PNG',
        onclick: () => this.exportPNG() }, 'PNG'),
      ...addonTools(this));
    // data-series-id stays the catalog entry's (raw) id whatever Normalize shows, so a chart
    // keeps one identity; data-plotted-id names the series drawn for the first run.
    this.plot = h('div', { class: this.categorical ? 'plot states' : 'plot',
      dataset: { seriesId: e.id, plottedId: e.id } });
    this.legend = this.categorical ? h('ul', { class: 'state-legend', dataset: { stateLegend: '' },
      'aria-label': `Values of ${label}` }) : null;
    // Its own line under the header: a per-env range list is long, the title keeps its room.
    this.badge = h('span', { class: 'badge range-badge', dataset: { rangeBadge: '' }, hidden: true });
    // What differs from the chart's default settings, at a glance.
    this.badges = h('div', { class: 'setting-badges', dataset: { settingBadges: '' }, hidden: true });
    this.note = h('p', { class: 'chart-note' });
    // The legend of a composed chart: toggles of its band and envelope, its environment filter.
    this.legendBar = this.family && !this.categorical ? h('div', { class: 'chart-legend', dataset: { chartLegend: '' } }) : null;
    // A strip names its runs on its rows; line charts name overlaid runs here.
    this.runLegend = this.categorical ? null : new RunLegend(this.plot, label);
    // The toolbar folds under a "⋯" (opens on hover or focus): the title keeps the header's width.
    const fold = h('span', { class: 'tools-fold', 'aria-hidden': 'true', title: 'Chart tools' }, '\u22ef');
    const head = h('header', { class: 'chart-head' }, this.title, help, tools, fold);
    // Where the toolbar opens is read again as it opens (placeTools; after draws: placeLater).
    head.addEventListener('pointerenter', () => this.placeTools());
    head.addEventListener('focusin', () => this.placeTools());
    this.el = h('article', { class: 'chart' }, head,
      this.badges, this.badge, this.legendBar, this.runLegend?.el, this.plot, this.legend, this.note);
    this.el.chart = this;
    showOrigin(this, originOf(e)); // "derived" on a series computed from the run's events
    this.el.addEventListener('fullscreenchange', () => {
      this.placeTools();
      if (this.rendered) window.Plotly.Plots.resize(this.plot);
    });
    this.updateNote(null);
    this.updateSettingBadges();
  }

  /**
   * The folded toolbar opens over the top of the plot (its right end), never over the rows
   * between header and plot (legend, series, forms): it follows where the plot starts, read
   * when the page is idle after a draw (`placeLater`), when the header is hovered or focused
   * (the toolbar opens then) and in fullscreen.
   */
  placeTools(top = this.plot.offsetTop) {
    if (top === this.toolsTop || !top) return;
    this.toolsTop = top;
    this.el.style.setProperty('--tools-top', `${top}px`);
  }

  /** The badges of the settings that differ from the defaults (charts/prefs.js); none: no work. */
  updateSettingBadges() {
    if (this.categorical) return;
    const defaults = chartDefaults(this.entry, Boolean(this.family));
    if (!this.badgeSig && Object.keys(defaults).every((k) => this.settings[k] === defaults[k])) return;
    const texts = settingBadges(this.settings, defaults,
      this.family ? offers(this.familyEntries()) : { band: Boolean(this.page.stdIdFor(this.entry)) });
    if (texts.join('\n') === this.badgeSig) return;
    this.badgeSig = texts.join('\n');
    this.badges.hidden = texts.length === 0;
    this.badges.replaceChildren(...texts.map((t) => h('span', { class: 'badge setting-badge' }, t)));
  }

  // ------------------------------------------------------------ settings panel

  toggleSettings() {
    if (!this.form) this.buildSettings();
    const open = this.form.hidden;
    this.form.hidden = !open;
    this.settingsBtn.setAttribute('aria-expanded', String(open));
    if (open) this.form.querySelector('input')?.focus();
  }

  buildSettings() {
    const s = this.settings;
    const id = `cs${++settingsCounter}`;
    const box = (name, text) => h('label', {}, h('input', { type: 'checkbox', name, checked: s[name] }), ` ${text}`);
    const num = (name, text) => h('label', {}, `${text} `, h('input', { type: 'number', name, step: 'any',
      value: s[name] ?? '', class: 'num' }));
    this.form = h('form', { class: 'chart-settings', id, hidden: true },
      box('ignoreOutliers', 'Ignore outliers'), box('ignoreFirst', 'Ignore first step'), box('logY', 'Log y'),
      !this.family && this.page.stdIdFor(this.entry) ? box('band', '± std band') : null,
      num('yMin', 'y min'), num('yMax', 'y max'));
    this.form.addEventListener('submit', (ev) => ev.preventDefault());
    this.form.addEventListener('change', () => this.readSettings());
    this.form.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') {
        this.toggleSettings();
        this.settingsBtn.focus();
      }
    });
    this.settingsBtn.setAttribute('aria-controls', id);
    this.el.querySelector('.chart-head').after(this.form);
  }

  readSettings() {
    const f = this.form.elements;
    const num = (el) => (el.value === '' || !Number.isFinite(Number(el.value)) ? null : Number(el.value));
    Object.assign(this.settings, {
      ignoreOutliers: f.ignoreOutliers.checked, ignoreFirst: f.ignoreFirst.checked, logY: f.logY.checked,
      band: f.band ? f.band.checked : this.settings.band, yMin: num(f.yMin), yMax: num(f.yMax),
    });
    this.page.prefs.set(this.entry, this.settings, Boolean(this.family));
    this.updateSettingBadges();
    this.ensureData();
    this.invalidate();
  }

  // ------------------------------------------------------------ data

  /** Whether this chart shows normalized series now: the page toggle, ranged charts only. */
  normalized() {
    return Boolean(this.page.settings.normalize) && normalizes(this.entry)
      && (!this.family || TWINNED_STATS.has(this.entry.stat));
  }

  /**
   * The series this chart draws for one run: `main` and, for a mean with its band on, `std`.
   * Normalized: that run's own twins (null until its catalog lists them).
   */
  idsFor(store) {
    if (this.family) {
      const members = this.members(store);
      const e = this.entry;
      const main = members.find((m) => m.role === 'line' && m.entry.key === e.key && m.entry.stat === e.stat
        && (m.entry.env ?? null) === (e.env ?? null)) ?? members.find((m) => m.role === 'line') ?? members[0];
      return { main: main?.sid ?? null, std: null };
    }
    const band = this.settings.band ? this.page.stdIdFor(this.entry) : null;
    if (!this.normalized()) return { main: this.id, std: band };
    return { main: store.twinOf(this.entry), std: band ? store.twinOf(this.entry, 'std') : null };
  }

  ids(store) {
    if (this.family) return this.members(store).map((m) => m.sid);
    const { main, std } = this.idsFor(store);
    return [main, std].filter(Boolean);
  }

  // ------------------------------------------------------------ composed charts

  /** Every run's entries of this chart (for the legend's choices). */
  familyEntries() {
    return this.page.runs.flatMap((store) => store.families.get(this.family) || []);
  }

  /** What this chart draws from one run: [{entry, role, sid}], normalized twins when on. */
  members(store) {
    const chosen = selectMembers(store.families.get(this.family) || [], this.settings);
    const norm = this.normalized();
    const out = [];
    for (const m of chosen) {
      const sid = norm ? store.twinOf(m.entry) : m.entry.id;
      if (sid) out.push({ ...m, sid });
    }
    return out;
  }

  /**
   * The entry naming this chart changed (a better primary arrived): same card, new identity,
   * and the settings saved under it (they are saved under the primary's id).
   */
  setPrimary(entry) {
    this.entry = entry;
    this.id = entry.id;
    this.plot.dataset.seriesId = entry.id;
    this.words = chartWords(entry);
    this.title.textContent = this.words?.title ?? familyTitle(entry);
    if (this.page.prefs.has?.(entry)) {
      Object.assign(this.settings, this.page.prefs.get(entry, Boolean(this.family)));
      this.legendSig = null;
      this.updateSettingBadges();
    }
  }

  /** Rebuild the legend when the chart's statistics or environments change. */
  refreshLegend() {
    if (!this.legendBar) return;
    const entries = this.familyEntries();
    // A run alone draws its environments in colour (charts/composed.js envColor): so does its legend.
    const runColor = this.page.runs.length === 1 ? this.page.runs[0].color : null;
    const sig = `${legendSignature(entries)}\u0000${runColor}`;
    if (sig === this.legendSig) return;
    this.legendSig = sig;
    this.legendBar.replaceChildren(...legendParts(entries, this.settings, familyTitle(this.entry),
      (name, value) => this.setOption(name, value), runColor));
    this.updateSettingBadges(); // what the chart offers changed, or its env filter was reset
  }

  setOption(name, value) {
    this.settings[name] = value;
    this.page.prefs.set(this.entry, this.settings, Boolean(this.family));
    this.updateSettingBadges();
    this.ensureData();
    this.invalidate();
  }

  ensureData() {
    let wait = Infinity;
    for (const store of this.page.runs) {
      for (const sid of this.ids(store)) {
        if (this.page.loader.isPending(store, sid)) continue;
        if (store.series.has(sid) && !store.rangeDue(sid)) {
          if (store.series.get(sid).rangeStale) wait = Math.min(wait, RANGE_REFRESH_MS);
          continue;
        }
        this.page.loader.request(store, sid, this.inView).then(() => this.invalidate());
      }
    }
    // The last live points may leave a badge stale: look again once its refresh is due.
    if (wait < Infinity && !this.rangeTimer) {
      this.rangeTimer = setTimeout(() => { this.rangeTimer = null; this.invalidate(); }, wait);
    }
  }

  /** Drawable when no load for it is outstanding. */
  ready() {
    return this.page.runs.every((store) => this.ids(store).every((sid) => !this.page.loader.isPending(store, sid)));
  }

  dataFor(store, sid) {
    const rec = store.series.get(sid);
    if (!rec || !rec.data) return null;
    const det = this.detail.get(store.id);
    return det && det.sid === sid ? spliceDetail(rec.data, det.data, det.lo, det.hi) : rec.data;
  }

  figure() {
    if (this.family && !this.categorical) {
      const runs = this.page.runs.map((store) => ({
        id: store.id, name: store.info.name, color: store.color, t0: store.t0, firstStep: store.firstStep,
        range: (() => { const { main } = this.idsFor(store); return main ? store.series.get(main)?.range ?? null : null; })(),
        members: this.members(store).map((m) => ({ ...m, data: this.dataFor(store, m.sid) })),
      }));
      const envs = [...new Set(this.familyEntries().map((e) => e.env).filter((e) => e !== null && e !== undefined))].sort();
      return buildComposedFigure({ primary: this.entry, envs, runs, chart: this.settings, page: this.page.settings,
        theme: this.page.theme(), zoom: this.zoom, normalized: this.normalized(), axis: this.axisWords() });
    }
    const runs = this.page.runs.map((store) => {
      const { main, std } = this.idsFor(store);
      return {
        id: store.id, name: store.info.name, color: store.color,
        data: main ? this.dataFor(store, main) : null, std: std ? this.dataFor(store, std) : null,
        range: main ? store.series.get(main)?.range ?? null : null, t0: store.t0, firstStep: store.firstStep,
      };
    });
    if (this.categorical) {
      return buildStateFigure({ runs, page: this.page.settings, theme: this.page.theme(), zoom: this.zoom });
    }
    return buildFigure({ entry: this.entry, runs, chart: this.settings, page: this.page.settings,
      theme: this.page.theme(), zoom: this.zoom, normalized: this.normalized(), axis: this.axisWords() });
  }

  /** The y axis' unit and whether it counts: {unit, integer} (the registry's words). */
  axisWords() {
    const w = this.words ?? describeSeries(this.entry);
    return { unit: w?.unit ?? '', integer: Boolean(w?.integer) };
  }

  // ------------------------------------------------------------ rendering

  setNear(near) {
    this.near = near;
    if (near) this.invalidate();
  }

  invalidate() {
    if (!this.near) return;
    this.refreshLegend();
    this.ensureData();
    this.page.scheduler.request(this);
  }

  draw() {
    const Plotly = window.Plotly;
    // Before Plotly, only the charts in view are sketched: a sketch out of view is work between
    // the first screen and Plotly's evaluation that nobody sees (MetricsPage.onPlotly draws
    // the charts near the viewport; one scrolled into view first is sketched then).
    if (!Plotly && !this.inView) return;
    const fig = this.figure();
    const startedAt = performance.now();
    this.lastDraw = startedAt; // the scheduler's interval runs from the start of a draw
    let kind = 'plotly';
    if (!Plotly) {
      // Plotly is still loading: a quick canvas drawing until it is ready.
      kind = 'sketch';
      if (!this.canvas) this.canvas = h('canvas', { class: 'sketch', 'aria-hidden': 'true' });
      if (this.canvas.parentElement !== this.plot) this.plot.replaceChildren(this.canvas);
      sketch(this.canvas, fig, this.page.theme());
      this.el.classList.add('sketched');
    } else if (!this.rendered) {
      this.plot.replaceChildren();
      this.canvas = null;
      this.el.classList.remove('sketched');
      Plotly.newPlot(this.plot, fig.data, fig.layout, PLOT_CONFIG);
      this.plot.on('plotly_relayout', (ev) => this.onRelayout(ev));
      attachCursor(this);
      this.runLegend?.attach();
      this.rendered = true;
      this.el.classList.add('rendered');
    } else {
      Plotly.react(this.plot, fig.data, fig.layout, PLOT_CONFIG);
    }
    this.unit = fig.unit; // the synced cursor converts time between charts' units
    this.updateNote(fig);
    this.updateBadge(fig);
    if (this.legend) this.updateLegend(fig.legend);
    this.runLegend?.drawn(fig, fig.prepared.map((p) => p.run));
    placeLater(this);
    addonDrawn(this, fig);
    this.plot.dataset.plottedId = (this.page.runs[0] && this.idsFor(this.page.runs[0]).main) ?? '';
    const primary = fig.prepared.find((p) => p.run.id === this.page.runs[0]?.id);
    document.dispatchEvent(new CustomEvent('telescope:drawn', {
      detail: { id: this.id, kind, run: primary?.run.id ?? null, lastStep: primary?.step.at(-1) ?? null, startedAt },
    }));
  }

  updateNote(fig) {
    const parts = [];
    if (fig && fig.points === 0) {
      const loaded = this.page.runs.some((s) => { const { main } = this.idsFor(s); return main && s.has(main); });
      parts.push(loaded ? 'No points in range' : this.normalized() ? 'No normalized data yet' : 'No data yet');
    }
    if (this.entry.nonfinite) parts.push(`${this.entry.nonfinite} non-finite value(s) dropped`);
    this.note.textContent = parts.join(' · ');
  }

  /** The range badge of a normalized chart; hidden in raw mode. */
  updateBadge(fig) {
    const badge = this.normalized() ? chartBadge(fig.prepared.map((p) => p.run)) : null;
    this.badge.hidden = !badge;
    this.badge.textContent = badge ? badge.text : '';
    this.badge.title = badge ? badge.title : '';
    this.badge.classList.toggle('degenerate', Boolean(badge?.degenerate));
  }

  /** Each value of a state strip with its colour and count of steps; a row per overlaid run. */
  updateLegend(rows) {
    const many = rows.length > 1;
    this.legend.replaceChildren(...rows.map((row) => h('li', { dataset: { run: String(row.id) } },
      many ? h('span', { class: 'state-run' }, row.name) : null,
      ...row.items.map((it) => h('span', { class: 'state-item', dataset: { value: it.value, count: String(it.count) } },
        h('span', { class: 'swatch-dot', style: `background:${it.color}`, 'aria-hidden': 'true' }),
        `${it.value} `, h('span', { class: 'muted' }, COUNT.format(it.count)))))));
  }

  /** Release Plotly's resources (far from the viewport); the data stays in the stores. */
  purge() {
    if (this.rendered) window.Plotly.purge(this.plot);
    if (!this.rendered && !this.canvas) return;
    this.plot.replaceChildren();
    this.canvas = null;
    this.rendered = false;
    this.el.classList.remove('rendered', 'sketched');
  }

  // ------------------------------------------------------------ zoom

  onRelayout(ev) {
    if (ev['xaxis.autorange'] || ev['yaxis.autorange']) {
      if (ev['xaxis.autorange']) {
        this.zoom = this.zoom?.y ? { y: this.zoom.y } : null;
        this.detail.clear();
      }
      if (ev['yaxis.autorange'] && this.zoom) delete this.zoom.y;
      this.invalidate();
      return;
    }
    const x = ev['xaxis.range'] || (ev['xaxis.range[0]'] !== undefined ? [ev['xaxis.range[0]'], ev['xaxis.range[1]']] : null);
    const y = ev['yaxis.range'] || (ev['yaxis.range[0]'] !== undefined ? [ev['yaxis.range[0]'], ev['yaxis.range[1]']] : null);
    if (!x && !y) return;
    this.zoom = { ...(this.zoom || {}), ...(x ? { x } : {}), ...(y ? { y } : {}) };
    if (x && !this.categorical) { // a strip holds every step already
      clearTimeout(this.zoomTimer);
      this.zoomTimer = setTimeout(() => this.loadDetail(x), 150);
    }
  }

  /** Finer points for the zoomed x window, for every run whose overview is downsampled. */
  async loadDetail([x0, x1]) {
    const fig = this.figure();
    await Promise.all(fig.prepared.map(async (p) => {
      const store = this.page.runs.find((s) => s.id === p.run.id);
      const sid = store && this.idsFor(store).main;
      const over = sid && store.series.get(sid)?.data;
      if (!store || !over?.downsampled) return;
      const xs = this.page.settings.xaxis === 'time' ? p.time.map((t) => (t - p.t0) / p.unit.seconds) : p.step;
      let lo = null;
      let hi = null;
      for (let i = 0; i < xs.length; i++) {
        if (xs[i] < x0) lo = p.step[i];
        if (xs[i] > x1 && hi === null) hi = p.step[i];
      }
      lo = lo ?? over.step[0];
      hi = hi ?? over.step.at(-1);
      const body = await getSeries(store.id, [sid], { maxPoints: store.maxPoints, minStep: lo, maxStep: hi });
      const payload = body.series[sid];
      if (payload) this.detail.set(store.id, { sid, lo, hi, data: fromPayload(payload) });
    }));
    this.invalidate();
  }

  // ------------------------------------------------------------ fullscreen and export

  fullscreen() {
    if (document.fullscreenElement === this.el) document.exitFullscreen();
    else this.el.requestFullscreen?.();
  }

  async exportCSV() {
    if (this.family && this.page.runs.some((store) => this.members(store).length > 1)) return this.exportComposedCSV();
    const rows = [];
    for (const store of this.page.runs) {
      const sid = this.idsFor(store).main; // what the chart shows: normalized or raw
      if (!sid) continue;
      const body = await getSeries(store.id, [sid], { maxPoints: MAX_POINTS_LIMIT });
      const s = body.series[sid];
      if (!s) continue;
      for (let i = 0; i < s.step.length; i++) rows.push([store.info.name, s.step[i], s.time[i], s.value[i]]);
    }
    const csv = toCSV(['run', 'step', 'time', 'value'], rows);
    const e = this.entry;
    const name = [e.key, e.stat, e.env, this.normalized() ? 'normalized' : null].filter(Boolean).join('_');
    download(new Blob([csv], { type: 'text/csv' }), safeFilename(name, 'csv'));
  }

  /** Every series a composed chart draws, one row per point, named by env and statistic. */
  async exportComposedCSV() {
    const rows = [];
    for (const store of this.page.runs) {
      const members = this.members(store);
      if (!members.length) continue;
      const body = await getSeries(store.id, members.map((m) => m.sid), { maxPoints: MAX_POINTS_LIMIT });
      for (const m of members) {
        const s = body.series[m.sid];
        if (!s) continue;
        for (let i = 0; i < s.step.length; i++) {
          rows.push([store.info.name, m.entry.key, m.entry.env ?? '', m.entry.stat ?? '', s.step[i], s.time[i], s.value[i]]);
        }
      }
    }
    const csv = toCSV(['run', 'key', 'env', 'stat', 'step', 'time', 'value'], rows);
    const name = [this.entry.key, this.normalized() ? 'normalized' : null].filter(Boolean).join('_');
    download(new Blob([csv], { type: 'text/csv' }), safeFilename(name, 'csv'));
  }

  async exportPNG() {
    if (!window.Plotly) return;
    const fig = this.figure();
    const theme = this.page.theme();
    const title = [this.title.textContent, this.page.runs.map((s) => s.info.name).join(' vs ')].join(' — ');
    const layout = { ...fig.layout, title: { text: escapePlotly(title), font: { size: 14 } },
      margin: { ...fig.layout.margin, t: 40 }, paper_bgcolor: theme.bg, plot_bgcolor: theme.bg };
    const url = await window.Plotly.toImage({ data: fig.data, layout }, { format: 'png', width: 1000, height: 500 });
    download(url, safeFilename(this.entry.label || this.entry.key, 'png'));
  }
}

// One chart card of the All view: its DOM, per-chart settings, Plotly rendering and release,
// zoom-driven detail loading, fullscreen, CSV and PNG export.

import { getSeries, MAX_POINTS_LIMIT } from './api.js';
import { download, h, icon } from './dom.js';
import { escapePlotly, safeFilename, toCSV } from './text.js';
import { sketch } from './sketch.js';
import { buildFigure } from './traces.js';
import { fromPayload, spliceDetail } from './transforms.js';

const PLOT_CONFIG = { displayModeBar: false, responsive: true, doubleClick: 'autosize' };

let settingsCounter = 0;

export class Chart {
  /**
   * `page` supplies: runs (RunStores, primary first, each with .info.name and .color), loader,
   * scheduler, prefs (ChartPrefs), settings (page controls), theme(), stdIdFor(entry).
   */
  constructor(entry, page) {
    this.entry = entry;
    this.id = entry.id;
    this.page = page;
    this.settings = page.prefs.get(entry);
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
    const label = e.label || e.key;
    this.title = h('h4', { class: 'chart-title', title: e.kind === 'step' ? e.key : `${e.key} · ${e.stat ?? ''}` }, label);
    this.settingsBtn = h('button', { type: 'button', class: 'tool', 'aria-expanded': 'false',
      'aria-label': `Settings of ${label}`, title: 'Chart settings', onclick: () => this.toggleSettings() }, icon('gear'));
    const tools = h('div', { class: 'chart-tools' },
      this.settingsBtn,
      h('button', { type: 'button', class: 'tool', 'aria-label': `Fullscreen ${label}`, title: 'Fullscreen',
        onclick: () => this.fullscreen() }, icon('expand')),
      h('button', { type: 'button', class: 'tool', 'aria-label': `Download CSV of ${label}`, title: 'Download CSV',
        onclick: () => this.exportCSV() }, 'CSV'),
      h('button', { type: 'button', class: 'tool', 'aria-label': `Download PNG of ${label}`, title: 'Download PNG',
        onclick: () => this.exportPNG() }, 'PNG'));
    this.plot = h('div', { class: 'plot', dataset: { seriesId: e.id } });
    this.note = h('p', { class: 'chart-note' });
    this.el = h('article', { class: 'chart' }, h('header', { class: 'chart-head' }, this.title, tools), this.plot, this.note);
    this.el.chart = this;
    this.el.addEventListener('fullscreenchange', () => this.rendered && window.Plotly.Plots.resize(this.plot));
    this.updateNote(null);
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
      this.page.stdIdFor(this.entry) ? box('band', '± std band') : null,
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
    this.page.prefs.set(this.entry, this.settings);
    this.ensureData();
    this.invalidate();
  }

  // ------------------------------------------------------------ data

  /** Series ids this chart draws: its own and, for a mean with its band on, the std. */
  ids() {
    const std = this.settings.band ? this.page.stdIdFor(this.entry) : null;
    return std ? [this.id, std] : [this.id];
  }

  ensureData() {
    for (const store of this.page.runs) {
      for (const sid of this.ids()) {
        if (store.series.has(sid) || this.page.loader.isPending(store, sid)) continue;
        this.page.loader.request(store, sid, this.inView).then(() => this.invalidate());
      }
    }
  }

  /** Drawable when no load for it is outstanding. */
  ready() {
    return this.page.runs.every((store) => this.ids().every((sid) => !this.page.loader.isPending(store, sid)));
  }

  dataFor(store, sid) {
    const rec = store.series.get(sid);
    if (!rec || !rec.data) return null;
    const det = sid === this.id ? this.detail.get(store.id) : null;
    return det ? spliceDetail(rec.data, det.data, det.lo, det.hi) : rec.data;
  }

  figure() {
    const std = this.settings.band ? this.page.stdIdFor(this.entry) : null;
    const runs = this.page.runs.map((store) => ({
      id: store.id, name: store.info.name, color: store.color,
      data: this.dataFor(store, this.id), std: std ? this.dataFor(store, std) : null,
      range: store.series.get(this.id)?.range ?? null, t0: store.t0, firstStep: store.firstStep,
    }));
    return buildFigure({ entry: this.entry, runs, chart: this.settings, page: this.page.settings,
      theme: this.page.theme(), zoom: this.zoom });
  }

  // ------------------------------------------------------------ rendering

  setNear(near) {
    this.near = near;
    if (near) this.invalidate();
  }

  invalidate() {
    if (!this.near) return;
    this.ensureData();
    this.page.scheduler.request(this);
  }

  draw() {
    const fig = this.figure();
    const Plotly = window.Plotly;
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
      this.rendered = true;
      this.el.classList.add('rendered');
    } else {
      Plotly.react(this.plot, fig.data, fig.layout, PLOT_CONFIG);
    }
    this.updateNote(fig);
    const primary = fig.prepared.find((p) => p.run.id === this.page.runs[0]?.id);
    document.dispatchEvent(new CustomEvent('telescope:drawn', {
      detail: { id: this.id, kind, run: primary?.run.id ?? null, lastStep: primary?.step.at(-1) ?? null, startedAt },
    }));
  }

  updateNote(fig) {
    const parts = [];
    if (fig && fig.points === 0) parts.push(this.page.runs.some((s) => s.has(this.id)) ? 'No points in range' : 'No data yet');
    if (this.entry.nonfinite) parts.push(`${this.entry.nonfinite} non-finite value(s) dropped`);
    this.note.textContent = parts.join(' · ');
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
    if (x) {
      clearTimeout(this.zoomTimer);
      this.zoomTimer = setTimeout(() => this.loadDetail(x), 150);
    }
  }

  /** Finer points for the zoomed x window, for every run whose overview is downsampled. */
  async loadDetail([x0, x1]) {
    const fig = this.figure();
    await Promise.all(fig.prepared.map(async (p) => {
      const store = this.page.runs.find((s) => s.id === p.run.id);
      const over = store?.series.get(this.id)?.data;
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
      const body = await getSeries(store.id, [this.id], { maxPoints: store.maxPoints, minStep: lo, maxStep: hi });
      const payload = body.series[this.id];
      if (payload) this.detail.set(store.id, { lo, hi, data: fromPayload(payload) });
    }));
    this.invalidate();
  }

  // ------------------------------------------------------------ fullscreen and export

  fullscreen() {
    if (document.fullscreenElement === this.el) document.exitFullscreen();
    else this.el.requestFullscreen?.();
  }

  async exportCSV() {
    const rows = [];
    for (const store of this.page.runs) {
      const body = await getSeries(store.id, [this.id], { maxPoints: MAX_POINTS_LIMIT });
      const s = body.series[this.id];
      if (!s) continue;
      for (let i = 0; i < s.step.length; i++) rows.push([store.info.name, s.step[i], s.time[i], s.value[i]]);
    }
    const csv = toCSV(['run', 'step', 'time', 'value'], rows);
    download(new Blob([csv], { type: 'text/csv' }), safeFilename(this.entry.key + (this.entry.stat ? `_${this.entry.stat}` : '') + (this.entry.env ? `_${this.entry.env}` : ''), 'csv'));
  }

  async exportPNG() {
    if (!window.Plotly) return;
    const fig = this.figure();
    const theme = this.page.theme();
    const title = [this.entry.label || this.entry.key, this.page.runs.map((s) => s.info.name).join(' vs ')].join(' — ');
    const layout = { ...fig.layout, title: { text: escapePlotly(title), font: { size: 14 } },
      margin: { ...fig.layout.margin, t: 40 }, paper_bgcolor: theme.bg, plot_bgcolor: theme.bg };
    const url = await window.Plotly.toImage({ data: fig.data, layout }, { format: 'png', width: 1000, height: 500 });
    download(url, safeFilename(this.entry.label || this.entry.key, 'png'));
  }
}

// @ts-check
// The distribution heatmap of a reward, sample-metric or completion-length chart: how
// values spread at each step, which a mean line hides. Registers its chart add-on
// (charts/addons.js): a "Distribution" button in the chart's header opens the Distribution
// view, a wide dialog of its own that can fill the screen, with the first run's values over
// steps — step buckets × value bins, counted by the server from the raw samples
// (GET /api/runs/<id>/distribution) — and an environment picker when the run has several.
// Its × or Escape closes it. The pure parts (which charts have one, the figure, labels,
// colours) are exported for node tests.

import { registerAddon } from './addons.js';
import { getDistribution } from '../core/api.js';
import { ALL_TOGETHER, EVERY_ENV } from './compose.js';
import { h } from '../core/dom.js';
import { escapePlotly } from '../core/text.js';

/** Statistics of a value chart (mean line, ± std band, min/max envelope): its distribution. */
const VALUE_STATS = new Set(['mean', 'std', 'min', 'max']);
const PLOT_CONFIG = { displayModeBar: false, responsive: true };
const REFRESH_MS = 10000; // an open panel follows new steps at most this often
const PLOTLY_POLL_MS = 100;
let TITLES = 0; // ids of the dialogs' titles

/**
 * The distribution a chart can show, {kind, key}, or null: the reward, any sample metric and
 * completion tokens, from their value charts (not their counters or Gini charts).
 */
export function distributionOf(entry) {
  if (!entry || entry.normalized || !VALUE_STATS.has(entry.stat)) return null;
  if (entry.kind === 'reward' && entry.key === 'reward') return { kind: 'reward', key: 'reward' };
  if (entry.kind === 'sample' && entry.key) return { kind: 'sample', key: entry.key };
  if (entry.kind === 'rollouts' && entry.key === 'completion_tokens') return { kind: 'rollouts', key: entry.key };
  return null;
}

/** The environment a panel opens on: the chart's own (one series, or its env filter), else all. */
export function initialEnv(entry, settings = {}) {
  if (entry.env) return entry.env;
  const env = settings.env;
  return env && env !== EVERY_ENV && env !== ALL_TOGETHER ? env : null;
}

/** A number for a label: whole numbers grouped (1,024), others to 4 significant digits. */
export function fmt(v) {
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  return String(Number(v.toPrecision(4)));
}

export function stepLabel(start, end) {
  return start === end ? `step ${fmt(start)}` : `steps ${fmt(start)}\u2013${fmt(end)}`;
}

/** Bin i of `edges`: its integers for integer bins (`7`, `100–149`), else [a, b) ([a, b] last). */
export function binLabel(edges, i, integer) {
  if (integer) {
    const lo = edges[i] + 0.5;
    const hi = edges[i + 1] - 0.5;
    return lo === hi ? fmt(lo) : `${fmt(lo)}\u2013${fmt(hi)}`;
  }
  return `[${fmt(edges[i])}, ${fmt(edges[i + 1])}${i === edges.length - 2 ? ']' : ')'}`;
}

function channels(color) {
  const s = String(color || '').trim();
  let m = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/i.exec(s);
  if (m) return m.slice(1).map((c) => parseInt(c + c, 16));
  m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})/i.exec(s);
  if (m) return m.slice(1).map((c) => parseInt(c, 16));
  m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/i.exec(s);
  return m ? m.slice(1).map(Number) : null;
}

function luminance(color) {
  const c = channels(color);
  if (!c) return null;
  const [r, g, b] = c.map((v) => {
    const x = v / 255;
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** Whether a theme is dark: its background darker than its text. */
export function isDark(theme) {
  const bg = luminance(theme.bg);
  const fg = luminance(theme.fg);
  return bg !== null && fg !== null && bg < fg;
}

// Sequential scales whose low end stands out from the card and whose high end stands out most:
// pale to deep blue on a light card, dim blue through green to yellow (viridis-like) on a dark one.
export const LIGHT_SCALE = [[0, '#c6dbef'], [0.25, '#7fb0dc'], [0.5, '#3f83c4'], [0.75, '#1c5aa0'], [1, '#08306b']];
export const DARK_SCALE = [[0, '#2b4e78'], [0.25, '#22808f'], [0.5, '#2fa37a'], [0.75, '#9ccc4a'], [1, '#fde725']];

export function colorscale(theme) {
  return isDark(theme) ? DARK_SCALE : LIGHT_SCALE;
}

/**
 * The heatmap of a distribution payload: {data: [trace], layout, total}. x are step-bucket
 * edges, y the bin edges, z[bin][bucket] the counts (null where 0, so empty cells show the
 * card); hover names the steps, the bin and the count.
 */
export function buildHeatmapFigure(body, theme, { runId = null, name = null } = {}) {
  const edges = body.bins;
  const nBins = edges.length - 1;
  const x = body.steps.map((s) => s - 0.5);
  if (body.step_end.length) x.push(body.step_end.at(-1) + 0.5);
  const key = escapePlotly(body.key);
  const z = [];
  const text = [];
  let zmax = 0;
  for (let b = 0; b < nBins; b++) {
    const row = [];
    const tips = [];
    const bin = binLabel(edges, b, body.integer);
    for (let i = 0; i < body.steps.length; i++) {
      const n = body.counts[i][b];
      if (n > zmax) zmax = n;
      row.push(n > 0 ? n : null);
      tips.push(`${stepLabel(body.steps[i], body.step_end[i])}<br>${key} ${bin}<br>${fmt(n)} sample${n === 1 ? '' : 's'}`);
    }
    z.push(row);
    text.push(tips);
  }
  const trace = {
    type: 'heatmap', x, y: edges, z, text, hovertemplate: '%{text}<extra></extra>', hoverongaps: false,
    colorscale: colorscale(theme), zmin: 0, zmax: Math.max(1, zmax), xgap: 0, ygap: 0,
    colorbar: { thickness: 8, outlinewidth: 0, len: 0.9, tickfont: { size: 10, color: theme.fg },
      title: { text: 'samples', side: 'right', font: { size: 10, color: theme.muted } } },
    name: name === null ? key : escapePlotly(name),
    meta: { role: 'distribution', run: runId, kind: body.kind, key: body.key, env: body.env, total: body.total },
  };
  const axis = { gridcolor: theme.grid, linecolor: theme.grid, zeroline: false, automargin: true, tickfont: { size: 10 } };
  const layout = {
    margin: { l: 48, r: 8, t: 6, b: 30 }, autosize: true,
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
    font: { color: theme.fg, size: 11, family: theme.font }, hovermode: 'closest',
    hoverlabel: { bgcolor: theme.bg, bordercolor: theme.grid, font: { color: theme.fg } },
    xaxis: { ...axis, title: { text: 'step', font: { size: 10, color: theme.muted }, standoff: 2 } },
    yaxis: { ...axis, title: { text: key, font: { size: 10, color: theme.muted }, standoff: 4 } },
  };
  return { data: [trace], layout, total: body.total };
}

/** The line under the panel's title: what was counted, how the steps are bucketed. */
export function summaryText(body) {
  if (!body.total) return 'No samples with a value yet.';
  const parts = [`${fmt(body.total)} kept sample${body.total === 1 ? '' : 's'} with a finite value`];
  if (body.step_width > 1) parts.push(`${fmt(body.step_width)} steps a column`);
  if (body.outside) parts.push(`${fmt(body.outside)} arrived during the read, not counted`);
  return parts.join(' \u00b7 ');
}

/** Plotly, once the page has loaded it (it is loaded lazily, after the first sketches). */
function whenPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (!window.Plotly) return;
      clearInterval(timer);
      resolve(window.Plotly);
    }, PLOTLY_POLL_MS);
  });
}

/**
 * The Distribution view of one chart card: a wide dialog of its own (modal, over the page, so
 * the card's row keeps its size), with the title whole, an environment picker, a fullscreen
 * button (the plot then fills the screen) and a close button; Escape closes it too, and the
 * focus returns to the card's button.
 */
class DistributionPanel {
  constructor(chart, button) {
    this.chart = chart;
    this.button = button;
    this.body = null;
    this.requests = 0;
    this.el = null;
    this.onFullscreen = () => {
      if (!this.el) return;
      const full = document.fullscreenElement === this.view;
      this.fullButton.setAttribute('aria-pressed', String(full));
      this.fullButton.textContent = full ? 'Exit fullscreen' : 'Fullscreen';
      this.resize();
    };
  }

  get open() {
    return Boolean(this.el?.open);
  }

  toggle() {
    if (this.open) this.close();
    else this.show();
  }

  show() {
    const what = distributionOf(this.chart.entry);
    const store = this.chart.page.runs[0];
    if (!what || !store) return;
    this.what = what;
    this.store = store;
    this.env = initialEnv(this.chart.entry, this.chart.settings);
    const label = `distribution of ${what.key}`;
    this.title = h('h2', { class: 'heatmap-title', id: `heatmap-title-${++TITLES}` });
    this.picker = h('select', { 'aria-label': `Environment of the ${label}`, hidden: true,
      onchange: () => { this.env = this.picker.value || null; this.load(); } });
    this.note = h('p', { class: 'heatmap-note', role: 'status' }, 'Loading\u2026');
    this.plot = h('div', { class: 'heatmap-plot', dataset: { heatmapPlot: '' }, hidden: true });
    this.fullButton = h('button', { type: 'button', class: 'tool', 'aria-pressed': 'false', title: 'Fill the screen',
      onclick: () => this.fullscreen() }, 'Fullscreen');
    // What fills the screen: the dialog's content (a <dialog> itself cannot be fullscreen).
    this.view = h('div', { class: 'heatmap-view' },
      h('div', { class: 'heatmap-head' }, this.title, this.picker, this.fullButton,
        h('button', { type: 'button', class: 'tool heatmap-close', 'aria-label': `Close the ${label}`, title: 'Close (Escape)',
          onclick: () => this.close() }, '\u00d7')),
      this.note, this.plot);
    this.el = h('dialog', { class: 'heatmap-panel heatmap-dialog', dataset: { heatmap: what.key }, 'aria-labelledby': this.title.id },
      this.view);
    this.el.addEventListener('close', () => this.closed());
    this.view.addEventListener('fullscreenchange', this.onFullscreen);
    this.setTitle();
    // In the chart's fullscreen card when it is one (only it is drawn then), else the page.
    (document.fullscreenElement === this.chart.el ? this.chart.el : document.body).append(this.el);
    this.el.showModal();
    this.button.setAttribute('aria-expanded', 'true');
    this.load();
  }

  /** Fill the screen with the dialog (again: back to its size on the page). */
  fullscreen() {
    if (document.fullscreenElement === this.view) document.exitFullscreen();
    else this.view.requestFullscreen?.();
  }

  resize() {
    if (window.Plotly && this.body?.total && !this.plot.hidden) window.Plotly.Plots.resize(this.plot);
  }

  close() {
    if (document.fullscreenElement === this.view) document.exitFullscreen().catch(() => {});
    if (this.el?.open) this.el.close(); // then `closed`
    else this.closed();
  }

  /** The dialog closed (its button, Escape): drop it and what it drew. */
  closed() {
    if (!this.el) return;
    this.requests++; // a response still on its way is dropped
    if (this.plot && window.Plotly) window.Plotly.purge(this.plot);
    this.view.removeEventListener('fullscreenchange', this.onFullscreen);
    this.el.remove();
    this.el = null;
    this.body = null;
    this.button.setAttribute('aria-expanded', 'false');
    this.button.focus({ preventScroll: true });
  }

  setTitle() {
    const env = this.env ? ` [${this.env}]` : '';
    this.title.textContent = `Distribution of ${this.what.key}${env} \u00b7 ${this.store.info?.name ?? `run ${this.store.id}`}`;
  }

  async load() {
    const ticket = ++this.requests;
    this.loadedAt = Date.now();
    this.loadedStep = this.latestStep; // the chart's last step when this read started
    this.setTitle();
    try {
      const body = await getDistribution(this.store.id, { ...this.what, env: this.env });
      if (ticket !== this.requests) return;
      this.body = body;
      this.fillPicker(body.envs);
      this.note.textContent = summaryText(body);
      await this.render();
    } catch (err) {
      if (ticket !== this.requests) return;
      this.note.textContent = `Could not load the distribution: ${err.message || err}`;
    }
  }

  fillPicker(envs) {
    const show = envs.length > 1 || (this.env !== null && !envs.includes(this.env));
    this.picker.hidden = !show;
    if (!show) return;
    const names = this.env !== null && !envs.includes(this.env) ? [...envs, this.env] : envs;
    this.picker.replaceChildren(h('option', { value: '' }, 'all environments'),
      ...names.map((e) => h('option', { value: e }, e)));
    this.picker.value = this.env ?? '';
  }

  async render() {
    const body = this.body;
    if (!body || !this.open) return;
    this.theme = this.chart.page.theme();
    if (!body.total) {
      this.plot.hidden = true;
      if (window.Plotly) window.Plotly.purge(this.plot);
      return;
    }
    const Plotly = await whenPlotly();
    if (body !== this.body || !this.open) return;
    const fig = buildHeatmapFigure(body, this.theme, { runId: this.store.id, name: this.store.info?.name ?? null });
    this.plot.hidden = false;
    Plotly.react(this.plot, fig.data, fig.layout, PLOT_CONFIG);
  }

  /** The card drew: follow a theme change at once, and new steps now and then. */
  drawn(fig) {
    const primary = fig?.prepared?.find((p) => p.run?.id === this.chart.page.runs[0]?.id);
    this.latestStep = primary?.step?.at(-1) ?? this.latestStep;
    if (!this.open || !this.body) return;
    if (this.chart.page.theme() !== this.theme) this.render();
    const ahead = this.latestStep > (this.loadedStep ?? -Infinity);
    if (ahead && Date.now() - this.loadedAt >= REFRESH_MS) this.load();
  }
}

const PANELS = new WeakMap();

registerAddon({
  tools(chart) {
    if (!distributionOf(chart.entry)) return null;
    const button = h('button', { type: 'button', class: 'tool', 'aria-expanded': 'false',
      'aria-label': `Distribution of ${chart.entry.key}`, title: 'Distribution over steps',
      dataset: { distribution: '' } }, 'Distribution');
    const panel = new DistributionPanel(chart, button);
    PANELS.set(chart, panel);
    button.addEventListener('click', () => panel.toggle());
    return button;
  },
  drawn(chart, fig) {
    PANELS.get(chart)?.drawn(fig);
  },
});

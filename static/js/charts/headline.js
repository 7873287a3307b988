// @ts-check
// The overview's headline charts: which of reward mean, informative groups, loss,
// grad norm and step time a run has (pickHeadlines, pure, titled by the metric registry), and a
// small grid of Plotly charts of them that live points extend in place (HeadlineCharts).

import { getSeries } from '../core/api.js';
import { h, themeColors } from '../core/dom.js';
import { describe } from '../core/registry.js';
import { escapePlotly } from '../core/text.js';
import { baseLayout } from './traces.js';

const MAX_POINTS = 800;
const PLOT_CONFIG = { displayModeBar: false, responsive: true, doubleClick: 'autosize' };

const overall = (kind, key, stat) => (e) => e.kind === kind && e.key === key && e.stat === stat
  && !e.env && !e.normalized;

/** The headlines in order: a derived family's series, or the first step key a pattern finds. */
export const HEADLINES = [
  { name: 'reward', title: 'Reward (mean)', key: 'reward', match: overall('reward', 'reward', 'mean') },
  { name: 'informative', title: 'Informative groups', key: 'groups', match: overall('groups', 'groups', 'informative') },
  { name: 'loss', patterns: [/^loss$/, /^(train\/)?loss(\/total)?$/, /^loss\/policy$/, /^(train\/)?(policy_)?loss$/, /^(?!val\/).*loss/, /loss/] },
  { name: 'grad_norm', patterns: [/^grad_norm$/, /^(?!val\/).*(^|\/)grad_norm$/, /grad_norm/] },
  // Timing skips the first step (start-up, compilation), as the Metrics page does by default;
  // without a trainer's key, the step time the server derives from the events (`derived`).
  { name: 'step_time', skipFirst: true, derived: true, patterns: [/^timing_step_total$/, /^timing\/step(_total)?$/, /(^|\/)step_time$/, /^timing_step/] },
];

/** Kinds whose keys the registry titles: a trainer's step keys and the derived `timing_*` series. */
const TITLED_KINDS = new Set(['step', 'timeline']);

function pick(headline, entries) {
  if (headline.match) {
    const e = entries.find(headline.match);
    return e && { entry: e, title: describe(headline.key)?.title ?? headline.title };
  }
  // A trainer's own key first; a series the server derives from the events (kind `timeline`,
  // e.g. timing_step_total) when the trainer logs none and the headline takes one.
  const keyed = (kind) => entries.filter((e) => e.kind === kind && !e.categorical && !e.normalized);
  for (const candidates of headline.derived ? [keyed('step'), keyed('timeline')] : [keyed('step')]) {
    for (const re of headline.patterns) {
      const e = candidates.find((s) => re.test(s.key));
      if (e) return { entry: e, title: describe(e.key)?.title ?? e.key };
    }
  }
  return null;
}

/** [{name, id, key, title, description}] of the headlines the catalog's series offer. */
export function pickHeadlines(entries) {
  const out = [];
  for (const headline of HEADLINES) {
    const found = pick(headline, entries);
    if (!found || out.some((o) => o.id === found.entry.id)) continue;
    const info = TITLED_KINDS.has(found.entry.kind) ? describe(found.entry.key) : null;
    out.push({ name: headline.name, id: found.entry.id, key: found.entry.key, title: found.title,
      description: info?.description ?? '', skipFirst: !!headline.skipFirst });
  }
  return out;
}

/** Points of one series by step ({step: [time, value]}), merged from reads and deltas. */
export function mergePoints(into, { step = [], time = [], value = [] }) {
  for (let i = 0; i < step.length; i++) {
    if (value[i] === null || value[i] === undefined) into.delete(step[i]); // withdrawn
    else into.set(step[i], [time[i], value[i]]);
  }
  return into;
}

export class HeadlineCharts {
  /** `plotly`: a promise of window.Plotly (loaded once by the page). */
  constructor(root, runId, color, plotly) {
    this.root = root;
    this.runId = runId;
    this.color = color;
    this.plotly = plotly;
    this.picks = [];
    this.data = new Map(); // sid -> Map(step -> [time, value])
    this.plots = new Map(); // sid -> graph div
    this.frame = null;
  }

  /** Choose the headlines from the catalog entries, read their series and draw them. */
  async load(entries) {
    const token = {};
    this.loading = token;
    this.entries = entries;
    this.picks = pickHeadlines(entries);
    this.data = new Map(this.picks.map((p) => [p.id, new Map()]));
    this.plots = new Map();
    this.root.replaceChildren(...this.picks.map((p) => this.card(p)));
    if (!this.picks.length) {
      this.root.append(h('p', { class: 'muted' }, 'No headline metrics yet: reward, informative groups, loss, '
        + 'grad norm and step time appear here once the run logs them.'));
      return;
    }
    // Steps a live delta brings while the read is under way are newer than the read's.
    const fresh = new Map(this.picks.map((p) => [p.id, new Set()]));
    this.fresh = fresh;
    const got = await getSeries(this.runId, this.picks.map((p) => p.id), { maxPoints: MAX_POINTS });
    if (this.loading !== token) return; // another load took over meanwhile
    for (const [sid, s] of Object.entries(got.series || {})) {
      const touched = fresh.get(sid);
      if (!this.data.has(sid) || !touched) continue;
      const keep = s.step.map((_, i) => i).filter((i) => !touched.has(s.step[i]));
      mergePoints(this.data.get(sid), { step: keep.map((i) => s.step[i]), time: keep.map((i) => s.time[i]),
        value: keep.map((i) => s.value[i]) });
    }
    this.fresh = null;
    await this.draw();
  }

  card(p) {
    const plot = h('div', { class: 'plot', dataset: { seriesId: p.id } });
    this.plots.set(p.id, plot);
    const title = h('h3', { class: 'headline-title', title: p.description ? `${p.description}\nkey: ${p.key}` : `key: ${p.key}` }, p.title);
    return h('figure', { class: 'headline-card', dataset: { headline: p.name } }, title, plot);
  }

  /** New catalog entries arrived live: a headline may now exist. */
  addEntries(entries) {
    const all = [...(this.entries || []), ...entries];
    const ids = pickHeadlines(all).map((p) => p.id).join(',');
    if (ids !== this.picks.map((p) => p.id).join(',')) return this.load(all);
    this.entries = all;
    return Promise.resolve();
  }

  /** A live delta's points ({sid: {step, time, value}}): extend the charts in place. */
  applyPoints(points) {
    let changed = false;
    for (const [sid, pts] of Object.entries(points || {})) {
      if (!this.data.has(sid)) continue;
      mergePoints(this.data.get(sid), pts);
      for (const step of this.fresh?.get(sid) ? pts.step : []) this.fresh.get(sid).add(step);
      changed = true;
    }
    if (changed && !this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.draw();
      });
    }
  }

  setColor(color) {
    this.color = color;
    this.draw();
  }

  /** Seconds per step over the newest points of the first headline (a pace when the server
   * gives none): [steps, times]. */
  recent() {
    const first = this.picks.map((p) => this.data.get(p.id)).find((m) => m && m.size > 1);
    if (!first) return [[], []];
    const rows = [...first.entries()].sort((a, b) => a[0] - b[0]);
    return [rows.map((r) => r[0]), rows.map((r) => r[1][0])];
  }

  async draw() {
    if (!this.picks.length) return;
    const Plotly = await this.plotly;
    const theme = themeColors();
    for (const p of this.picks) {
      const plot = this.plots.get(p.id);
      if (!plot?.isConnected) continue;
      let rows = [...this.data.get(p.id).entries()].sort((a, b) => a[0] - b[0]);
      if (p.skipFirst && rows.length > 2) rows = rows.slice(1);
      const trace = { x: rows.map((r) => r[0]), y: rows.map((r) => r[1][1]), type: 'scatter', mode: 'lines',
        name: escapePlotly(p.title), line: { color: this.color, width: 1.6 }, hovertemplate: '%{y:.4g}<extra>step %{x}</extra>' };
      const layout = baseLayout({ chart: {}, page: { xaxis: 'step' }, theme, unit: { unit: '' }, yRange: null, zoom: null, shapes: [] });
      Plotly.react(plot, [trace], { ...layout, hovermode: 'closest' }, PLOT_CONFIG);
    }
  }
}

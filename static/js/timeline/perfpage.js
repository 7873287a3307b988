// @ts-check
// The Performance page (/runs/<id>/performance?bucket=B): the run's time buckets of B seconds
// (inference utilization, weight sync, trainer working and idle in %, generations, tokens/s)
// with the newest, still filling bucket marked, and its gauges (system metrics) per host and
// device. The bucket size is in the URL; a running run's new events and gauges arrive without
// a reload (timeline/follow.js).

import { h, loadPlotly, themeColors } from '../core/dom.js';
import { getGauges, getPerformance } from './api.js';
import { Debounced, RunWatch } from './follow.js';
import {
  BUCKET_CHARTS, bucketSearch, bucketTraces, gaugeSections, gaugeTraces, gpuIdleHint, parseBucket,
  partialNote, perfLayout,
} from './perf.js';

const CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ['select2d', 'lasso2d'] };
const GAUGE_POINTS = 2000; // per host and device: the API keeps each bucket's extremes

const byId = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

export class PerformancePage {
  /** @param {HTMLElement} root  `#performance` (templates/performance.html) */
  constructor(root) {
    this.root = root;
    this.runId = Number(root.dataset.runId);
    this.bucket = parseBucket(location.search);
    this.select = /** @type {HTMLSelectElement} */ (byId('bucket'));
    this.select.value = String(this.bucket);
    this.select.addEventListener('change', () => this.setBucket(Number(this.select.value)));
    this.plotly = loadPlotly(/** @type {HTMLLinkElement} */ (byId('plotly-src')).href);
    /** @type {Map<string, HTMLElement>} chart id -> its plot element */
    this.plots = new Map();
    this.loads = 0;
    this.draws = 0;
    this.refetch = new Debounced(() => this.load());
    const info = JSON.parse(byId('run-info').textContent);
    this.watch = new RunWatch(info, Number(root.dataset.seq) || 0, {
      onEvents: () => this.refetch.poke(),
    });
    this.ready = this.load();
  }

  setBucket(bucket) {
    this.bucket = bucket;
    history.replaceState(null, '', `${location.pathname}${bucketSearch(location.search, bucket)}${location.hash}`);
    this.ready = this.load();
  }

  /** Fetch and draw the buckets and the gauges; a later load supersedes one in flight. */
  async load() {
    const ticket = ++this.loads;
    this.root.dataset.loading = 'true';
    try {
      const [perf, gauges] = await Promise.all([
        getPerformance(this.runId, this.bucket), getGauges(this.runId, { maxPoints: GAUGE_POINTS })]);
      if (ticket !== this.loads) return;
      const Plotly = await this.plotly;
      await this.drawBuckets(Plotly, perf);
      await this.drawGauges(Plotly, gauges.gauges || {});
      const hint = gpuIdleHint(perf, gauges.gauges || {});
      const box = byId('health-hint');
      box.hidden = !hint;
      box.textContent = hint ? `⚠ ${hint.message}` : '';
      byId('load-error').textContent = '';
      Object.assign(this.root.dataset, { bucket: String(perf.bucket), buckets: String(perf.time.length),
        gauges: String(Object.keys(gauges.gauges || {}).length) });
      this.root.dataset.drawn = String(++this.draws);
    } catch (err) {
      if (ticket === this.loads) byId('load-error').textContent = `Could not load the performance: ${err.message}`;
    } finally {
      if (ticket === this.loads) delete this.root.dataset.loading;
    }
  }

  /** A chart card in `parent` (made once, kept across loads), its plot element returned. */
  card(parent, id, title) {
    let plot = this.plots.get(id);
    if (!plot) {
      plot = h('div', { class: 'plot', dataset: { chart: id } });
      parent.append(h('div', { class: 'perf-chart' }, h('h3', {}, title), plot));
      this.plots.set(id, plot);
    }
    return plot;
  }

  async drawBuckets(Plotly, perf) {
    const empty = byId('buckets-empty');
    const none = !perf.time.length;
    empty.hidden = !none;
    byId('bucket-charts').hidden = none;
    byId('partial-note').textContent = none ? '' : partialNote(perf);
    if (none) return;
    const theme = themeColors();
    for (const chart of BUCKET_CHARTS) {
      const plot = this.card(byId('bucket-charts'), chart.id, chart.title);
      await Plotly.react(plot, bucketTraces(perf, chart), perfLayout(theme, chart), CONFIG);
    }
  }

  async drawGauges(Plotly, gauges) {
    const names = Object.keys(gauges);
    byId('gauges-empty').hidden = names.length > 0;
    const box = byId('gauges');
    const theme = themeColors();
    for (const { section, names: inSection } of gaugeSections(names)) {
      let grid = /** @type {HTMLElement | null} */ (box.querySelector(`[data-section="${CSS.escape(section)}"]`));
      if (!grid) {
        grid = h('div', { class: 'perf-grid', dataset: { section } });
        box.append(h('h3', { class: 'gauge-section' }, section), grid);
      }
      for (const name of inSection) {
        const plot = this.card(grid, `gauge:${name}`, name);
        plot.dataset.gauge = name;
        const unit = name.endsWith('_pct') ? '%' : '';
        await Plotly.react(plot, gaugeTraces(gauges[name]), perfLayout(theme, { unit }), CONFIG);
      }
    }
  }
}

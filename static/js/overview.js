// @ts-check
// The run overview page (/runs/<id>): puts the run's info and catalog (embedded in
// the page) into the progress panel, headline charts, config tree, environments, notes and
// housekeeping, and keeps them current: `/ws/live/` deltas extend the charts, `run` messages
// carry status, progress, renames and deletion; a slow poll of the read API catches what no
// message announces (a run turning idle).

import { getCatalog, getRun } from './core/api.js';
import { ConfigTree } from './runs/configtree.js';
import { h, loadPlotly, runColor } from './core/dom.js';
import { renderEnvironments } from './runs/envtable.js';
import { HeadlineCharts } from './charts/headline.js';
import { LiveClient } from './core/live.js';
import { NotesPanel } from './runs/notes.js';
import { RunEditor } from './runs/edit.js';
import { recentStepSeconds } from './runs/progress.js';
import { ProgressPanel, setConnection, showDeleted } from './runs/status.js';

const POLL_MS = 15000;
const TICK_MS = 1000;

const byId = (id) => document.getElementById(id);

class OverviewPage {
  constructor() {
    this.info = JSON.parse(byId('run-info').textContent);
    this.catalog = JSON.parse(byId('run-catalog').textContent);
    this.id = this.info.id;
    this.seq = this.catalog.seq ?? 0;
    this.progress = new ProgressPanel(byId('progress'));
    this.charts = new HeadlineCharts(byId('headline'), this.id, runColor(this.info),
      loadPlotly(/** @type {HTMLLinkElement} */ (byId('plotly-src')).href));
    this.config = new ConfigTree(byId('config'), this.info.config);
    renderEnvironments(byId('environments'), this.catalog.environments);
    const onSaved = (info) => this.apply(info);
    this.notes = new NotesPanel(byId('notes'), this.info, { onSaved });
    this.editor = new RunEditor(byId('housekeeping'), this.info, {
      onSaved, onDeleted: () => { location.href = '/'; } });
    this.liveStatus = byId('live-status');
    this.live = new LiveClient({
      seq: () => this.seq,
      delta: (msg) => this.onDelta(msg),
      reset: () => this.reload(),
      run: (_, info) => this.onRunInfo(info),
      status: (state) => setConnection(this.liveStatus, state),
    });
  }

  async start() {
    this.apply(this.info);
    try {
      await this.charts.load(this.catalog.series);
    } catch (err) {
      byId('headline').append(h('p', { class: 'bad' }, `Could not load the charts: ${err.message}`));
    }
    // Subscribed once the charts hold their snapshot: the replay since the catalog's seq then
    // lands on top of it, newest last.
    this.live.start();
    this.live.subscribe(this.id);
    this.ticker = setInterval(() => this.progress.tick(Date.now(), this.pace()), TICK_MS);
    this.poller = setInterval(() => this.poll(), POLL_MS);
  }

  pace() {
    const [steps, times] = this.charts.recent();
    return recentStepSeconds(steps, times);
  }

  /** Show the run's (new) info everywhere on the page. */
  apply(info) {
    if (this.gone) return;
    this.info = { ...this.info, ...info };
    const name = this.info.name;
    byId('run-name').textContent = name;
    byId('crumb-run').textContent = name;
    document.title = `${name} · Telescope dashboard`;
    byId('run-swatch').style.background = runColor(this.info);
    this.progress.update(this.info, Date.now());
    this.progress.tick(Date.now(), this.pace());
    this.notes.update(this.info);
    this.editor.update(this.info);
    if (runColor(this.info) !== this.charts.color) this.charts.setColor(runColor(this.info));
  }

  onRunInfo(info) {
    if (!info) return;
    if (info.deleted) this.markDeleted(info);
    else this.apply(info);
  }

  onDelta(msg) {
    this.seq = msg.seq;
    if (msg.series?.length) this.charts.addEntries(msg.series).catch((err) => console.warn(err));
    this.charts.applyPoints(msg.points);
  }

  /** Too much changed to replay: read the catalog and charts again, then follow from there. */
  async reload() {
    const catalog = await getCatalog(this.id);
    this.seq = catalog.seq ?? this.seq;
    await this.charts.load(catalog.series);
    this.live.subscribe(this.id);
  }

  async poll() {
    try {
      this.apply(await getRun(this.id));
    } catch (err) {
      if (err.status === 404) this.markDeleted({ deleted_at: err.body?.deleted_at ?? null });
    }
  }

  /** The run was deleted (here, elsewhere): say so and leave nothing to edit. */
  markDeleted(info = {}) {
    if (this.gone) return;
    this.gone = true;
    clearInterval(this.poller);
    clearInterval(this.ticker);
    this.live.stop();
    setConnection(this.liveStatus, 'stopped');
    this.notes.disable();
    this.editor.disable();
    this.progress.update({ ...this.info, status: 'deleted', eta_seconds: null, pending_steps: 0 });
    showDeleted(byId('deleted-banner'), { ...this.info, ...info });
  }
}

new OverviewPage().start();

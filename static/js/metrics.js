// @ts-check
// The Metrics page (All view, or the Custom view with `?view=custom`): loads the runs' catalogs,
// lays out charts, keeps them live from `/ws/live/`, and applies the page controls. Entry point
// of templates/metrics.html.

import { getRun } from './core/api.js';
import { siblingKey, wantsBand } from './core/catalog.js';
import { Controls } from './charts/controls.js';
import { firstMetricsHelp, h, loadPlotly, runColor, themeColors } from './core/dom.js';
import './charts/features.js';
import { LiveClient } from './core/live.js';
import { ChartPrefs } from './charts/prefs.js';
import { RunBar } from './runs/bar.js';
import { RunFollower } from './runs/follow.js';
import { setConnection, showDeleted } from './runs/status.js';
import { Scheduler, Visibility } from './core/scheduler.js';
import { Loader, RunStore } from './charts/store.js';
import { compileSearch } from './core/text.js';
import { showNoMatch } from './charts/nomatch.js';
import { AllView } from './charts/view.js';
import { chartsToParams, pageToParams, queryString, viewFromUrl } from './charts/viewurl.js';

const CATALOG_REFRESH_MS = 300;
const PLOTLY_AT_LATEST_MS = 3000;
// The first catalog entries go into the All view this many at a time until it has more charts
// than the viewport holds (addFirstScreenFirst).
const FIRST_SLICE = 16;
const POINTS_STEP = 400;

/** The links to the page's two views (All, Custom), which carry the runs shown (the other
 * tabs, Samples, Timeline, Performance, are other pages and keep their links). */
function viewTabs() {
  return /** @type {NodeListOf<HTMLAnchorElement>} */ (document.querySelectorAll('.view-tabs a[data-view]'));
}

/**
 * The page's view, All (charts/view.js) or Custom (custom/view.js), with the parts only one
 * of them has: saving a layout edit (Custom), the Data quality section's counters (All).
 * @typedef {(AllView | import('./custom/view.js').CustomView) & {flush?: (options?: {leaving?: boolean}) => Promise<unknown>,
 *   refreshQualitySoon?: () => void, watchQuality?: () => void}} PageView
 */

class MetricsPage {
  constructor() {
    this.root = document.getElementById('sections');
    // A URL holding a view (charts/viewurl.js) wins over the stored settings; the page's URL
    // follows every change (syncUrl), so that it can be copied as it is.
    const initial = viewFromUrl(location.search);
    this.allPrefs = new ChartPrefs(initial.charts); // the All view's (the Custom view's: its layout's)
    this.allPrefs.onChange = () => this.syncUrl();
    /** @type {ChartPrefs | import('./custom/view.js').CustomView['prefs']} */
    this.prefs = this.allPrefs;
    this.loader = new Loader();
    this.scheduler = new Scheduler();
    this.visibility = new Visibility();
    this.runs = [];
    this.stdIndex = new Map(); // siblingKey -> std series id
    this.bandOwner = new Map(); // std series id -> mean series id
    this.maxPoints = null;
    this.controls = new Controls(document.getElementById('controls'), (s, field) => this.onControls(field),
      { initial: initial.page, link: () => this.syncUrl(true), linkSlot: document.getElementById('page-link') });
    this.settings = this.controls.settings;
    /** @type {PageView} the Custom view's once its modules are loaded (start) */
    this.view = this.root.dataset.view === 'custom' ? null : new AllView(this.root, this);
    this.runbar = new RunBar(document.getElementById('runbar'), this);
    this.empty = document.getElementById('empty');
    this.live = new LiveClient({
      seq: (run) => this.store(run)?.seq ?? 0,
      delta: (msg) => this.onDelta(msg),
      reset: (run) => this.onReset(run),
      run: (run, info) => this.onRunInfo(run, info),
      status: (state) => setConnection(this.runbar.status, state),
    });
    // Statuses that change by the clock alone (a silent trainer turns crashed) are re-read.
    const fresh = (run, info) => this.onRunInfo(run, info);
    this.follower = new RunFollower(fresh, fresh);
    for (const tab of viewTabs()) {
      tab.addEventListener('click', async (ev) => {
        if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
        ev.preventDefault();
        await this.view.flush?.(); // a layout edit of the last moment is saved first
        location.assign(tab.href);
      });
    }
    this.themeCache = null;
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
      this.themeCache = null;
      this.view.invalidateAll();
    });
    window.telescope = this; // for tests, benchmarks and the curious
  }

  theme() {
    if (!this.themeCache) this.themeCache = themeColors();
    return this.themeCache;
  }

  store(id) {
    return this.runs.find((s) => s.id === Number(id));
  }

  stdIdFor(entry) {
    return wantsBand(entry) ? this.stdIndex.get(siblingKey(entry)) ?? null : null;
  }

  async start() {
    performance.mark('telescope:modules'); // bench/browser.py --timeline reads the page's marks
    if (!this.view) await this.openCustomView();
    const primary = JSON.parse(document.getElementById('run-info').textContent);
    const catalog = JSON.parse(document.getElementById('run-catalog').textContent);
    const firstSeries = document.getElementById('run-series');
    const overlay = (new URLSearchParams(location.search).get('overlay') || '').split(',')
      .map(Number).filter((n) => n > 0 && n !== primary.id);
    this.measurePoints();
    this.startPlotly();
    this.live.start();
    // With runs to overlay, charts drawn before they are added would be drawn again, without
    // a first screen sooner: the page is built the usual way then.
    await this.addRun(primary, catalog, !overlay.length, firstSeries && JSON.parse(firstSeries.textContent));
    if (!this.view.charts.size) this.plotlyNow();
    for (const id of overlay) {
      try {
        await this.addRun(await getRun(id));
      } catch (err) {
        console.warn('overlay run not found', id, err);
      }
    }
  }

  /**
   * The Custom view, its modules (and SortableJS) loaded for it alone: the All view's first
   * screen does not wait for a dozen modules it never runs (telescope_ui/pages.py preloads
   * them on the Custom view's page).
   */
  async openCustomView() {
    const { CustomView } = await import('./custom/view.js');
    this.view = new CustomView(this.root, this, JSON.parse(document.getElementById('run-layout').textContent));
    this.prefs = this.view.prefs; // chart settings live in the layout, on the server
  }

  /**
   * Plotly runs once the first screen is sketched (or after a few seconds at the latest). An
   * async script, evaluated as soon as it arrived (beside the modules' download), made the
   * first screen interactive ~0.1-0.25 s sooner but drawn ~0.4-0.9 s later: its evaluation
   * came before the sketches (bench/RESULTS.md, 2026-12-02).
   */
  startPlotly() {
    const src = /** @type {HTMLLinkElement} */ (document.getElementById('plotly-src')).href;
    let started = false;
    const go = () => {
      if (started) return;
      started = true;
      this.scheduler.onSettled = null;
      // Let the sketches reach the screen before the evaluation blocks the thread: from the
      // scheduler's frame that drew them (onSettled), a task posted now runs once that frame
      // is painted (a frame more, waited for with requestAnimationFrame, cost 15-60 ms).
      setTimeout(() => {
        performance.mark('telescope:plotly-asked');
        loadPlotly(src).then(() => this.onPlotly());
      }, 0);
    };
    this.plotlyNow = go;
    this.scheduler.onSettled = () => {
      if ([...this.view.charts.values()].some((c) => c.canvas)) go();
    };
    setTimeout(go, PLOTLY_AT_LATEST_MS);
  }

  onPlotly() {
    performance.mark('telescope:plotly-ready');
    this.runbar.refreshChoices();
    for (const c of this.view.charts.values()) {
      if (!c.canvas && !c.near) continue;
      c.lastDraw = 0;
      c.invalidate();
    }
  }

  // ------------------------------------------------------------ runs

  async addRun(info, catalog = null, firstScreenFirst = false, embedded = null) {
    if (this.store(info.id)) return;
    const store = new RunStore(info);
    store.color = runColor(info);
    store.maxPoints = this.maxPoints;
    store.onFirstStep = () => this.settings.xaxis === 'time' && this.invalidateSoon();
    this.runs.push(store);
    this.runbar.render();
    const added = await store.loadCatalog(catalog);
    if (embedded) this.takeEmbedded(store, embedded);
    this.live.subscribe(store.id);
    this.follower.follow(store.id, info.status);
    if (firstScreenFirst && this.view instanceof AllView && !this.view.charts.size) {
      this.addFirstScreenFirst(added);
    } else {
      this.addEntries(added);
    }
    this.syncUrl();
    this.view.invalidateAll();
  }

  /**
   * The first screen's series the page came with (telescope_ui/pages.py, ingest/reads/
   * first_screen.py): each taken as a series response, when it is what this page would ask
   * for — read at this page's points per trace, or whole (not downsampled) and within them.
   * Series share their step and time arrays (`axes`, first_screen.shared_axes): the store
   * copies what it takes (charts/transforms.js fromPayload).
   */
  takeEmbedded(store, { max_points: points, seq, axes = [], series }) {
    for (const [sid, shared] of Object.entries(series)) {
      if (!store.catalog.has(sid)) continue;
      const axis = axes[shared.axis];
      const payload = axis ? { ...shared, step: axis[0], time: axis[1] } : shared;
      if (points === store.maxPoints || (!payload.downsampled && payload.step.length <= store.maxPoints)) {
        store.loaded(sid, payload, seq);
      }
    }
  }

  /**
   * The first catalog into an empty All view: its first entries (the view places entries in
   * arrival order, so the page ends up as with one add), then the data of the charts in view
   * asked for, then the rest of the page, in the same task. Building ~300 chart cards takes a
   * few hundred ms; the first screen's series are on their way meanwhile instead of after it
   * (and after the first paint, which the observers wait for).
   */
  addFirstScreenFirst(entries) {
    let i = 0;
    while (i < entries.length && this.view.charts.size < this.firstCharts) {
      this.addEntries(entries.slice(i, i + FIRST_SLICE));
      i += FIRST_SLICE;
    }
    this.visibility.primeInView(this.view.charts.values());
    this.loader.pump(); // send those requests now, not once this task is over
    this.addEntries(entries.slice(i)); // also when none are left: an empty run says so
  }

  removeRun(id) {
    const i = this.runs.findIndex((s) => s.id === id);
    if (i <= 0) return;
    this.runs.splice(i, 1);
    this.live.unsubscribe(id);
    this.follower.forget(id);
    for (const c of this.view.charts.values()) c.detail.delete(id);
    this.syncUrl();
    this.runbar.render();
    this.view.invalidateAll();
  }

  recolor(id, color) {
    const store = this.store(id);
    if (!store) return;
    store.color = color;
    store.info.color = color;
    this.view.invalidateAll();
  }

  /**
   * The page's URL holds its view: the runs overlaid, the controls and (All view) the charts'
   * settings that differ from their defaults (charts/viewurl.js); so do the links to the other
   * view. Replaced, never pushed (no history entry per change), and only when it changed.
   * Returns the URL, with `copy` the one to copy: it also says `x=step`, so that it opens this
   * view in a browser with other settings stored (charts/viewurl.js).
   */
  syncUrl(copy = false) {
    const params = new URLSearchParams(location.search);
    const overlay = this.runs.slice(1).map((s) => s.id);
    if (overlay.length) params.set('overlay', overlay.join(','));
    else params.delete('overlay');
    pageToParams(params, this.settings);
    // The Custom view's chart settings are its layout's (on the server): the URL's stay as they are.
    if (this.view instanceof AllView) chartsToParams(params, this.allPrefs.forUrl(this.view.charts.keys()));
    const url = `${location.pathname}${queryString(params)}${location.hash}`;
    if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(null, '', url);
    for (const tab of viewTabs()) { // the other view, same runs and controls
      const other = new URLSearchParams(params);
      other.set('view', tab.dataset.view);
      tab.href = `${location.pathname}${queryString(other)}`;
    }
    if (!copy) return location.href;
    pageToParams(params, this.settings, true);
    return `${location.origin}${location.pathname}${queryString(params)}${location.hash}`;
  }

  /** syncUrl once charts stop arriving (stored settings of a new chart join the URL). */
  syncUrlSoon() {
    clearTimeout(this.syncTimer);
    this.syncTimer = setTimeout(() => this.syncUrl(), 100);
  }

  // ------------------------------------------------------------ catalog and charts

  addEntries(entries) {
    for (const e of entries) {
      if (e.normalized) {
        this.twinArrived(e);
        continue; // drawn by its raw twin's chart when Normalize is on, never a chart of its own
      }
      if (e.stat === 'std') {
        const key = siblingKey(e);
        this.stdIndex.set(key, e.id);
        for (const other of this.view.charts.values()) {
          if (wantsBand(other.entry) && siblingKey(other.entry) === key) {
            this.bandOwner.set(e.id, other.id);
            other.ensureData();
          }
        }
      }
      if (wantsBand(e) && this.stdIndex.has(siblingKey(e))) this.bandOwner.set(this.stdIndex.get(siblingKey(e)), e.id);
    }
    const made = this.view.add(entries);
    this.updateEmpty();
    if (made.length) this.applyFilter();
    if (made.length && !this.allPrefs.fromUrl) this.syncUrlSoon();
  }

  /** A normalized series is listed: the charts that show it (its twin's, a band's) load it. */
  twinArrived(entry) {
    if (!this.settings.normalize) return;
    const raw = this.runs.map((s) => s.rawIdOf(entry.id)).find(Boolean);
    if (raw) this.invalidateSeries(raw);
  }

  /** Redraw the charts that draw raw series `sid`: its own and, for a std, its mean's band. */
  invalidateSeries(sid) {
    const chart = this.view.chartFor?.(sid) ?? this.view.charts.get(sid);
    chart?.invalidate();
    if (chart?.quality) this.view.refreshQualitySoon?.();
    const owner = this.bandOwner.get(sid);
    if (owner) this.view.charts.get(owner)?.invalidate();
  }

  /**
   * Points per trace: about two per pixel of plot width (server bounds 10..20000), rounded. The width
   * follows from the grid's rules (CSS: columns of at least 380 px, 10 px apart), computed
   * before any chart exists so that no layout of the whole page is forced. Also how many charts
   * to build before the first screen's data is asked for (cards are about 250 px high).
   */
  measurePoints() {
    const width = this.root.clientWidth || innerWidth;
    const cols = Math.max(1, Math.floor((width + 10) / 390));
    const plot = (width - 10 * (cols - 1)) / cols - 16;
    // In steps of POINTS_STEP: most widths ask for the same figure, the one the server reads a
    // first visit's embedded series at (telescope_ui/pages.py DEFAULT_PAGE_POINTS), so that
    // even a long run's first screen comes with the page.
    const points = Math.round((2 * plot) / POINTS_STEP) * POINTS_STEP;
    this.maxPoints = Math.max(POINTS_STEP, Math.min(2000, points));
    this.firstCharts = 2 * cols * Math.ceil(innerHeight / 250); // twice the cards a screen holds
    // The server reads the first screen's series for the next visit at this figure (pages.py).
    document.cookie = `telescope_points=${this.maxPoints}; path=/; max-age=31536000; SameSite=Lax`;
  }

  updateEmpty() {
    const none = !this.view.hasEntries();
    if (none && this.empty.hidden) {
      const info = this.runs[0]?.info;
      this.empty.replaceChildren(h('h2', {}, 'Waiting for the first metrics'),
        h('p', {}, 'This run has no data yet. Send a step and it shows up here live.'),
        firstMetricsHelp(info?.project, info?.name));
    }
    this.empty.hidden = !none;
  }

  applyFilter() {
    const f = compileSearch(this.settings.search, this.settings.regex);
    this.view.setFilter(f);
    this.controls.showSearchResult(this.view.visibleCount(), f.error);
    showNoMatch(this, this.view.visibleCount());
  }

  onControls(field) {
    this.syncUrl();
    if (field === 'search' || field === 'regex') this.applyFilter();
    else this.view.invalidateAll();
  }

  invalidateSoon() {
    if (this.invalidateQueued) return;
    this.invalidateQueued = true;
    requestAnimationFrame(() => {
      this.invalidateQueued = false;
      this.view.invalidateAll();
    });
  }

  // ------------------------------------------------------------ live

  onDelta(msg) {
    const store = this.store(msg.run);
    if (!store) return;
    const { changed, added, unknown } = store.applyDelta(msg);
    if (added.length) this.addEntries(added);
    // A normalized twin's points redraw the chart of its raw series.
    for (const sid of changed) this.invalidateSeries(store.rawIdOf(sid) ?? sid);
    if (unknown.length) this.refreshCatalogSoon(store);
  }

  refreshCatalogSoon(store) {
    if (store.catalogTimer) return;
    store.catalogTimer = setTimeout(async () => {
      store.catalogTimer = null;
      try {
        const seq = store.seq;
        const added = await store.loadCatalog();
        store.seq = seq; // the catalog does not move the live stream
        this.addEntries(added);
      } catch (err) {
        console.warn('catalog refresh failed', err);
      }
    }, CATALOG_REFRESH_MS);
  }

  async onReset(runId) {
    const store = this.store(runId);
    if (!store) return;
    store.clearSeries();
    for (const c of this.view.charts.values()) c.detail.delete(store.id);
    this.addEntries(await store.loadCatalog());
    this.view.watchQuality?.(); // its counters were forgotten with the series: read them again
    this.live.subscribe(store.id);
    this.view.invalidateAll();
  }

  onRunInfo(runId, info) {
    const store = this.store(runId);
    if (!store || !info || store.deleted) return;
    if (info.deleted) {
      this.onRunDeleted(store, info);
      return;
    }
    Object.assign(store.info, info);
    if (info.status) this.follower.follow(store.id, info.status);
    clearTimeout(this.runInfoTimer);
    // Progress comes at most twice a second and may be short-lived: shown at once, here (a
    // timer could be cancelled by the run's next update and the backlog's end reach the page
    // before the render: the badge would never show). Other updates are gathered.
    if ('pending_steps' in info) this.runbar.render();
    else this.runInfoTimer = setTimeout(() => this.runbar.render(), 200);
  }

  /**
   * A run of the page was deleted: its chip says so and it is no longer followed; when it is
   * the page's own run, a banner says so and live updates stop (overlays freeze with it: the
   * page is that run's). What is drawn stays, as it was.
   */
  onRunDeleted(store, info) {
    store.deleted = true;
    Object.assign(store.info, { status: 'deleted', pending_steps: 0 });
    this.follower.forget(store.id);
    this.live.unsubscribe(store.id);
    if (store === this.runs[0]) {
      this.live.stop();
      this.follower.stop();
      setConnection(this.runbar.status, 'stopped');
      showDeleted(document.getElementById('deleted-banner'), { ...store.info, ...info });
    }
    this.runbar.render();
  }
}

new MetricsPage().start().catch((err) => {
  console.error(err);
  const box = document.getElementById('empty');
  box.hidden = false;
  box.replaceChildren(h('h2', {}, 'Could not load this run'), h('p', {}, String(err.message || err)));
});

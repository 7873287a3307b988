// @ts-check
// The sample viewer's page: one step's groups (samples/cards.js), the filters and search, keys
// between samples and steps, text fetched when needed, the run followed live.

import { h } from '../core/dom.js';
import { LiveClient } from '../core/live.js';
import { RunFollower } from '../runs/follow.js';
import { setConnection, setStatusBadge, showDeleted } from '../runs/status.js';
import { Group } from './cards.js';
import { fmt, groupsOf, keyOf, samplesQuery } from './pure.js';

const REFRESH_MS = 400; // live events lead to one look at the run at most this often
const SEARCH_MS = 150;
const MAX_LIMIT = 10000; // the API's page size limit
const FIRST_SCREEN_SAMPLES = 48; // drawn before the first paint; the rest follow in slices
const SLICE_SAMPLES = 200;
const TEXT_CHUNK = 64; // samples whose text one opened sample fetches

export class Viewer {
  constructor(root, initial, info) {
    this.root = root;
    this.info = info;
    this.runId = Number(root.dataset.runId);
    this.pageLimit = Number(root.dataset.pageLimit) || 2000;
    this.filters = { env: '', kept: '', min_reward: '', max_reward: '' };
    this.query = '';
    this.expanded = new Set();
    this.envs = new Set();
    this.seq = initial.seq;
    this.refreshTimer = null;
    this.loads = 0;
    this.renders = 0;
    this.wire();
    this.show(initial, false);
    // The run's status (its badge) apart from the live connection (a small indicator).
    this.follower = new RunFollower((_, fresh) => this.onRunInfo(fresh), (_, gone) => this.gone(gone));
    this.onRunInfo(info);
    this.live = new LiveClient({
      seq: () => this.seq,
      delta: (msg) => { this.seq = msg.seq; this.scheduleRefresh(); },
      reset: () => this.scheduleRefresh(true),
      run: (run, fresh) => (fresh?.deleted ? this.gone(fresh) : this.onRunInfo(fresh, true)),
      status: (state) => setConnection(this.el('live-status'), state),
    }).start();
    this.live.subscribe(this.runId);
  }

  /** New info of the run (live, or re-read): its status badge; live news may mean samples. */
  onRunInfo(fresh, live = false) {
    if (this.deleted || !fresh) return;
    if (fresh.status) {
      this.info = { ...this.info, ...fresh };
      setStatusBadge(this.el('run-status'), fresh.status);
      this.follower.follow(this.runId, fresh.status);
    }
    if (live) this.scheduleRefresh();
  }

  url(params) {
    return `/api/runs/${this.runId}/samples?${params}`;
  }

  /** An API answer, or null once a failure is shown (the server away, a page being left). */
  async fetch(params) {
    try {
      const res = await fetch(this.url(params), { credentials: 'same-origin' });
      const body = await res.json();
      if (res.status === 404) { // the run is gone (a bad step or filter is a 400)
        this.gone();
        return null;
      }
      if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
      this.el('load-error').textContent = '';
      return body;
    } catch (err) {
      this.el('load-error').textContent = `Could not load samples: ${err.message}`;
      return null;
    }
  }

  /**
   * The page's control of id `id` (templates/samples.html): an input, or a button whose
   * `disabled` it sets like an input's.
   * @param {string} id
   * @returns {HTMLInputElement}
   */
  el(id) {
    return /** @type {HTMLInputElement} */ (document.getElementById(id));
  }

  // ---------------------------------------------------------------- controls

  wire() {
    const slider = this.el('step-slider');
    const input = this.el('step-input');
    slider.addEventListener('input', () => { input.value = slider.value; });
    slider.addEventListener('change', () => this.goTo(Number(slider.value)));
    input.addEventListener('change', () => input.value !== '' && this.goTo(Number(input.value)));
    this.el('step-prev').addEventListener('click', () => this.goTo(this.body.prev_step));
    this.el('step-next').addEventListener('click', () => this.goTo(this.body.next_step));
    this.el('follow').addEventListener('change', () => this.el('follow').checked && this.refresh());
    const filter = (id, name) => this.el(id).addEventListener('change', () => {
      this.filters[name] = this.el(id).value;
      this.goTo(this.body.step);
    });
    filter('filter-env', 'env');
    filter('filter-kept', 'kept');
    filter('filter-min', 'min_reward');
    filter('filter-max', 'max_reward');
    const search = this.el('text-search');
    let timer = null;
    search.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.search(search.value), SEARCH_MS);
    });
    search.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        this.search(search.value).then(() => this.nextMatch(ev.shiftKey ? -1 : 1));
      } else if (ev.key === 'Escape') {
        search.blur();
      }
    });
    this.el('more-button').addEventListener('click', () => this.more());
    document.addEventListener('keydown', (ev) => this.key(ev));
  }

  key(ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.target.closest?.('input, select, textarea')) return;
    const b = this.body;
    const actions = {
      j: () => this.moveFocus(1), ArrowDown: () => this.moveFocus(1),
      k: () => this.moveFocus(-1), ArrowUp: () => this.moveFocus(-1),
      ArrowRight: () => this.goTo(b.next_step), ArrowLeft: () => this.goTo(b.prev_step),
      Home: () => this.goTo(b.first_step), End: () => this.goTo(b.last_step),
      '/': () => this.el('text-search').focus(),
      b: () => this.focusedGroup()?.compare(),
      o: () => this.focusedRow()?.toggle(),
      Escape: () => this.focusedRow()?.toggle(false),
    };
    const act = actions[ev.key];
    if (!act) return;
    ev.preventDefault();
    act();
  }

  // ---------------------------------------------------------------- loading

  async goTo(step, { keepOpen = false } = {}) {
    if (step === null || step === undefined || Number.isNaN(step)) return;
    // Going anywhere but the newest step by hand stops following it.
    if (!keepOpen && step !== this.body?.last_step) this.el('follow').checked = false;
    const ticket = ++this.loads; // a later navigation wins over one still loading
    const body = await this.fetch(samplesQuery(step, this.filters, { limit: this.pageLimit }));
    if (body && ticket === this.loads) this.show(body, keepOpen);
  }

  async more() {
    const offset = this.body.samples.length;
    const body = await this.fetch(samplesQuery(this.body.step, this.filters, { offset, limit: this.pageLimit }));
    if (body) this.show({ ...body, samples: this.body.samples.concat(body.samples), offset: 0 }, true);
  }

  show(body, keepOpen) {
    if (!keepOpen || body.step !== this.body?.step) this.expanded.clear();
    this.body = body;
    this.texts = new Map(); // sample key -> its record with text, once fetched
    this.chunks = new Map(); // chunk of TEXT_CHUNK samples -> its fetch (a promise)
    this.index = new Map(body.samples.map((s, i) => [s, i]));
    this.seq = Math.max(this.seq ?? 0, body.seq ?? 0);
    for (const e of body.environments) this.envs.add(e ?? '');
    this.updateControls();
    if (body.step !== null && body.step !== undefined) {
      const url = new URL(location.href);
      url.searchParams.set('step', String(body.step));
      history.replaceState(null, '', url);
    }
    delete this.root.dataset.loaded;
    this.render(() => {
      if (this.query) this.applySearch();
      this.root.dataset.step = body.step ?? '';
      this.root.dataset.loaded = 'true';
    });
  }

  /**
   * The text of some of the samples shown (all of them when `samples` is null): fetched when
   * first needed, by chunks of TEXT_CHUNK samples of the step's order (neighbouring missing
   * chunks in one request), so opening one sample reads little. Resolves to the key → record
   * map of what is known.
   */
  async textFor(samples = null) {
    const b = this.body;
    const n = b.samples.length;
    const wanted = new Set(samples === null
      ? Array.from({ length: Math.ceil(n / TEXT_CHUNK) }, (_, c) => c)
      : samples.map((s) => Math.floor((this.index.get(s) ?? 0) / TEXT_CHUNK)));
    const missing = [...wanted].filter((c) => !this.chunks.has(c)).sort((x, y) => x - y);
    for (let i = 0; i < missing.length;) {
      let j = i;
      while (j + 1 < missing.length && missing[j + 1] === missing[j] + 1 && (j + 2 - i) * TEXT_CHUNK <= MAX_LIMIT) j++;
      const offset = missing[i] * TEXT_CHUNK;
      const limit = Math.min(n, (missing[j] + 1) * TEXT_CHUNK) - offset;
      const load = this.fetch(samplesQuery(b.step, this.filters, { offset, limit, text: true })).then((page) => {
        if (this.body !== b) return;
        for (const r of page?.samples ?? []) if (!this.texts.has(keyOf(r))) this.texts.set(keyOf(r), r);
        if (!page) for (let c = missing[i]; c <= missing[j]; c++) this.chunks.delete(c); // retry later
      });
      for (let c = missing[i]; c <= missing[j]; c++) this.chunks.set(c, load);
      i = j + 1;
    }
    await Promise.all([...wanted].map((c) => this.chunks.get(c)));
    return this.texts;
  }

  /** At most one look at the run per REFRESH_MS however many live events arrive. */
  scheduleRefresh(reset = false) {
    this.resetSeq ||= reset;
    if (this.refreshTimer || this.deleted) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.refresh();
    }, REFRESH_MS);
  }

  /** A look at the run after live events: new steps, more samples of this one. */
  async refresh() {
    const b = this.body;
    const ticket = this.loads;
    const now = await this.fetch(samplesQuery(b.step, this.filters, { limit: 0 }));
    if (!now || this.body !== b || ticket !== this.loads) return; // the page moved meanwhile
    if (this.resetSeq) {
      this.resetSeq = false;
      this.seq = now.seq;
      this.live.subscribe(this.runId);
    }
    const follow = this.el('follow').checked || b.step === null;
    if (follow && now.last_step !== null && now.last_step !== b.step) {
      await this.goTo(now.last_step, { keepOpen: true });
    } else if (now.total !== b.total && b.samples.length < this.pageLimit) {
      await this.goTo(b.step, { keepOpen: true });
    } else {
      Object.assign(b, { first_step: now.first_step, last_step: now.last_step,
        prev_step: now.prev_step, next_step: now.next_step });
      this.updateControls();
    }
  }

  /** The run was deleted: say so, stop following it; the samples shown stay readable. */
  gone(info = {}) {
    if (this.deleted) return;
    this.deleted = true;
    clearTimeout(this.refreshTimer);
    this.live.stop();
    this.follower.stop();
    setConnection(this.el('live-status'), 'stopped');
    setStatusBadge(this.el('run-status'), 'deleted');
    this.el('follow').checked = false;
    this.el('follow').disabled = true;
    showDeleted(this.el('deleted-banner'), { ...this.info, ...info });
  }

  // ---------------------------------------------------------------- rendering

  updateControls() {
    const b = this.body;
    const slider = this.el('step-slider');
    const has = b.first_step !== null && b.first_step !== undefined;
    slider.disabled = !has;
    if (has) {
      slider.min = String(b.first_step);
      slider.max = String(b.last_step);
      slider.value = String(b.step ?? b.last_step);
    }
    this.el('step-input').value = String(b.step ?? '');
    this.el('step-prev').disabled = b.prev_step === null;
    this.el('step-next').disabled = b.next_step === null;
    const env = /** @type {HTMLSelectElement} */ (document.getElementById('filter-env'));
    const known = new Set([...env.options].map((o) => o.value));
    for (const e of [...this.envs].sort()) {
      if (e !== '' && !known.has(e)) env.append(h('option', { value: e }, e));
    }
  }

  /** Draw the step's groups; `done` once every sample is in the page. */
  render(done) {
    const b = this.body;
    const groups = groupsOf(b.samples);
    const summary = this.el('step-summary');
    if (b.first_step === null || b.first_step === undefined) {
      summary.replaceChildren('No samples yet. Send them with ', h('code', {}, 'client.log_samples(step, ..., prompt=..., completion=...)'),
        ' or ', h('code', {}, 'log_rewards'), '; they appear here as they arrive.');
    } else if (!b.total) {
      summary.textContent = `No samples at step ${fmt(b.step)}${this.filtered() ? ' match the filters' : ''}.`;
    } else {
      summary.textContent = `Step ${fmt(b.step)}: ${fmt(b.total)} sample${b.total === 1 ? '' : 's'} in ${fmt(groups.length)} group${groups.length === 1 ? '' : 's'}`
        + (b.samples.length < b.total ? ` (first ${fmt(b.samples.length)} shown)` : '');
    }
    this.el('more').hidden = b.samples.length >= b.total;
    // The first screen at once, the rest in slices between frames: a step of thousands of
    // samples paints as fast as one of fifty, and the page answers keys meanwhile.
    this.groups = [];
    this.root.replaceChildren();
    const ticket = ++this.renders;
    let next = 0;
    const slice = (budget) => {
      if (ticket !== this.renders) return;
      const frag = document.createDocumentFragment();
      for (let n = 0; next < groups.length && n < budget; next++) {
        const g = new Group(this, groups[next]);
        this.groups.push(g);
        frag.append(g.el);
        n += g.rows.length;
      }
      this.root.append(frag);
      if (next < groups.length) setTimeout(() => slice(SLICE_SAMPLES), 0);
      else done();
    };
    slice(FIRST_SCREEN_SAMPLES);
    requestAnimationFrame(() => document.dispatchEvent(new CustomEvent('telescope:samples-painted', {
      detail: { step: b.step, at: performance.now() } })));
  }

  filtered() {
    return Object.values(this.filters).some((v) => v !== '');
  }

  rangeOf(s, metric = null) {
    const r = this.body.ranges[s.env ?? ''];
    if (!r) return null;
    return metric === null ? r.reward : r.metrics[metric] ?? null;
  }

  rows() {
    return this.groups.flatMap((g) => g.rows);
  }

  focusedRow() {
    const li = document.activeElement?.closest?.('.sample');
    return this.rows().find((r) => r.el === li) ?? null;
  }

  focusedGroup() {
    const section = document.activeElement?.closest?.('.sample-group');
    return this.groups.find((g) => g.el === section) ?? this.groups[0] ?? null;
  }

  moveFocus(delta) {
    const rows = this.rows().filter((r) => !r.el.hidden);
    if (!rows.length) return;
    const at = rows.indexOf(this.focusedRow());
    const next = rows[at < 0 ? (delta > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + delta))];
    next.focus();
  }

  // ---------------------------------------------------------------- search

  async search(query) {
    if (query === this.query) return;
    this.query = query;
    for (const r of this.rows()) r.el.classList.remove('current-match');
    await this.applySearch();
  }

  async applySearch() {
    const b = this.body;
    const text = this.query ? await this.textFor() : this.texts;
    if (this.body !== b) return;
    let samples = 0;
    let total = 0;
    for (const row of this.rows()) {
      const n = row.matches(text.get(row.key));
      if (n > 0) samples += 1;
      total += n;
    }
    for (const g of this.groups) g.refreshCompare();
    this.el('search-status').textContent = this.query
      ? `${fmt(total)} match${total === 1 ? '' : 'es'} in ${fmt(samples)} sample${samples === 1 ? '' : 's'} (Enter: next)`
      : '';
  }

  /** Open the next (previous) sample with a match, the search box keeping the focus. */
  nextMatch(delta) {
    const rows = this.rows().filter((r) => r.count > 0);
    if (!rows.length) return;
    const at = rows.findIndex((r) => r.el.classList.contains('current-match'));
    const next = at < 0 ? rows[delta > 0 ? 0 : rows.length - 1] : rows[(at + delta + rows.length) % rows.length];
    for (const r of rows) r.el.classList.toggle('current-match', r === next);
    next.toggle(true);
    next.summary.scrollIntoView({ block: 'nearest' });
  }
}


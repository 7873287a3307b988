// The sample viewer (/runs/<id>/samples?step=S, issue 17): one step's samples in groups, each
// sample's reward and sample metrics coloured red → green by its environment's range (declared,
// else observed; `invert` reverses it), with advantage, tokens, stop and discard reasons. A
// sample opens to its prompt and completion (plain text, monospace; the search's matches marked),
// a group shows its best and worst samples side by side, keys move between samples and steps, and
// a running run's newest step arrives without a reload (/ws/live/). Text is only fetched once it
// is needed (open, search, compare). The pure parts are exported for node tests.

import { h } from './dom.js';
import { LiveClient } from './live.js';
import { RunFollower } from './runfollow.js';
import { setConnection, setStatusBadge, showDeleted } from './runstatus.js';

const REFRESH_MS = 400; // live events lead to one look at the run at most this often
const SEARCH_MS = 150;
const MAX_LIMIT = 10000; // the API's page size limit
const FIRST_SCREEN_SAMPLES = 48; // drawn before the first paint; the rest follow in slices
const SLICE_SAMPLES = 200;
const TEXT_CHUNK = 64; // samples whose text one opened sample fetches

// ------------------------------------------------------------------ pure parts

/** Where `value` lies in `range` ({min, max, invert}), 0 (red) … 1 (green); null if unknown. */
export function normalized(value, range) {
  if (typeof value !== 'number' || !Number.isFinite(value) || !range) return null;
  const { min, max, invert } = range;
  if (typeof min !== 'number' || typeof max !== 'number') return null;
  const t = max === min ? 0.5 : Math.min(1, Math.max(0, (value - min) / (max - min)));
  return invert ? 1 - t : t;
}

/** The hue of a normalized value: 0 red, 60 yellow, 120 green. */
export const hueOf = (t) => Math.round(120 * t);

const WHOLE = new Intl.NumberFormat('en-US'); // one formatter: toLocaleString makes one per call

export function fmt(v) {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '—';
  if (typeof v !== 'number') return String(v);
  if (!Number.isInteger(v)) return String(Number(v.toPrecision(4)));
  return Math.abs(v) < 1000 ? String(v) : WHOLE.format(v);
}

/** The API orders samples by group: consecutive samples of one group id, in order. */
export function groupsOf(samples) {
  const out = [];
  for (const s of samples) {
    const id = String(s.group_id);
    if (!out.length || out.at(-1).id !== id) out.push({ id, groupId: s.group_id, samples: [] });
    out.at(-1).samples.push(s);
  }
  return out;
}

/** The best and worst samples of a group by reward (first and last of the highest and lowest). */
export function bestAndWorst(samples) {
  const scored = samples.filter((s) => typeof s.reward === 'number' && Number.isFinite(s.reward));
  if (scored.length < 2) return null;
  let best = scored[0];
  let worst = scored[0];
  for (const s of scored) {
    if (s.reward > best.reward) best = s;
    if (s.reward <= worst.reward) worst = s;
  }
  return best === worst ? null : { best, worst };
}

function searchRegExp(query) {
  const q = String(query || '');
  return q ? new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'giu') : null;
}

/** `text` cut into [{text, match}] pieces around the case-insensitive matches of `query`. */
export function highlightParts(text, query) {
  const re = searchRegExp(query);
  const s = String(text ?? '');
  if (!re) return [{ text: s, match: false }];
  const parts = [];
  let at = 0;
  for (const m of s.matchAll(re)) {
    if (m.index > at) parts.push({ text: s.slice(at, m.index), match: false });
    parts.push({ text: m[0], match: true });
    at = m.index + m[0].length;
  }
  if (at < s.length || !parts.length) parts.push({ text: s.slice(at), match: false });
  return parts;
}

export function countMatches(text, query) {
  const re = searchRegExp(query);
  return re && text ? [...String(text).matchAll(re)].length : 0;
}

/** A sample's identity on the page (its group and id). */
export const keyOf = (s) => `${s.group_id}\u241f${s.sample_id}`;

/** The API query of a step with the page's filters. */
export function samplesQuery(step, filters, { offset = 0, limit = 0, text = false } = {}) {
  const q = new URLSearchParams();
  if (step !== null && step !== undefined) q.set('step', String(step));
  for (const [k, v] of Object.entries(filters)) if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
  q.set('offset', String(offset));
  q.set('limit', String(limit));
  if (text) q.set('text', '1');
  return q.toString();
}

// ------------------------------------------------------------------ the page

class Viewer {
  constructor(root, initial, info) {
    this.root = root;
    this.info = info;
    this.runId = Number(root.dataset.runId);
    this.pageLimit = Number(root.dataset.pageLimit) || 2000;
    this.el = (id) => document.getElementById(id);
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
    this.el('step-input').value = b.step ?? '';
    this.el('step-prev').disabled = b.prev_step === null;
    this.el('step-next').disabled = b.next_step === null;
    const env = this.el('filter-env');
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
      samples += n > 0;
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

/** The text of one prompt or completion, the search's matches marked. */
function textBlock(label, text, query) {
  const pre = h('pre', { class: 'sample-text' });
  if (text === null || text === undefined) pre.append(h('span', { class: 'muted' }, `no ${label.toLowerCase()} stored`));
  else pre.append(...highlightParts(text, query).map((p) => (p.match ? h('mark', {}, p.text) : p.text)));
  return h('div', { class: 'text-block', dataset: { text: label.toLowerCase() } }, h('h4', {}, label), pre);
}

function chip(cls, label, value, t, title) {
  return h('span', {
    class: `chip ${cls}${t === null ? ' unranged' : ''}`, title,
    dataset: t === null ? {} : { norm: t.toFixed(3) },
    style: t === null ? null : `--h: ${hueOf(t)}`,
  }, label ? h('span', { class: 'chip-label' }, label) : null, fmt(value));
}

function rangeTitle(name, r) {
  if (!r || typeof r.min !== 'number') return `${name}: no range known yet`;
  return `${name}: ${r.source} range ${fmt(r.min)} – ${fmt(r.max)}${r.invert ? ' (inverted: lower is better)' : ''}`;
}

class Row {
  constructor(viewer, s) {
    this.viewer = viewer;
    this.sample = s;
    this.key = keyOf(s);
    this.count = 0;
    const rr = viewer.rangeOf(s);
    const metrics = Object.entries(s.metrics).filter(([, v]) => v !== null).map(([k, v]) => {
      const r = viewer.rangeOf(s, k);
      return chip('metric', k, v, normalized(v, r), rangeTitle(k, r));
    });
    this.badge = h('span', { class: 'match-count', hidden: true });
    this.summary = h('button', { type: 'button', class: 'sample-summary', 'aria-expanded': 'false',
      onclick: () => this.toggle() },
    chip('reward', null, s.reward, normalized(s.reward, rr), rangeTitle('reward', rr)),
    s.advantage === null ? null
      : h('span', { class: 'field', title: 'advantage' }, h('span', { class: 'field-label' }, 'adv '), fmt(s.advantage)),
    s.prompt_tokens === null && s.completion_tokens === null ? null
      : h('span', { class: 'field', title: 'prompt + completion tokens' }, h('span', { class: 'field-label' }, 'tokens '),
        `${fmt(s.prompt_tokens)} + ${fmt(s.completion_tokens)}`),
    s.stop_reason ? h('span', { class: `tag stop${s.stop_reason === 'length' ? ' length' : ''}`, title: 'stop reason' }, s.stop_reason) : null,
    s.discard_reason ? h('span', { class: 'tag discard', title: 'discarded' }, s.discard_reason) : null,
    ...metrics, this.badge, h('span', { class: 'sample-id muted' }, String(s.sample_id)));
    this.detail = h('div', { class: 'sample-detail', hidden: true });
    this.el = h('li', { class: `sample${s.discard_reason ? ' discarded' : ''}`, dataset: { sampleId: String(s.sample_id), key: this.key } },
      this.summary, this.detail);
    if (viewer.expanded.has(this.key)) this.toggle(true);
  }

  focus() {
    this.summary.focus();
    this.summary.scrollIntoView({ block: 'nearest' });
  }

  async toggle(open = this.detail.hidden) {
    this.detail.hidden = !open;
    this.summary.setAttribute('aria-expanded', String(open));
    this.el.classList.toggle('open', open);
    if (!open) {
      this.viewer.expanded.delete(this.key);
      return;
    }
    this.viewer.expanded.add(this.key);
    if (!this.detail.childElementCount) this.detail.append(h('p', { class: 'muted' }, 'Loading text…'));
    const text = await this.viewer.textFor([this.sample]);
    this.fill(text.get(this.key));
  }

  fill(t) {
    if (this.detail.hidden) return;
    const q = this.viewer.query;
    this.detail.replaceChildren(textBlock('Prompt', t?.prompt, q), textBlock('Completion', t?.completion, q));
  }

  matches(t) {
    const q = this.viewer.query;
    this.count = q && t ? countMatches(t.prompt, q) + countMatches(t.completion, q) : 0;
    this.badge.hidden = this.count === 0;
    this.badge.textContent = `${this.count} match${this.count === 1 ? '' : 'es'}`;
    this.el.classList.toggle('match', this.count > 0);
    this.el.classList.toggle('no-match', Boolean(q) && this.count === 0);
    if (!this.detail.hidden && t !== undefined) this.fill(t);
    return this.count;
  }
}

class Group {
  constructor(viewer, g) {
    this.viewer = viewer;
    this.group = g;
    this.rows = g.samples.map((s) => new Row(viewer, s));
    const rewards = g.samples.map((s) => s.reward).filter((r) => typeof r === 'number');
    const tied = rewards.length > 1 && rewards.every((r) => r === rewards[0]);
    const envs = [...new Set(g.samples.map((s) => s.env).filter(Boolean))];
    this.pair = bestAndWorst(g.samples);
    this.compareBtn = h('button', { type: 'button', class: 'compare-button', 'aria-expanded': 'false',
      disabled: !this.pair, title: this.pair ? 'Best vs worst of this group (b)' : 'Needs two samples with different rewards',
      onclick: () => this.compare() }, 'Best vs worst');
    this.panel = h('div', { class: 'compare', hidden: true });
    this.el = h('section', { class: 'sample-group', dataset: { groupId: g.id }, 'aria-label': `Group ${g.id}` },
      h('header', { class: 'group-head' }, h('h3', {}, `Group ${g.id}`),
        envs.length ? h('span', { class: 'muted' }, envs.join(', ')) : null,
        h('span', { class: 'muted' }, `${g.samples.length} sample${g.samples.length === 1 ? '' : 's'}`),
        tied ? h('span', { class: 'tag tied', title: 'every reward equal: no learning signal' }, 'tied') : null,
        this.compareBtn),
      this.panel, h('ol', { class: 'samples' }, ...this.rows.map((r) => r.el)));
  }

  async compare(open = this.panel.hidden) {
    if (!this.pair) return;
    this.panel.hidden = !open;
    this.compareBtn.setAttribute('aria-expanded', String(open));
    if (open) {
      this.panel.replaceChildren(h('p', { class: 'muted' }, 'Loading text…'));
      await this.viewer.textFor([this.pair.best, this.pair.worst]);
      this.refreshCompare();
      this.panel.scrollIntoView({ block: 'nearest' });
    }
  }

  async refreshCompare() {
    if (this.panel.hidden || !this.pair) return;
    const text = await this.viewer.textFor([this.pair.best, this.pair.worst]);
    const q = this.viewer.query;
    const side = (name, s) => {
      const t = text.get(keyOf(s));
      const r = this.viewer.rangeOf(s);
      return h('div', { class: 'compare-side', dataset: { side: name } },
        h('h4', {}, `${name === 'best' ? 'Best' : 'Worst'} · `, chip('reward', null, s.reward, normalized(s.reward, r), rangeTitle('reward', r)),
          h('span', { class: 'muted' }, ` ${s.sample_id}`)),
        textBlock('Prompt', t?.prompt, q), textBlock('Completion', t?.completion, q));
    };
    this.panel.replaceChildren(side('best', this.pair.best), side('worst', this.pair.worst));
  }
}

// ------------------------------------------------------------------ start

const root = typeof document !== 'undefined' ? document.getElementById('samples') : null;
if (root) {
  const initial = JSON.parse(document.getElementById('samples-initial').textContent);
  const info = JSON.parse(document.getElementById('run-info').textContent);
  window.telescopeSamples = new Viewer(root, initial, info);
}

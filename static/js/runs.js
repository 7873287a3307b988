// @ts-check
// The runs page: projects and their runs with status, progress and ETA; search by
// name or config value, filter by status, sort; tick runs to compare their configs side by side
// or open them overlaid on the Metrics page. A run's name leads to its overview; its colour is
// editable here. Kept current by a poll of the read API and by live `run` messages (renames,
// deletions, status) through runs/watch.js. The search, filter and sort live in the URL.

import { getRun, listRuns, setRunColor } from './core/api.js';
import { ComparePanel, overlayUrl } from './runs/compare.js';
import { flattenConfig } from './core/config.js';
import { firstMetricsHelp, h, runColor } from './core/dom.js';
import { SORTS, STATUSES, runFilter, sortRuns } from './runs/filter.js';
import { formatDuration, progressOf } from './runs/progress.js';
import { progressBar, setStatusBadge } from './runs/status.js';
import { RunWatch } from './runs/watch.js';
import { age } from './core/text.js';

const REFRESH_MS = 5000;
const CONFIG_FETCHES = 4; // configs read at once for a config search
const COLUMNS = ['Select', 'Colour', 'Run', 'Status', 'Progress', 'ETA', 'Last step', 'Started', 'Updated'];

class RunsPage {
  constructor() {
    this.root = document.getElementById('runs');
    this.empty = document.getElementById('empty');
    this.runs = new Map(); // id -> info
    this.rows = new Map(); // id -> {tr, parts}
    this.projects = new Map(); // name -> {section, tbody}
    this.leaves = new Map(); // id -> config leaves (flattenConfig)
    this.selected = new Set();
    this.comparePanel = new ComparePanel(document.getElementById('compare'));
    this.watch = new RunWatch((id, info) => this.onLive(id, info));
    this.buildTools();
  }

  buildTools() {
    const params = new URLSearchParams(location.search);
    this.search = h('input', { type: 'search', name: 'q', value: params.get('q') ?? '', placeholder: 'Search name or config (grpo, lr=1e-6)',
      'aria-label': 'Search runs by name or config value' });
    this.status = h('select', { name: 'status', 'aria-label': 'Filter by status' },
      h('option', { value: '' }, 'Any status'), ...STATUSES.map((s) => h('option', { value: s }, s)));
    this.status.value = STATUSES.includes(params.get('status')) ? params.get('status') : '';
    this.sort = h('select', { name: 'sort', 'aria-label': 'Sort by' },
      ...Object.entries(SORTS).map(([k, s]) => h('option', { value: k }, s.label)));
    this.sort.value = params.get('sort') in SORTS ? params.get('sort') : 'updated';
    this.reverse = params.get('reverse') === '1';
    this.direction = h('button', { type: 'button', class: 'tool', onclick: () => { this.reverse = !this.reverse; this.changed(); } });
    this.count = h('span', { class: 'muted count', role: 'status' });
    this.search.addEventListener('input', () => this.changed());
    this.status.addEventListener('change', () => this.changed());
    this.sort.addEventListener('change', () => this.changed());
    document.getElementById('runs-tools').replaceChildren(this.search, this.status,
      h('label', {}, 'Sort by ', this.sort), this.direction, this.count);
    this.compareButton = h('button', { type: 'button', disabled: true, onclick: () => this.compare() }, 'Compare configs');
    this.openButton = h('button', { type: 'button', class: 'primary', disabled: true, onclick: () => this.open() }, 'Open selected');
    this.hint = h('span', { class: 'muted' }, 'Tick runs to compare their configs or overlay them on one Metrics page.');
    document.getElementById('runs-actions').replaceChildren(this.compareButton, this.openButton, this.hint);
  }

  /** Search, filter or sort changed: into the URL, then the rows. */
  changed() {
    const params = new URLSearchParams();
    if (this.search.value.trim()) params.set('q', this.search.value.trim());
    if (this.status.value) params.set('status', this.status.value);
    if (this.sort.value !== 'updated') params.set('sort', this.sort.value);
    if (this.reverse) params.set('reverse', '1');
    const q = params.toString();
    history.replaceState(null, '', q ? `?${q}` : location.pathname);
    this.render();
  }

  async refresh() {
    let runs;
    try {
      runs = await listRuns();
    } catch (err) {
      this.hint.textContent = `Could not load runs (${err.message}); retrying…`;
      return;
    }
    this.empty.hidden = runs.length > 0;
    if (!runs.length && !this.empty.childElementCount) {
      this.empty.append(h('h2', {}, 'No runs yet'),
        h('p', {}, 'Runs appear here as soon as a training job sends its first message.'), firstMetricsHelp());
    }
    const seen = new Set(runs.map((r) => r.id));
    for (const id of [...this.runs.keys()]) if (!seen.has(id)) this.forget(id);
    for (const run of runs) this.runs.set(run.id, { ...this.runs.get(run.id), ...run });
    this.watch.watch(runs.map((r) => r.id)); // listed newest first: the freshest are watched
    this.render();
  }

  onLive(id, info) {
    if (!info || !this.runs.has(id)) return;
    if (info.deleted) this.forget(id);
    else this.runs.set(id, { ...this.runs.get(id), ...info });
    clearTimeout(this.renderTimer);
    this.renderTimer = setTimeout(() => this.render(), 50);
  }

  forget(id) {
    this.runs.delete(id);
    this.leaves.delete(id);
    this.selected.delete(id);
    this.rows.get(id)?.tr.remove();
    this.rows.delete(id);
    this.updateSelection();
  }

  /** Rows in sort order per project; those the search and filter leave out hidden. */
  render() {
    const now = Date.now();
    const query = this.search.value;
    const keep = runFilter({ query, status: this.status.value });
    this.direction.textContent = (SORTS[this.sort.value].desc !== this.reverse) ? '↓' : '↑';
    this.direction.setAttribute('aria-label', this.reverse ? 'Reverse order (on)' : 'Reverse order');
    this.direction.title = 'Reverse the order';
    if (query.trim()) this.loadConfigs();
    const sorted = sortRuns([...this.runs.values()], this.sort.value, this.reverse);
    const shown = new Map();
    const order = new Map(); // project -> rows in sort order
    for (const run of sorted) {
      const row = this.row(run);
      this.update(row, run, now);
      if (!order.has(run.project)) order.set(run.project, []);
      order.get(run.project).push(row.tr);
      row.tr.hidden = !keep(run, this.leaves.get(run.id) ?? null);
      if (!row.tr.hidden) shown.set(run.project, (shown.get(run.project) ?? 0) + 1);
    }
    for (const [name, trs] of order) {
      const { tbody } = this.project(name);
      // Moved only when the order changed: moving a row drops the focus inside it.
      if (trs.some((tr, i) => tbody.children[i] !== tr)) tbody.append(...trs);
    }
    for (const [name, p] of this.projects) p.section.hidden = !shown.get(name);
    const total = this.runs.size;
    const visible = [...shown.values()].reduce((a, b) => a + b, 0);
    this.count.textContent = visible === total ? `${total} run${total === 1 ? '' : 's'}` : `${visible} of ${total} runs`;
  }

  /** Read the configs a config search needs, a few at a time; render as they come. */
  async loadConfigs() {
    if (this.loadingConfigs) return;
    this.loadingConfigs = true;
    try {
      let missing;
      while ((missing = [...this.runs.keys()].filter((id) => !this.leaves.has(id))).length) {
        const batch = missing.slice(0, CONFIG_FETCHES);
        const infos = await Promise.all(batch.map((id) => getRun(id).catch(() => null)));
        batch.forEach((id, i) => this.leaves.set(id, flattenConfig(infos[i]?.config ?? null)));
        this.render();
      }
    } finally {
      this.loadingConfigs = false;
    }
  }

  project(name) {
    if (this.projects.has(name)) return this.projects.get(name);
    const tbody = h('tbody');
    const head = h('tr', {}, ...COLUMNS.map((t) => h('th', { scope: 'col' }, t)));
    const section = h('section', { class: 'project', dataset: { project: name } },
      h('h2', {}, name), h('table', { class: 'runs-table runs-list' }, h('thead', {}, head), tbody));
    const names = [...this.projects.keys(), name].sort();
    const next = names[names.indexOf(name) + 1];
    this.root.insertBefore(section, next ? this.projects.get(next).section : null);
    const p = { section, tbody };
    this.projects.set(name, p);
    return p;
  }

  row(run) {
    if (this.rows.has(run.id)) return this.rows.get(run.id);
    const tick = h('input', { type: 'checkbox', 'aria-label': `Select run ${run.name}` });
    tick.addEventListener('change', () => {
      if (tick.checked) this.selected.add(run.id);
      else this.selected.delete(run.id);
      this.updateSelection();
    });
    const color = h('input', { type: 'color', class: 'swatch', value: runColor(run), 'aria-label': `Colour of run ${run.name}` });
    color.addEventListener('change', async () => {
      try {
        await setRunColor(run.id, color.value);
      } catch (err) {
        this.hint.textContent = `Colour not saved: ${err.message}`;
      }
    });
    const parts = { tick, color, link: h('a', { href: `/runs/${run.id}` }), status: h('span', { class: 'badge' }),
      bar: progressBar(), progress: h('small'), eta: h('td', { class: 'num eta' }), step: h('td', { class: 'num step' }),
      started: h('td'), updated: h('td') };
    const tr = h('tr', { dataset: { runId: String(run.id) } },
      h('td', {}, tick), h('td', {}, color),
      h('td', { class: 'run-name' }, parts.link, h('a', { class: 'metrics-link', href: `/runs/${run.id}/metrics` }, 'metrics')),
      h('td', {}, parts.status), h('td', { class: 'progress' }, parts.progress, parts.bar),
      parts.eta, parts.step, parts.started, parts.updated);
    const row = { tr, parts };
    this.rows.set(run.id, row);
    return row;
  }

  update({ tr, parts: p }, run, now) {
    p.link.textContent = run.name;
    p.link.title = run.notes ? run.notes.slice(0, 300) : '';
    p.tick.setAttribute('aria-label', `Select run ${run.name}`);
    p.color.setAttribute('aria-label', `Colour of run ${run.name}`);
    setStatusBadge(p.status, run.status);
    const { done, total } = progressOf(run);
    p.progress.textContent = total ? `${done.toLocaleString('en-US')} / ${total.toLocaleString('en-US')}` : '—';
    p.bar.hidden = !total;
    p.bar.update(run);
    p.eta.textContent = run.status === 'running' && run.eta_seconds !== null && run.eta_seconds !== undefined
      ? formatDuration(run.eta_seconds) : '—';
    p.step.textContent = run.last_step ?? '—';
    p.started.textContent = age(run.started_at, now);
    p.started.title = new Date(run.started_at).toLocaleString();
    p.updated.textContent = age(run.updated_at, now);
    p.updated.title = new Date(run.updated_at).toLocaleString();
    if (document.activeElement !== p.color) p.color.value = runColor(run);
    tr.classList.toggle('selected', this.selected.has(run.id));
  }

  /** Selected runs in the order shown. */
  selection() {
    /** @type {NodeListOf<HTMLTableRowElement>} */
    const rows = this.root.querySelectorAll('tr[data-run-id]');
    return [...rows].map((tr) => Number(tr.dataset.runId))
      .filter((id) => this.selected.has(id));
  }

  updateSelection() {
    const n = this.selected.size;
    this.compareButton.disabled = n < 2;
    this.openButton.disabled = n === 0;
    this.openButton.textContent = n > 1 ? `Open ${n} runs overlaid` : 'Open selected';
    for (const [id, row] of this.rows) row.tr.classList.toggle('selected', this.selected.has(id));
  }

  compare() {
    const ids = this.selection();
    if (ids.length >= 2) this.comparePanel.show(ids.map((id) => this.runs.get(id)));
  }

  open() {
    const ids = this.selection();
    if (ids.length) location.href = overlayUrl(ids);
  }

  start() {
    this.refresh();
    setInterval(() => this.refresh(), REFRESH_MS);
  }
}

new RunsPage().start();

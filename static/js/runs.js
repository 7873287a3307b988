// @ts-check
// The runs page: projects and their runs with status, progress and ETA, their tags and a
// headline column (the latest value of a chosen series, the reward's mean by default); search
// by name or config value, filter by status or tag, sort; tick runs to compare their configs
// side by side or open them overlaid on the Metrics page. A run's name leads to its overview;
// its colour is editable here (warned when another run of the project has it). Kept current by
// a poll of the read API and by live `run` messages (renames, deletions, status) through
// runs/watch.js. The search, filters, sort and headline live in the URL.

import { getCatalog, getRun, listRuns, setRunColor } from './core/api.js';
import { HEADLINE_DEFAULT, headlineLabel, headlineOptions, headlineText } from './runs/headline.js';
import { colorChoices, colorsInUse, guardColor } from './runs/colors.js';
import { tagChip } from './runs/tags.js';
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
const COLUMNS = ['Select', 'Colour', 'Run', 'Status', 'headline', 'Progress', 'ETA', 'Last step', 'Started', 'Updated'];
const HEADLINE_KEY = 'telescope.runs.headline'; // the last headline chosen (the URL wins)

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
    this.tag = h('select', { name: 'tag', 'aria-label': 'Filter by tag' }, h('option', { value: '' }, 'Any tag'));
    this.wantedTag = params.get('tag') ?? '';
    this.fillTags();
    this.headline = params.get('headline') ?? localStorage.getItem(HEADLINE_KEY) ?? HEADLINE_DEFAULT;
    this.headlinePick = h('select', { name: 'headline', 'aria-label': 'Headline column: latest value of' });
    this.headlineOptions = [];
    this.fillHeadline();
    this.headlinePick.addEventListener('focus', () => this.loadHeadlineOptions());
    this.headlinePick.addEventListener('pointerdown', () => this.loadHeadlineOptions());
    this.headlinePick.addEventListener('change', () => {
      this.headline = this.headlinePick.value;
      localStorage.setItem(HEADLINE_KEY, this.headline);
      this.changed();
      this.refresh();
    });
    this.reverse = params.get('reverse') === '1';
    this.direction = h('button', { type: 'button', class: 'tool', onclick: () => { this.reverse = !this.reverse; this.changed(); } });
    this.count = h('span', { class: 'muted count', role: 'status' });
    this.search.addEventListener('input', () => this.changed());
    this.status.addEventListener('change', () => this.changed());
    this.sort.addEventListener('change', () => this.changed());
    this.tag.addEventListener('change', () => { this.wantedTag = this.tag.value; this.changed(); });
    document.getElementById('runs-tools').replaceChildren(this.search, this.status, this.tag,
      h('label', {}, 'Sort by ', this.sort), this.direction, h('label', {}, 'Headline ', this.headlinePick), this.count);
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
    if (this.wantedTag) params.set('tag', this.wantedTag);
    if (this.headline !== HEADLINE_DEFAULT) params.set('headline', this.headline);
    if (this.sort.value !== 'updated') params.set('sort', this.sort.value);
    if (this.reverse) params.set('reverse', '1');
    const q = params.toString();
    history.replaceState(null, '', q ? `?${q}` : location.pathname);
    this.render();
  }

  async refresh() {
    let runs;
    try {
      runs = await listRuns(null, { headline: this.headline });
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
    this.fillTags();
    this.render();
  }

  /** The tag filter's choices: every tag of the runs listed (and the one asked for). */
  fillTags() {
    const tags = new Set([...this.runs.values()].flatMap((r) => r.tags ?? []));
    if (this.wantedTag) tags.add(this.wantedTag);
    const sorted = [...tags].sort();
    const sig = sorted.join('\u0000');
    if (sig !== this.tagSig) {
      this.tagSig = sig;
      this.tag.replaceChildren(h('option', { value: '' }, sorted.length ? 'Any tag' : 'No tags yet'),
        ...sorted.map((t) => h('option', { value: t }, `tag: ${t}`)));
    }
    this.tag.value = this.wantedTag;
  }

  /** Show the runs tagged `tag` (a tag chip was clicked). */
  pickTag(tag) {
    this.wantedTag = tag;
    this.fillTags();
    this.changed();
  }

  /** The headline picker: the chosen series, and once read the choices of the newest runs. */
  fillHeadline() {
    const options = this.headlineOptions.length ? this.headlineOptions : [{ id: this.headline, label: headlineLabel(this.headline) }];
    if (!options.some((o) => o.id === this.headline)) options.unshift({ id: this.headline, label: headlineLabel(this.headline) });
    this.headlinePick.replaceChildren(...options.map((o) => h('option', { value: o.id }, o.label)));
    this.headlinePick.value = this.headline;
  }

  /** Choices for the headline: the series of the newest run of each project (a few). */
  async loadHeadlineOptions() {
    if (this.headlineLoading || this.headlineOptions.length || !this.runs.size) return;
    this.headlineLoading = true;
    try {
      const newest = new Map();
      for (const r of this.runs.values()) if (!newest.has(r.project)) newest.set(r.project, r.id);
      const catalogs = await Promise.all([...newest.values()].slice(0, CONFIG_FETCHES).map((id) => getCatalog(id).catch(() => null)));
      this.headlineOptions = headlineOptions(catalogs.filter(Boolean).flatMap((c) => c.series));
      if (document.activeElement !== this.headlinePick) this.fillHeadline();
      else {
        // Replacing the options of an open <select> closes it: add the missing ones instead.
        const have = new Set([...this.headlinePick.options].map((o) => o.value));
        this.headlinePick.append(...this.headlineOptions.filter((o) => !have.has(o.id)).map((o) => h('option', { value: o.id }, o.label)));
      }
    } finally {
      this.headlineLoading = false;
    }
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
    const keep = runFilter({ query, status: this.status.value, tag: this.wantedTag });
    for (const p of this.projects.values()) p.headlineHead.textContent = headlineLabel(this.headline);
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
    const headlineHead = h('th', { scope: 'col', class: 'headline', title: 'The latest value of the series chosen under Headline' },
      headlineLabel(this.headline));
    const head = h('tr', {}, ...COLUMNS.map((t) => (t === 'headline' ? headlineHead : h('th', { scope: 'col' }, t))));
    const section = h('section', { class: 'project', dataset: { project: name } },
      h('h2', {}, name), h('table', { class: 'runs-table runs-list' }, h('thead', {}, head), tbody));
    const names = [...this.projects.keys(), name].sort();
    const next = names[names.indexOf(name) + 1];
    this.root.insertBefore(section, next ? this.projects.get(next).section : null);
    const p = { section, tbody, headlineHead };
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
    const { list, offer } = colorChoices(color);
    const clash = h('span', { class: 'color-clash', role: 'alert', hidden: true });
    const current = () => this.runs.get(run.id) ?? run;
    color.addEventListener('focus', () => offer(colorsInUse([...this.runs.values()], current().project, run.id)));
    color.addEventListener('change', () => guardColor({ color: color.value, run: current(), runs: [...this.runs.values()], slot: clash,
      revert: () => { color.value = runColor(current()); },
      save: async (c) => {
        try {
          const saved = await setRunColor(run.id, c);
          this.runs.set(run.id, { ...current(), ...saved });
          color.value = runColor(saved);
        } catch (err) {
          this.hint.textContent = `Colour not saved: ${err.message}`;
          color.value = runColor(current());
        }
      } }));
    const parts = { tick, color, link: h('a', { href: `/runs/${run.id}` }), status: h('span', { class: 'badge' }),
      bar: progressBar(), progress: h('small'), eta: h('td', { class: 'num eta' }), step: h('td', { class: 'num step' }),
      started: h('td'), updated: h('td'), tags: h('span', { class: 'run-tags' }), headline: h('td', { class: 'num headline' }) };
    const tr = h('tr', { dataset: { runId: String(run.id) } },
      h('td', {}, tick), h('td', {}, color, list, clash),
      h('td', { class: 'run-name' }, parts.link, h('a', { class: 'metrics-link', href: `/runs/${run.id}/metrics` }, 'metrics'), parts.tags),
      h('td', {}, parts.status), parts.headline, h('td', { class: 'progress' }, parts.progress, parts.bar),
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
    const { text, title } = headlineText(run.headline);
    p.headline.textContent = text;
    p.headline.title = title;
    const tags = (run.tags ?? []).join('\u0000');
    if (tags !== p.tagSig) {
      p.tagSig = tags;
      p.tags.replaceChildren(...(run.tags ?? []).map((t) => tagChip(t, { onPick: (tag) => this.pickTag(tag) })));
    }
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

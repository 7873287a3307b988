// The runs page: projects and their runs (live / finished, last step, started, updated), a
// colour per run (editable, saved on the server), tick runs to open them overlaid.

import { listRuns, setRunColor } from './api.js';
import { firstMetricsHelp, h, runColor } from './dom.js';
import { age } from './text.js';

const REFRESH_MS = 5000;

class RunsPage {
  constructor() {
    this.root = document.getElementById('runs');
    this.empty = document.getElementById('empty');
    this.rows = new Map(); // run id -> {tr, parts}
    this.projects = new Map(); // name -> tbody
    this.selected = new Set();
    this.compare = h('button', { type: 'button', class: 'primary', disabled: true, onclick: () => this.open() }, 'Open selected');
    this.hint = h('span', { class: 'muted' }, 'Tick runs to overlay them on one Metrics page.');
    document.getElementById('runs-actions').replaceChildren(this.compare, this.hint);
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
    const now = Date.now();
    for (const run of runs) this.upsert(run, now);
  }

  projectBody(name) {
    if (this.projects.has(name)) return this.projects.get(name);
    const tbody = h('tbody');
    const head = h('tr', {}, ...['Overlay', 'Colour', 'Run', 'Status', 'Last step', 'Started', 'Updated']
      .map((t) => h('th', { scope: 'col' }, t)));
    const section = h('section', { class: 'project', dataset: { project: name } },
      h('h2', {}, name), h('table', { class: 'runs-table' }, h('thead', {}, head), tbody));
    const names = [...this.projects.keys(), name].sort();
    const next = names[names.indexOf(name) + 1];
    this.root.insertBefore(section, next ? this.projects.get(next).closest('section') : null);
    this.projects.set(name, tbody);
    return tbody;
  }

  upsert(run, now) {
    let row = this.rows.get(run.id);
    if (!row) {
      row = this.makeRow(run);
      this.rows.set(run.id, row);
      this.projectBody(run.project).append(row.tr);
    }
    const p = row.parts;
    const live = run.status === 'running';
    p.status.className = `badge ${live ? 'live' : run.status}`;
    p.status.textContent = live ? 'live' : run.status;
    p.step.textContent = run.last_step ?? '—';
    p.started.textContent = age(run.started_at, now);
    p.started.title = new Date(run.started_at).toLocaleString();
    p.updated.textContent = age(run.updated_at, now);
    p.updated.title = new Date(run.updated_at).toLocaleString();
    if (document.activeElement !== p.color) p.color.value = runColor(run);
  }

  makeRow(run) {
    const tick = h('input', { type: 'checkbox', 'aria-label': `Overlay run ${run.name}` });
    tick.addEventListener('change', () => {
      if (tick.checked) this.selected.add(run.id);
      else this.selected.delete(run.id);
      this.compare.disabled = this.selected.size === 0;
      this.compare.textContent = this.selected.size > 1 ? `Open ${this.selected.size} runs overlaid` : 'Open selected';
    });
    const color = h('input', { type: 'color', class: 'swatch', value: runColor(run), 'aria-label': `Colour of run ${run.name}` });
    color.addEventListener('change', async () => {
      try {
        await setRunColor(run.id, color.value);
      } catch (err) {
        this.hint.textContent = `Colour not saved: ${err.message}`;
      }
    });
    const parts = { color, status: h('span', { class: 'badge' }), step: h('td', { class: 'num' }),
      started: h('td'), updated: h('td') };
    const tr = h('tr', { dataset: { runId: String(run.id) } },
      h('td', {}, tick), h('td', {}, color),
      h('td', {}, h('a', { href: `/runs/${run.id}/metrics` }, run.name)),
      h('td', {}, parts.status), parts.step, parts.started, parts.updated);
    return { tr, parts };
  }

  open() {
    const ids = [...this.selected];
    if (!ids.length) return;
    const rest = ids.slice(1);
    location.href = `/runs/${ids[0]}/metrics${rest.length ? `?overlay=${rest.join(',')}` : ''}`;
  }

  start() {
    this.refresh();
    setInterval(() => this.refresh(), REFRESH_MS);
  }
}

new RunsPage().start();

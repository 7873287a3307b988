// @ts-check
// Compare the configs of two or more runs side by side, to see what differs: one row per config key,
// one column per run, rows whose values differ highlighted (core/config.js diffConfigs); "only
// differences" hides the rest; open the runs overlaid on the Metrics page from here.

import { getRun } from '../core/api.js';
import { diffConfigs } from '../core/config.js';
import { h, runColor } from '../core/dom.js';

/** The Metrics page of the first run with the others overlaid (metrics.js reads `overlay`). */
export function overlayUrl(ids) {
  const [first, ...rest] = ids;
  return `/runs/${first}/metrics${rest.length ? `?overlay=${rest.join(',')}` : ''}`;
}

export class ComparePanel {
  constructor(root) {
    this.root = root;
    this.onlyDiff = h('input', { type: 'checkbox', name: 'only-differences' });
    this.onlyDiff.addEventListener('change', () => this.filterRows());
    root.hidden = true;
  }

  /** Read the runs' configs (fresh) and show them side by side. */
  async show(runs) {
    this.runs = runs;
    this.root.hidden = false;
    this.root.replaceChildren(h('p', { class: 'muted' }, 'Loading configs…'));
    let infos;
    try {
      infos = await Promise.all(runs.map((r) => getRun(r.id)));
    } catch (err) {
      this.root.replaceChildren(h('p', { class: 'bad' }, `Could not load the configs: ${err.message}`));
      return;
    }
    if (this.runs !== runs) return; // superseded meanwhile
    const rows = diffConfigs(infos.map((i) => i.config));
    const differing = rows.filter((r) => r.differs).length;
    this.table = this.render(infos, rows);
    const summary = rows.length
      ? `${rows.length} key${rows.length === 1 ? '' : 's'}, ${differing} differ${differing === 1 ? 's' : ''}`
      : 'None of these runs sent a config.';
    const head = h('div', { class: 'compare-head' },
      h('h2', {}, `Config of ${infos.length} runs`), h('span', { class: 'muted compare-summary' }, summary),
      h('label', {}, this.onlyDiff, ' Only differences'),
      h('a', { class: 'button-link', href: overlayUrl(infos.map((i) => i.id)) }, 'Open overlaid'),
      h('button', { type: 'button', onclick: () => this.hide() }, 'Close'));
    this.root.replaceChildren(head, h('div', { class: 'compare-scroll' }, this.table));
    this.filterRows();
  }

  render(infos, rows) {
    const head = h('tr', {}, h('th', { scope: 'col' }, 'Key'), ...infos.map((info) => h('th', { scope: 'col', dataset: { runId: String(info.id) } },
      h('span', { class: 'swatch-dot', style: `background:${runColor(info)}` }), info.name)));
    const body = rows.map((row) => h('tr', { class: row.differs ? 'differs' : '', dataset: { path: row.path } },
      h('th', { scope: 'row' }, row.path),
      ...row.values.map((v) => (v === undefined ? h('td', { class: 'missing' }, 'absent') : h('td', {}, v)))));
    return h('table', { class: 'compare-table' }, h('thead', {}, head), h('tbody', {}, ...body));
  }

  filterRows() {
    if (!this.table) return;
    for (const tr of this.table.tBodies[0].rows) tr.hidden = this.onlyDiff.checked && !tr.classList.contains('differs');
  }

  hide() {
    this.runs = null;
    this.table = null;
    this.root.hidden = true;
    this.root.replaceChildren();
  }

  get open() {
    return !this.root.hidden;
  }
}

// @ts-check
// The run bar of the Metrics page: the runs drawn (primary first, then overlays), each with its
// colour (editable, saved on the server), status and last step; add or remove overlays.

import { colorChoices, colorsInUse, guardColor } from './colors.js';
import { listRuns, setRunColor } from '../core/api.js';
import { h } from '../core/dom.js';
import { BACKLOG, backlogShown, backlogText } from './state.js';
import { setStatusBadge } from './status.js';

export class RunBar {
  /**
   * `page` supplies: runs (RunStores), addRun(info), removeRun(id), recolor(id, color).
   */
  constructor(root, page) {
    this.root = root;
    this.page = page;
    this.chips = h('ul', { class: 'run-chips', 'aria-label': 'Runs on this page' });
    this.picker = h('select', { class: 'run-picker', 'aria-label': 'Overlay another run' });
    this.picker.addEventListener('change', () => this.pick());
    this.picker.addEventListener('focus', () => this.refreshChoices());
    this.status = h('span', { class: 'live-status muted', 'aria-live': 'polite' });
    root.replaceChildren(this.chips, this.picker, this.status);
    this.all = null; // not listed yet
  }

  async refreshChoices() {
    try {
      this.all = await listRuns();
    } catch {
      return;
    }
    this.renderPicker();
  }

  renderPicker() {
    if (this.all === null) {
      this.picker.replaceChildren(h('option', { value: '' }, '+ Overlay run…'));
      return;
    }
    const shown = new Set(this.page.runs.map((s) => s.id));
    const primary = this.page.runs[0]?.info;
    const others = this.all.filter((r) => !shown.has(r.id))
      .sort((a, b) => Number(b.project === primary?.project) - Number(a.project === primary?.project));
    this.picker.replaceChildren(h('option', { value: '' }, others.length ? '+ Overlay run…' : 'No other runs'),
      ...others.map((r) => h('option', { value: String(r.id) }, `${r.project} / ${r.name}`)));
    this.picker.disabled = others.length === 0;
  }

  pick() {
    const id = Number(this.picker.value);
    this.picker.value = '';
    const info = (this.all || []).find((r) => r.id === id);
    if (info) this.page.addRun(info);
  }

  /** Rebuild the chips when the set of runs changed; otherwise refresh status and step only. */
  render() {
    const ids = this.page.runs.map((s) => s.id).join(',');
    if (ids !== this.renderedIds) {
      this.renderedIds = ids;
      this.chips.replaceChildren(...this.page.runs.map((store, i) => this.chip(store, i === 0)));
      this.renderPicker();
    }
    for (const store of this.page.runs) this.refreshChip(store);
  }

  refreshChip(store) {
    const info = store.info;
    const parts = store.chipParts;
    if (!parts) return;
    setStatusBadge(parts.status, info.status); // the API's names, as the run list and overview say
    parts.step.textContent = info.last_step === null || info.last_step === undefined ? 'no steps' : `step ${info.last_step}`;
    this.showBacklog(store, info.pending_steps);
    if (document.activeElement !== parts.color) parts.color.value = store.color;
  }

  /**
   * The backlog chip: shown only for a real backlog (backlogShown), not the step or two a live
   * run's newest steps wait for their aggregation; re-checked when one may become real.
   */
  showBacklog(store, pending, now = Date.now()) {
    const parts = store.chipParts;
    if (!parts) return;
    store.backlogSince = pending > BACKLOG.steps ? store.backlogSince ?? now : null;
    const shown = backlogShown(pending, store.backlogSince, now);
    parts.progress.hidden = !shown;
    parts.progress.textContent = shown ? backlogText(pending) : '';
    clearTimeout(store.backlogTimer);
    if (!shown && store.backlogSince !== null) {
      store.backlogTimer = setTimeout(() => this.showBacklog(store, store.info.pending_steps ?? 0),
        store.backlogSince + BACKLOG.ms - now + 50);
    }
  }

  chip(store, primary) {
    const info = store.info;
    const color = h('input', { type: 'color', value: store.color, class: 'swatch', 'aria-label': `Colour of run ${info.name}` });
    const { list, offer } = colorChoices(color);
    const clash = h('span', { class: 'color-clash', role: 'alert', hidden: true });
    let before = store.color; // the saved colour, while the picker previews others
    const siblings = () => listRuns(store.info.project).catch(() => []);
    color.addEventListener('focus', async () => {
      before = store.color;
      offer(colorsInUse(await siblings(), store.info.project, store.id));
    });
    color.addEventListener('input', () => this.page.recolor(store.id, color.value, false));
    color.addEventListener('change', async () => guardColor({ color: color.value, run: store.info, runs: await siblings(), slot: clash,
      revert: () => {
        this.page.recolor(store.id, before, false);
        color.value = before;
      },
      save: async (c) => {
        try {
          const saved = await setRunColor(store.id, c);
          before = saved.color;
          this.page.recolor(store.id, saved.color, true);
          color.value = saved.color;
        } catch (err) {
          console.warn('colour not saved', err);
        }
      } }));
    const status = h('span', { class: 'badge' });
    const step = h('span', { class: 'muted step' });
    // Steps re-aggregating after a range change: the charts are catching up.
    const progress = h('span', { class: 'badge progress', role: 'status', hidden: true,
      title: 'The server is aggregating steps (new ones, or all of them after a range change); the charts fill in as it goes.' });
    store.chipParts = { status, step, progress, color };
    const name = primary ? h('strong', {}, info.name) : h('a', { href: `/runs/${info.id}/metrics` }, info.name);
    const remove = primary ? null : h('button', { type: 'button', class: 'tool', 'aria-label': `Remove overlay ${info.name}`,
      onclick: () => this.page.removeRun(store.id) }, '×');
    return h('li', { class: 'run-chip', dataset: { runId: String(info.id) } }, color, list, h('span', { class: 'muted' }, `${info.project} /`), name, status, step, progress, remove, clash);
  }

  setStatus(text) {
    this.status.textContent = text;
  }
}

// @ts-check
// A run's status and progress as the pages show them: the status badge (running,
// idle, crashed, finished, failed; deleted once it is), a progress bar, and the overview's panel
// of progress, ETA, pace and times, which ticks between updates (the ETA counts down, ages grow).

import { h } from '../core/dom.js';
import { etaNow, formatDuration, progressOf, progressText, rateText, stepSeconds } from './progress.js';
import { BACKLOG, BADGE_CLASS, backlogShown, backlogSteps, connectionText, deletedText } from './state.js';
import { age } from '../core/text.js';

/** Show `status` on a badge element. */
export function setStatusBadge(el, status) {
  el.className = `badge status ${BADGE_CLASS[status] ?? ''}`.trim();
  el.textContent = status ?? '';
  el.dataset.status = status ?? '';
}

/**
 * Say on `banner` (a hidden `.banner` element of the page) that the run was deleted, with a
 * link to the run list. `info`: the deletion's info merged over the run's last (name, when).
 */
export function showDeleted(banner, info) {
  banner.replaceChildren(deletedText(info), ' ', h('a', { href: '/' }, 'Back to the run list'));
  banner.hidden = false;
}

/** Show the live connection's `state` ('live', 'reconnecting', 'stopped') on `el`. */
export function setConnection(el, state) {
  const { text, title } = connectionText(state);
  el.textContent = text;
  el.title = title;
  el.dataset.connection = state;
}

/** A progress bar; `bar.update(info)` fills it (striped, empty, without total_steps). */
export function progressBar() {
  const fill = h('span', { class: 'progress-fill' });
  const bar = h('div', { class: 'progress-bar', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100' }, fill);
  bar.update = (info) => {
    const { fraction } = progressOf(info);
    bar.classList.toggle('unknown', fraction === null);
    fill.style.width = `${Math.round((fraction ?? 0) * 1000) / 10}%`;
    if (fraction === null) bar.removeAttribute('aria-valuenow');
    else bar.setAttribute('aria-valuenow', String(Math.floor(fraction * 100)));
    bar.setAttribute('aria-valuetext', progressText(info));
    bar.dataset.status = info.status;
  };
  return bar;
}

/** "in 12 min" for a running run with an ETA; why there is none otherwise. */
export function etaText(info, receivedMs, nowMs) {
  const eta = etaNow(info, receivedMs, nowMs);
  if (eta !== null) return eta > 0 ? `in ${formatDuration(eta)}` : 'any moment';
  if (info.status === 'finished' || info.status === 'failed') return `— (${info.status})`;
  if (info.status === 'idle') return '— (idle: nothing received lately)';
  if (info.status === 'crashed') return '— (crashed: the trainer stopped answering)';
  if (info.status === 'deleted') return '—';
  if (!info.total_steps) return '— (total steps unknown)';
  return '— (timing the steps)';
}

export class ProgressPanel {
  constructor(root) {
    this.badge = h('span', { class: 'badge' });
    this.bar = progressBar();
    this.text = h('span', { class: 'progress-text' });
    this.cells = {};
    const item = (name, label) => {
      this.cells[name] = h('dd', { dataset: { field: name } });
      return [h('dt', {}, label), this.cells[name]];
    };
    root.replaceChildren(
      h('div', { class: 'progress-head' }, this.badge, this.text),
      this.bar,
      h('dl', { class: 'facts' }, ...item('last_step', 'Last step'), ...item('eta', 'ETA'),
        ...item('rate', 'Pace'), ...item('started', 'Started'), ...item('updated', 'Updated'),
        ...item('pending', 'Aggregating')));
  }

  /** New info from the server, received at `receivedMs`. */
  update(info, receivedMs = Date.now()) {
    this.info = info;
    this.receivedMs = receivedMs;
    setStatusBadge(this.badge, info.status);
    this.bar.update(info);
    this.text.textContent = progressText(info);
    this.cells.last_step.textContent = info.last_step ?? '—';
    const pending = info.pending_steps ?? 0;
    this.backlogSince = pending > BACKLOG.steps ? this.backlogSince ?? receivedMs : null;
    this.tick();
  }

  /** Refresh what moves with the clock; `recent` = seconds per step seen in the charts. */
  tick(nowMs = Date.now(), recent = this.recent ?? null) {
    const info = this.info;
    if (!info) return;
    this.recent = recent;
    this.cells.eta.textContent = etaText(info, this.receivedMs, nowMs);
    this.cells.rate.textContent = rateText(stepSeconds(info, recent)) || '—';
    // Only a real backlog (state.js backlogShown), not a live run's newest step or two.
    const pending = info.pending_steps ?? 0;
    const shown = backlogShown(pending, this.backlogSince, nowMs);
    this.cells.pending.textContent = shown ? backlogSteps(pending) : '';
    this.cells.pending.previousSibling.hidden = !shown;
    this.cells.pending.hidden = !shown;
    for (const field of ['started', 'updated']) {
      const iso = info[`${field}_at`];
      const when = Date.parse(iso);
      this.cells[field].textContent = Number.isFinite(when) ? `${new Date(when).toLocaleString()} (${age(iso, nowMs)})` : '—';
    }
  }
}

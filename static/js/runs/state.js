// @ts-check
// A run's state as every page reads it, pure, so every page says the same: the statuses the read API derives
// (docs/protocol.md "Runs"), which of them can change without a message (so a page re-reads
// the run), a deleted run's words, and the live connection's words (never a run status).

/** The statuses of GET /api/runs, in the run list's order. */
export const STATUSES = ['running', 'idle', 'crashed', 'finished', 'failed'];

/** The badge class of each status (app.css); `running` pulses like the live dot. */
export const BADGE_CLASS = {
  running: 'live', idle: 'idle', crashed: 'crashed', finished: 'finished', failed: 'failed', deleted: 'deleted',
};

/**
 * Whether a run's shown status may change with no message reaching the page: a running run
 * turns idle or crashed by the clock alone (ingest/progress.py), an idle or crashed one
 * running again with its next message. Finished and failed runs stay so.
 * @param {string | null | undefined} status
 */
export function statusMayDrift(status) {
  return status === 'running' || status === 'idle' || status === 'crashed';
}

/**
 * What a run's info (a live `run` message, GET /api/runs/<id>) says of its end, if anything:
 * `{name, project, deletedAt}` for a deleted run, else null.
 * @param {any} info
 */
export function deletion(info) {
  if (!info || info.deleted !== true) return null;
  return { name: info.name ?? null, project: info.project ?? null, deletedAt: info.deleted_at ?? null };
}

/**
 * The deleted banner's sentence: "This run was deleted" with its name and when, as known.
 * @param {any} info the deleted info ({id, deleted: true, name?, deleted_at?}) or the run's last info
 * @param {number} nowMs
 */
export function deletedText(info, nowMs = Date.now()) {
  const what = info?.name ? `: “${info.name}” and all its data are gone` : '';
  const at = Date.parse(info?.deleted_at ?? '');
  let when = '';
  if (Number.isFinite(at)) {
    const s = Math.max(0, Math.round((nowMs - at) / 1000));
    when = s < 60 ? ' just now' : s < 3600 ? ` ${Math.floor(s / 60)} min ago` : ` at ${new Date(at).toLocaleString()}`;
  }
  return `This run was deleted${when}${what}.`;
}

/**
 * The live connection's indicator: what it says and its tooltip. It tells whether updates
 * can reach the page, not how the run is doing (that is the status badge).
 * @param {string} state 'live' | 'reconnecting' | 'stopped'
 */
export function connectionText(state) {
  if (state === 'live') return { text: '● connected', title: 'Live updates: connected to the server' };
  if (state === 'reconnecting') return { text: 'reconnecting…', title: 'Live updates: the connection dropped, reconnecting' };
  return { text: '', title: '' };
}

/**
 * When the aggregation backlog is real: more than `steps` steps waiting for `ms` or longer, or
 * `large` steps at once (a range change re-aggregating the run). A healthy live run's newest
 * step or two, aggregated within a pass, is none.
 */
export const BACKLOG = { steps: 5, ms: 3000, large: 100 };

/** Whether to show a backlog of `pending` steps, over BACKLOG.steps since `since` (or null). */
export function backlogShown(pending, since, now) {
  if (!(pending > BACKLOG.steps)) return false;
  return pending >= BACKLOG.large || (since !== null && since !== undefined && now - since >= BACKLOG.ms);
}

/** `pending` steps waiting for (re-)aggregation, in words: "1,204 steps to aggregate". */
export function backlogSteps(pending) {
  if (!(pending > 0)) return '';
  return `${pending.toLocaleString('en-US')} step${pending === 1 ? '' : 's'} to aggregate`;
}

/** The run bar's chip text for a run with `pending` steps waiting for (re-)aggregation. */
export function backlogText(pending) {
  return pending > 0 ? `catching up · ${backlogSteps(pending)}` : '';
}

// @ts-check
// The read API of the Timeline and Performance pages (docs/protocol.md; PROTOCOL §4):
// events of a window, its Chrome trace, time buckets, gauges.

import { HttpError } from '../core/api.js';

/**
 * The API's columnar events of a window, the run's lanes, and whether `limit` cut it.
 * @typedef {{name: string[], start: number[], end: (number | null)[], source: (string | null)[],
 *   step: (number | null)[], rank: (number | null)[], server: (string | number | null)[],
 *   slot: (number | null)[], status: (string | null)[], tokens: (number | null)[],
 *   sample_id: (string | null)[], group_id: (string | number | null)[]}} EventColumns
 * @typedef {{events: EventColumns, lanes: import('./lanes.js').Lane[], truncated: boolean,
 *   extent?: [number, number] | null}} EventsBody
 */

/** A window's bounds for a query: unix seconds, microseconds at most. */
function bound(t) {
  return String(Number(t.toFixed(6)));
}

function windowParams(win) {
  const q = new URLSearchParams();
  if (win) {
    q.set('start', bound(win.start));
    q.set('end', bound(win.end));
  }
  return q;
}

async function getJSON(url, signal = undefined) {
  const res = await fetch(url, { credentials: 'same-origin', signal });
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) throw new HttpError(res.status, body);
  return body;
}

const base = (runId) => `/api/runs/${encodeURIComponent(runId)}`;

/**
 * Every event overlapping the window [start, end) (null: the whole run), at most `limit`.
 * @param {number} runId
 * @param {import('./window.js').TimeWindow | null} win
 * @param {{limit?: number | null, signal?: AbortSignal}} [options]
 * @returns {Promise<EventsBody>}
 */
export function getEvents(runId, win, { limit = null, signal = undefined } = {}) {
  const q = windowParams(win);
  if (limit !== null) q.set('limit', String(limit));
  return getJSON(`${base(runId)}/events?${q}`, signal);
}

/** The window's events in the Chrome Trace Event format (Perfetto, chrome://tracing). */
export function traceUrl(runId, win) {
  const q = windowParams(win).toString();
  return `${base(runId)}/events.trace.json${q ? `?${q}` : ''}`;
}

/**
 * Time buckets of `bucket` seconds: {bucket, time, partial, series: {name: values}}.
 * @param {number} runId
 * @param {number} bucket
 * @param {import('./window.js').TimeWindow | null} [win]
 */
export function getPerformance(runId, bucket, win = null, signal = undefined) {
  const q = windowParams(win);
  q.set('bucket', String(bucket));
  return getJSON(`${base(runId)}/performance?${q}`, signal);
}

/**
 * Every gauge of the run (or those `names`), one series per host and device:
 * {gauges: {name: [{host, device, time, value, downsampled}]}}.
 * @param {number} runId
 * @param {{names?: string[] | null, win?: import('./window.js').TimeWindow | null,
 *   maxPoints?: number | null, signal?: AbortSignal}} [options]
 */
export function getGauges(runId, { names = null, win = null, maxPoints = null, signal = undefined } = {}) {
  const q = windowParams(win);
  if (names?.length) q.set('names', names.join(','));
  if (maxPoints !== null) q.set('max_points', String(maxPoints));
  const s = q.toString();
  return getJSON(`${base(runId)}/gauges${s ? `?${s}` : ''}`, signal);
}

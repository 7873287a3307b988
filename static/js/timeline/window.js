// @ts-check
// The Timeline's window as the URL holds it (`?start=T0&end=T1`, unix seconds), the default
// window from the run's event extent, and Plotly's relayout events read back into a window.
// The x axis is seconds since an origin (the run's first event): plain numbers, exact at any
// zoom, no time zone. Pure: tested with `node --test tests/js/`.

/** The default window's length when the URL names none: the run's newest this many seconds. */
export const DEFAULT_SPAN_S = 600;
/** The shortest window a zoom may ask for (a microsecond). */
export const MIN_SPAN_S = 1e-6;

/**
 * @typedef {{start: number, end: number}} TimeWindow  unix seconds, end > start
 * @typedef {[number, number] | null} Extent  the run's first and last event times
 */

/**
 * The window a query string names, or null (missing, not numbers, end not after start).
 * @param {string} search  `location.search`
 * @returns {TimeWindow | null}
 */
export function parseWindow(search) {
  const q = new URLSearchParams(search);
  const raw = [q.get('start'), q.get('end')];
  if (raw.some((v) => v === null || v.trim() === '')) return null;
  const [start, end] = raw.map(Number);
  if (!Number.isFinite(start) || !Number.isFinite(end) || end - start < MIN_SPAN_S) return null;
  return { start, end };
}

/** A time for the URL: microseconds at most, no trailing zeros. */
export function formatTime(t) {
  return String(Number(t.toFixed(6)));
}

/**
 * `search` with the window written into it (`start`, `end`), or both removed for null (the
 * page follows the run's newest events). Other parameters are kept.
 * @param {string} search
 * @param {TimeWindow | null} win
 */
export function windowSearch(search, win) {
  const q = new URLSearchParams(search);
  if (win) {
    q.set('start', formatTime(win.start));
    q.set('end', formatTime(win.end));
  } else {
    q.delete('start');
    q.delete('end');
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * An extent as the API and the live socket send it ([first, last], or nulls while the run has
 * no events), or null when it holds no events.
 * @param {any} value
 * @returns {Extent}
 */
export function validExtent(value) {
  if (!Array.isArray(value) || value.length !== 2) return null;
  const [first, last] = value;
  return Number.isFinite(first) && Number.isFinite(last) && last >= first ? [first, last] : null;
}

/**
 * The window to show when the URL names none: the whole run when it is shorter than `span`,
 * else its newest `span` seconds; a little room either side so the first and last events are
 * not on the frame (the API's window is [start, end): an instant at `end` would be left out).
 * Null when the run has no events.
 * @param {Extent} extent
 * @returns {TimeWindow | null}
 */
export function defaultWindow(extent, span = DEFAULT_SPAN_S) {
  const known = validExtent(extent);
  if (!known) return null;
  const [first, last] = known;
  const start = Math.max(first, last - span);
  const pad = Math.max(1e-3, (last - start) * 0.02);
  return { start: start - pad, end: last + pad };
}

/**
 * What a Plotly relayout event did to the x axis: `{window}` for a new range (zoom, pan; the
 * axis is seconds since `origin`), `{reset: true}` for autorange (double-click, "Reset axes"),
 * null when the x axis did not move (a legend click, a resize, a y change).
 * @param {Record<string, any>} ev
 * @param {number} origin
 * @returns {{window: TimeWindow} | {reset: true} | null}
 */
export function relayoutWindow(ev, origin) {
  if (!ev) return null;
  let range = null;
  if (Array.isArray(ev['xaxis.range'])) range = ev['xaxis.range'];
  else if ('xaxis.range[0]' in ev && 'xaxis.range[1]' in ev) range = [ev['xaxis.range[0]'], ev['xaxis.range[1]']];
  if (range) {
    const [a, b] = range.map(Number);
    if (!Number.isFinite(a) || !Number.isFinite(b)) return null;
    const lo = Math.min(a, b);
    const hi = Math.max(a, b, lo + MIN_SPAN_S);
    return { window: { start: origin + lo, end: origin + hi } };
  }
  if (ev['xaxis.autorange'] === true) return { reset: true };
  return null;
}

/** Whether two windows are the same to the microsecond (a redraw that moved nothing). */
export function sameWindow(a, b) {
  if (!a || !b) return a === b;
  return formatTime(a.start) === formatTime(b.start) && formatTime(a.end) === formatTime(b.end);
}

/** A window's length in words: 1.5 ms, 12.3 s, 4 min 10 s, 2 h 5 min. */
export function spanText(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return '';
  if (seconds < 1e-3) return `${Number((seconds * 1e6).toPrecision(3))} µs`;
  if (seconds < 1) return `${Number((seconds * 1e3).toPrecision(3))} ms`;
  if (seconds < 60) return `${Number(seconds.toPrecision(3))} s`;
  if (seconds < 3600) {
    const whole = Math.round(seconds);
    const [m, s] = [Math.floor(whole / 60), whole % 60];
    return s ? `${m} min ${s} s` : `${m} min`;
  }
  const minutes = Math.round(seconds / 60);
  const [h, m] = [Math.floor(minutes / 60), minutes % 60];
  return m ? `${h} h ${m} min` : `${h} h`;
}

// @ts-check
// Which span is under the pointer. WebGL traces only report their vertices (a click in the
// middle of a long span is nowhere near one), so the page finds the span itself: the row from
// y, then the spans of that row covering x, the innermost (shortest) first, an instant within
// a few pixels before any span. Pure: tested with `node --test tests/js/`.

/**
 * Per row, its events sorted by start, and the longest duration of the row (how far back a
 * span covering a time can have started).
 */
export class RowIndex {
  /**
   * @param {ArrayLike<number>} start
   * @param {ArrayLike<number | null>} end
   * @param {Int32Array} row
   * @param {number} rows
   */
  constructor(start, end, row, rows) {
    this.start = start;
    this.end = end;
    /** @type {number[][]} */
    this.byRow = Array.from({ length: rows }, () => []);
    for (let i = 0; i < row.length; i++) this.byRow[row[i]].push(i);
    this.longest = new Float64Array(rows);
    this.byRow.forEach((ids, r) => {
      ids.sort((a, b) => start[a] - start[b]);
      let longest = 0;
      for (const i of ids) longest = Math.max(longest, (end[i] ?? start[i]) - start[i]);
      this.longest[r] = longest;
    });
  }

  /**
   * The event at time `t` (same clock as `start`) in row `r`, or -1. `tolerance` (seconds:
   * a few pixels) widens instants and short spans so they can be hit at all; `accept(i)`,
   * when given, leaves out the events it refuses (those of a category hidden in the legend).
   * @param {number} r
   * @param {number} t
   * @param {number} [tolerance]
   * @param {((i: number) => boolean) | null} [accept]
   */
  at(r, t, tolerance = 0, accept = null) {
    const ids = this.byRow[r];
    if (!ids) return -1;
    const { start, end } = this;
    // The last event starting at or before t + tolerance.
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (start[ids[mid]] <= t + tolerance) lo = mid + 1;
      else hi = mid;
    }
    let best = -1;
    let bestLength = Infinity;
    let bestInstant = false;
    const earliest = t - tolerance - this.longest[r];
    for (let k = lo - 1; k >= 0 && start[ids[k]] >= earliest; k--) {
      const i = ids[k];
      if (accept && !accept(i)) continue;
      const instant = end[i] === null || end[i] === undefined;
      const stop = instant ? start[i] : end[i];
      if (stop < t - tolerance) continue;
      const inside = start[i] <= t && t <= stop;
      const length = instant ? 0 : stop - start[i];
      if (!instant && !inside && length > 2 * tolerance) continue; // near, but not on it
      if (instant && !bestInstant) {
        best = i;
        bestLength = Math.abs(start[i] - t);
        bestInstant = true;
      } else if (instant === bestInstant && (instant ? Math.abs(start[i] - t) : length) < bestLength) {
        best = i;
        bestLength = instant ? Math.abs(start[i] - t) : length;
      }
    }
    return best;
  }
}

/** The row under a y value of the axis (rows are at 0, 1, 2, ...), or -1 off the rows. */
export function rowAt(y, rows) {
  const r = Math.round(y);
  return Math.abs(y - r) <= 0.5 && r >= 0 && r < rows ? r : -1;
}

// @ts-check
// Spans into WebGL traces: each span a thick horizontal segment on its row, segments of one
// colour in one Plotly `scattergl` trace separated by NaN (so 100,000 spans are a handful of
// traces); generations coloured by status (normal, discarded, canceled, eval), other spans by
// name; instants (no end) as markers. A span inside another of its row (train_step/forward
// inside train_step) is drawn thinner on top of it, Perfetto-like, so both stay visible.
// Pure: tested with `node --test tests/js/`.

/** Generation colours by status (null counts as normal). */
export const STATUS_COLORS = {
  normal: '#2e9d5b', discarded: '#e08a1e', canceled: '#9aa1ab', eval: '#8b5cf6',
};
export const STATUS_ORDER = ['normal', 'discarded', 'canceled', 'eval'];
/** Other spans by name: a fixed palette, the colour picked by the name (stable everywhere). */
export const NAME_PALETTE = [ // none near the generation colours (green, orange, grey, purple)
  '#3b6fd8', '#d64545', '#0f9fb3', '#be185d', '#a16207', '#1e3a8a', '#db2777', '#0e7490',
  '#854d0e', '#0284c7', '#b91c1c', '#475569',
];
/** Deepest nesting drawn apart; deeper spans share this depth's width. */
export const MAX_DEPTH = 3;

/** The colour category of a span: `generation · <status>` for generations, else its name. */
export function categoryOf(name, status) {
  if (name !== 'generation') return String(name);
  const s = status === null || status === undefined || status === '' ? 'normal' : String(status);
  return `generation · ${s}`;
}

/** FNV-1a of a string: a name's palette slot, the same on every page and every load. */
function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function colorOf(category) {
  if (category.startsWith('generation · ')) {
    const status = category.slice('generation · '.length);
    if (status in STATUS_COLORS) return STATUS_COLORS[status];
  }
  return NAME_PALETTE[hash(category) % NAME_PALETTE.length];
}

/**
 * The events of each row, in their order (a stable counting sort): the API sends events in
 * start order, so each row's list is then already sorted by start.
 * @param {Int32Array} row
 * @param {number} rows
 * @returns {Int32Array[]}
 */
export function byRow(row, rows) {
  const counts = new Int32Array(rows);
  for (let i = 0; i < row.length; i++) counts[row[i]]++;
  const out = Array.from(counts, (c) => new Int32Array(c));
  const fill = new Int32Array(rows);
  for (let i = 0; i < row.length; i++) out[row[i]][fill[row[i]]++] = i;
  return out;
}

/**
 * Each span's nesting depth in its row: how many spans of the row enclose it (start inside,
 * end not after theirs). Instants get 0. Per row, by start, longest first (sorting a row
 * already in start order is linear), with a stack of the open spans.
 * @param {ArrayLike<number>} start
 * @param {ArrayLike<number | null>} end
 * @param {Int32Array} row
 * @param {number} rows
 * @returns {Uint8Array}
 */
export function depths(start, end, row, rows) {
  const depth = new Uint8Array(start.length);
  const stack = [];
  for (const ids of byRow(row, rows)) {
    const spans = [];
    let sorted = true;
    for (const i of ids) {
      if (end[i] === null || end[i] === undefined) continue;
      const last = spans.length ? spans[spans.length - 1] : -1;
      if (last >= 0 && (start[i] < start[last] || (start[i] === start[last] && end[i] > end[last]))) sorted = false;
      spans.push(i);
    }
    if (!sorted) spans.sort((a, b) => start[a] - start[b] || end[b] - end[a]);
    stack.length = 0;
    for (const i of spans) {
      while (stack.length && end[stack[stack.length - 1]] <= start[i]) stack.pop();
      // Only a span that holds this one entirely counts; a partial overlap is not nesting.
      while (stack.length && end[stack[stack.length - 1]] < end[i]) stack.pop();
      depth[i] = Math.min(stack.length, MAX_DEPTH);
      stack.push(i);
    }
  }
  return depth;
}

/**
 * One drawn trace's data: `x`/`y` of its points (3 per segment: start, end, NaN; 1 per
 * instant), `index` the event behind each segment (or instant).
 * @typedef {{category: string, color: string, depth: number, instant: boolean,
 *   x: Float64Array, y: Float64Array, index: Int32Array}} Layer
 */

/**
 * The traces of a window's events. `origin` (unix s) is the x axis's zero; `minSeconds` the
 * shortest drawn length (one pixel of the window), so a span of a microsecond stays visible
 * when the window is an hour. Layers come in draw order: spans by depth (outer first), then
 * instants; inside, generations' statuses in their order, then the names in text order.
 * @param {{name: string[], start: number[], end: (number | null)[], status: (string | null)[]}} events
 * @param {Int32Array} row
 * @param {number} origin
 * @param {number} [minSeconds]
 * @returns {Layer[]}
 */
export function layers(events, row, origin, minSeconds = 0) {
  const { name, start, end, status } = events;
  const n = name.length;
  let rows = 0;
  for (let i = 0; i < n; i++) rows = Math.max(rows, row[i] + 1);
  const depth = depths(start, end, row, rows);
  // (name, status) -> category id, and (category id, depth or instant) -> layer: Map lookups
  // of values the events already hold, no string built per event.
  const categories = new Map();
  const categoryList = [];
  const list = [];
  const slots = []; // category id -> [layer of depth 0..MAX_DEPTH, layer of instants]
  const layerOf = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let byStatus = categories.get(name[i]);
    if (!byStatus) categories.set(name[i], (byStatus = new Map()));
    const st = name[i] === 'generation' ? (status[i] || 'normal') : null;
    let c = byStatus.get(st);
    if (c === undefined) {
      c = categoryList.length;
      categoryList.push(categoryOf(name[i], st));
      slots.push(new Array(MAX_DEPTH + 2).fill(-1));
      byStatus.set(st, c);
    }
    const instant = end[i] === null || end[i] === undefined;
    const slot = instant ? MAX_DEPTH + 1 : depth[i];
    let g = slots[c][slot];
    if (g < 0) {
      g = slots[c][slot] = list.length;
      list.push({ category: categoryList[c], depth: instant ? 0 : depth[i], instant, count: 0 });
    }
    list[g].count++;
    layerOf[i] = g;
  }
  const out = list.map((g) => ({
    category: g.category, color: colorOf(g.category), depth: g.depth, instant: g.instant,
    x: new Float64Array(g.instant ? g.count : 3 * g.count),
    y: new Float64Array(g.instant ? g.count : 3 * g.count),
    index: new Int32Array(g.count),
  }));
  const fill = new Int32Array(out.length);
  for (let i = 0; i < n; i++) {
    const l = out[layerOf[i]];
    const k = fill[layerOf[i]]++;
    l.index[k] = i;
    const x0 = start[i] - origin;
    if (l.instant) {
      l.x[k] = x0;
      l.y[k] = row[i];
      continue;
    }
    l.x[3 * k] = x0;
    l.x[3 * k + 1] = Math.max(end[i] - origin, x0 + minSeconds);
    l.x[3 * k + 2] = NaN;
    l.y[3 * k] = row[i];
    l.y[3 * k + 1] = row[i];
    l.y[3 * k + 2] = NaN;
  }
  return out.sort(compareLayers);
}

function rankOfCategory(category) {
  if (!category.startsWith('generation · ')) return STATUS_ORDER.length + 1;
  const i = STATUS_ORDER.indexOf(category.slice('generation · '.length));
  return i < 0 ? STATUS_ORDER.length : i;
}

function compareLayers(a, b) {
  return Number(a.instant) - Number(b.instant) || a.depth - b.depth
    || rankOfCategory(a.category) - rankOfCategory(b.category)
    || (a.category < b.category ? -1 : a.category > b.category ? 1 : 0);
}

/**
 * The line width (px) of a depth's segments for rows `rowPx` high: the outermost fills most
 * of its row, each level inside is thinner.
 */
export function lineWidth(depth, rowPx) {
  return Math.max(2, Math.round(rowPx * 0.72 * (1 - 0.25 * depth)));
}

/** How many spans and instants the layers draw (what a test or benchmark counts). */
export function drawnCounts(list) {
  let spans = 0;
  let instants = 0;
  for (const l of list) {
    if (l.instant) instants += l.index.length;
    else spans += l.index.length;
  }
  return { spans, instants };
}

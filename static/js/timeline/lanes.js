// @ts-check
// The Timeline's rows: one per lane. Inference servers and their slots on top ("server 0 ·
// slot 3"), trainer ranks below them ("trainer rank 1"), then one row per other source
// (orchestrator, reward, ...), as Telescope's own timeline lays them out. Pure: tested with
// `node --test tests/js/`.

/**
 * A lane as the read API lists it, and the columns an event carries to pick its lane.
 * @typedef {{source: string | null, rank: number | null, server: string | number | null,
 *   slot: number | null}} Lane
 * @typedef {{key: string, label: string, group: number, source: string,
 *   server: string | number | null, slot: number | null, rank: number | null}} Row
 */

const INFERENCE = 0;
const TRAINER = 1;
const OTHER = 2;

/**
 * The row an event (or an API lane) belongs to. Trainer events by rank; events of any other
 * source that name a server by (server, slot), labelled with the source unless it is
 * `inference`; the rest one row per source.
 * @param {string | null} source
 * @param {number | null} rank
 * @param {string | number | null} server
 * @param {number | null} slot
 * @returns {Row}
 */
export function laneOf(source, rank, server, slot) {
  const src = source ?? 'trainer';
  if (src === 'trainer') {
    const r = rank ?? null;
    return { key: `t\u241f${r ?? ''}`, label: r === null ? 'trainer' : `trainer rank ${r}`,
      group: TRAINER, source: src, server: null, slot: null, rank: r };
  }
  if (server !== null && server !== undefined) {
    const prefix = src === 'inference' ? '' : `${src} `;
    const s = slot ?? null;
    const label = s === null ? `${prefix}server ${server}` : `${prefix}server ${server} · slot ${s}`;
    return { key: `s\u241f${src}\u241f${server}\u241f${s ?? ''}`, label, group: INFERENCE,
      source: src, server, slot: s, rank: null };
  }
  return { key: `o\u241f${src}`, label: src, group: OTHER, source: src, server: null, slot: null, rank: null };
}

/** Numbers in numeric order, before names in text order (servers may be ints or names). */
function compareIds(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  const na = typeof a === 'number' || /^-?\d+(\.\d+)?$/.test(String(a));
  const nb = typeof b === 'number' || /^-?\d+(\.\d+)?$/.test(String(b));
  if (na && nb) return Number(a) - Number(b);
  if (na !== nb) return na ? -1 : 1;
  return String(a) < String(b) ? -1 : 1;
}

/** The rows' order on the page: inference, trainer, others; inside, by server, slot, rank. */
export function compareRows(a, b) {
  return a.group - b.group || (a.group === INFERENCE ? compareIds(a.source, b.source) : 0)
    || compareIds(a.server, b.server) || compareIds(a.slot, b.slot) || compareIds(a.rank, b.rank)
    || compareIds(a.source, b.source);
}

/**
 * The rows of a window and each event's row. `lanes` (the API's, for the whole run) come
 * first so the rows stay put while the window moves; an event of a lane it does not list
 * adds its row. `events` is the API's columnar `events` object.
 * @param {{source: any[], rank: any[], server: any[], slot: any[]}} events
 * @param {Lane[]} [lanes]
 * @returns {{rows: Row[], row: Int32Array}}
 */
export function assignRows(events, lanes = []) {
  const byKey = new Map();
  for (const l of lanes || []) {
    const r = laneOf(l.source, l.rank, l.server, l.slot);
    if (!byKey.has(r.key)) byKey.set(r.key, r);
  }
  // (source, rank or server, slot) -> lane, through Maps of the values the events hold: most
  // events share a few lanes, so laneOf (and its strings) runs once per lane, not per event.
  const tree = new Map();
  const n = events.source.length;
  const found = new Array(n);
  for (let i = 0; i < n; i++) {
    const src = events.source[i] ?? 'trainer';
    let bySource = tree.get(src);
    if (!bySource) tree.set(src, (bySource = new Map()));
    const trainer = src === 'trainer';
    const server = trainer ? null : events.server[i] ?? null;
    const a = trainer ? events.rank[i] ?? null : server;
    let byA = bySource.get(a);
    if (!byA) bySource.set(a, (byA = new Map()));
    const b = !trainer && server !== null ? events.slot[i] ?? null : null;
    let lane = byA.get(b);
    if (!lane) {
      lane = laneOf(src, events.rank[i] ?? null, server, events.slot[i] ?? null);
      lane = byKey.get(lane.key) ?? lane;
      byKey.set(lane.key, lane);
      byA.set(b, lane);
    }
    found[i] = lane;
  }
  const rows = [...byKey.values()].sort(compareRows);
  const index = new Map(rows.map((r, i) => [r, i]));
  const row = new Int32Array(n);
  for (let i = 0; i < n; i++) row[i] = index.get(found[i]);
  return { rows, row };
}

// @ts-check
// The Custom view's layout as data, format version 2: a dashboard holds sections (named,
// collapsible); a section holds plots and groups (named); a group holds plots; a plot draws
// one or more series, each on the left or right y axis, or `auto` (its own side when its scale
// differs). Pure functions, no DOM; tested with `node --test`. Edits: custom/ops.js.
//
//   {version: 2, sections: [{id, title, collapsed, items: [plot | group]}]}
//   plot  {type: 'plot', id, title, wide, settings, series: [{id: series id, axis}]}
//   group {type: 'group', id, title, plots: [plot]}
//
// Version 1 (saved before version 2): {charts: [{id, wide, settings}]}, one chart per series,
// migrates to one section "Charts" of one-series plots. The server (telescope_ui/layouts.py)
// checks the same shape and limits field by field and migrates what it stored as version 1.

export const VERSION = 2;
export const LIMITS = Object.freeze({ sections: 50, groups: 200, plots: 300, series: 12, title: 200 });
export const AXES = ['auto', 'left', 'right'];
export const MIGRATED_SECTION = 'Charts';
const BOOL_SETTINGS = ['ignoreOutliers', 'ignoreFirst', 'logY', 'band'];
const NUMBER_SETTINGS = ['yMin', 'yMax'];
export const SETTINGS = [...BOOL_SETTINGS, ...NUMBER_SETTINGS];
const NODE_ID = /^[A-Za-z0-9_-]{1,32}$/;
const MAX_SERIES_ID = 2000;

const isObject = (v) => Boolean(v) && typeof v === 'object' && !Array.isArray(v);

/** Any layout (a version 1 one included) in the version 2 shape, not yet checked. */
export function migrateLayout(raw) {
  if (!isObject(raw)) return { version: VERSION, sections: [] };
  if (raw.version === undefined && Array.isArray(raw.charts)) {
    const items = raw.charts.filter(isObject).map((c, i) => ({
      type: 'plot', id: `p${i + 1}`, title: '', wide: c.wide === true, settings: c.settings,
      series: [{ id: c.id, axis: 'auto' }],
    }));
    return { version: VERSION, sections: items.length ? [{ id: 's1', title: MIGRATED_SECTION, collapsed: false, items }] : [] };
  }
  return raw;
}

/** The chart settings a layout keeps, each checked; anything else is dropped. */
export function cleanSettings(s) {
  const out = {};
  if (!isObject(s)) return out;
  for (const k of BOOL_SETTINGS) if (typeof s[k] === 'boolean') out[k] = s[k];
  for (const k of NUMBER_SETTINGS) if (s[k] === null || Number.isFinite(s[k])) out[k] = s[k];
  return out;
}

export function cleanTitle(t) {
  // eslint-disable-next-line no-control-regex
  return typeof t === 'string' ? t.replace(/[\u0000-\u001f\u007f]/g, ' ').trim().slice(0, LIMITS.title) : '';
}

/**
 * A layout from the server, a file or anywhere, migrated and checked: what does not fit the
 * format is dropped (never fatal), repeated or bad node ids are replaced, limits are kept.
 */
export function normalizeLayout(raw) {
  const doc = migrateLayout(raw);
  const list = (v) => (Array.isArray(v) ? v : []);
  const valid = (id) => typeof id === 'string' && NODE_ID.test(id);
  const reserved = new Set(); // every good id, so that a fresh one never takes a later node's
  for (const s of list(doc.sections)) {
    for (const n of [s, ...list(s?.items), ...list(s?.items).flatMap((it) => list(it?.plots))]) {
      if (valid(n?.id)) reserved.add(n.id);
    }
  }
  const ids = new Set();
  const fix = (id, prefix) => {
    let out = valid(id) && !ids.has(id) ? id : null;
    for (let n = 1; !out; n++) if (!ids.has(`${prefix}${n}`) && !reserved.has(`${prefix}${n}`)) out = `${prefix}${n}`;
    ids.add(out);
    return out;
  };
  const count = { groups: 0, plots: 0 };
  const plot = (p) => {
    if (!isObject(p) || p.type !== 'plot' || count.plots >= LIMITS.plots) return null;
    const seen = new Set();
    const series = [];
    for (const s of list(p.series)) {
      if (!isObject(s) || typeof s.id !== 'string' || !s.id || s.id.length > MAX_SERIES_ID || seen.has(s.id)) continue;
      seen.add(s.id);
      series.push({ id: s.id, axis: AXES.includes(s.axis) ? s.axis : 'auto' });
      if (series.length === LIMITS.series) break;
    }
    if (!series.length) return null;
    count.plots++;
    return { type: 'plot', id: fix(p.id, 'p'), title: cleanTitle(p.title), wide: p.wide === true,
      settings: cleanSettings(p.settings), series };
  };
  const group = (g) => {
    if (count.groups >= LIMITS.groups) return null;
    count.groups++;
    return { type: 'group', id: fix(g.id, 'g'), title: cleanTitle(g.title),
      plots: list(g.plots).map(plot).filter(Boolean) };
  };
  const sections = [];
  for (const s of list(doc.sections)) {
    if (!isObject(s) || sections.length === LIMITS.sections) continue;
    const id = fix(s.id, 's');
    const items = list(s.items).map((it) => (isObject(it) && it.type === 'group' ? group(it) : plot(it))).filter(Boolean);
    sections.push({ id, title: cleanTitle(s.title), collapsed: s.collapsed === true, items });
  }
  return { version: VERSION, sections };
}

/** Every plot in page order, with where it sits: [{plot, section, group|null}]. */
export function plotsOf(layout) {
  const out = [];
  for (const section of layout.sections) {
    for (const item of section.items) {
      if (item.type === 'group') for (const plot of item.plots) out.push({ plot, section, group: item });
      else out.push({ plot: item, section, group: null });
    }
  }
  return out;
}

/** Every node id in use (sections, groups, plots). */
export function nodeIds(layout) {
  const ids = new Set();
  for (const s of layout.sections) {
    ids.add(s.id);
    for (const it of s.items) {
      ids.add(it.id);
      if (it.type === 'group') for (const p of it.plots) ids.add(p.id);
    }
  }
  return ids;
}

/** A fresh node id: `prefix` and the first number no node of the layout (or `taken`) has. */
export function nextId(layout, prefix, taken = new Set()) {
  const used = nodeIds(layout);
  for (let n = 1; ; n++) {
    const id = `${prefix}${n}`;
    if (!used.has(id) && !taken.has(id)) return id;
  }
}

/** How many sections, groups and plots a layout holds. */
export function countNodes(layout) {
  let groups = 0;
  for (const s of layout.sections) for (const it of s.items) if (it.type === 'group') groups++;
  return { sections: layout.sections.length, groups, plots: plotsOf(layout).length };
}

/**
 * A readable name for a series id (`kind|key|stat|env`, each part percent-encoded): the key of a
 * step key or a derived timing series (kind `timeline`) alone, of a derived family with its stat.
 */
export function labelOfId(id) {
  const [kind, key, stat, env] = parseId(id);
  const keyed = kind === 'step' || kind === 'timeline';
  return [key || id, keyed ? '' : stat, env ? `(${env})` : ''].filter(Boolean).join(' ');
}

/** The parts of a series id: [kind, key, stat, env] ('' for an empty part). */
export function parseId(id) {
  return String(id).split('|').map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
}

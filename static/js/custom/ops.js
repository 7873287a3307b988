// @ts-check
// Edits of a Custom view layout (custom/layout.js's format): insert, move within and across
// containers, remove, the keyboard's one-step moves, titles, widths, settings and series. Pure:
// each returns a new layout, or the same object when nothing changes (or the edit is not
// allowed: a group in a group, a limit reached). Containers are named by the id of their
// section or group; ROOT is the list of sections. Tested with `node --test`.

import { AXES, cleanTitle, countNodes, LIMITS, nextId, SETTINGS } from './layout.js';

export const ROOT = ':root';

/** Where node `id` is: {node, container (id), index, section (the section holding it)}. */
export function findNode(layout, id) {
  for (const [si, section] of layout.sections.entries()) {
    if (section.id === id) return { node: section, container: ROOT, index: si, section };
    for (const [i, item] of section.items.entries()) {
      if (item.id === id) return { node: item, container: section.id, index: i, section };
      if (item.type !== 'group') continue;
      const j = item.plots.findIndex((p) => p.id === id);
      if (j >= 0) return { node: item.plots[j], container: item.id, index: j, section };
    }
  }
  return null;
}

/** The list of container `cid`: the sections, a section's items or a group's plots. */
export function listOf(layout, cid) {
  if (cid === ROOT) return layout.sections;
  const found = findNode(layout, cid);
  if (!found) return null;
  return found.node.type === 'group' ? found.node.plots : found.node.items;
}

/** The layout with container `cid`'s list replaced by `fn(list)`. */
function withList(layout, cid, fn) {
  if (cid === ROOT) return { ...layout, sections: fn(layout.sections) };
  return { ...layout, sections: layout.sections.map((s) => {
    if (s.id === cid) return { ...s, items: fn(s.items) };
    if (!s.items.some((it) => it.id === cid)) return s;
    return { ...s, items: s.items.map((it) => (it.id === cid ? { ...it, plots: fn(it.plots) } : it)) };
  }) };
}

const kindOf = (node) => node.type ?? 'section';

/** Whether `node` may go into container `cid`: sections at the root, groups in sections. */
function fits(layout, node, cid) {
  const list = listOf(layout, cid);
  if (!list) return false;
  if (cid === ROOT) return kindOf(node) === 'section';
  const target = findNode(layout, cid).node;
  if (kindOf(node) === 'section') return false;
  return target.type === 'group' ? node.type === 'plot' : true;
}

function within(layout, node) {
  const add = countNodes({ sections: kindOf(node) === 'section' ? [node] : [{ items: [node] }] });
  const have = countNodes(layout);
  return (kindOf(node) !== 'section' || have.sections + 1 <= LIMITS.sections)
    && have.groups + add.groups <= LIMITS.groups && have.plots + add.plots <= LIMITS.plots;
}

/** `node` (new) put at `index` of container `cid` (clamped); the same layout if it may not. */
export function insertNode(layout, cid, index, node) {
  if (!fits(layout, node, cid) || !within(layout, node)) return layout;
  return withList(layout, cid, (list) => {
    const out = list.slice();
    out.splice(Math.max(0, Math.min(index, out.length)), 0, node);
    return out;
  });
}

export function removeNode(layout, id) {
  const at = findNode(layout, id);
  if (!at) return layout;
  return withList(layout, at.container, (list) => list.filter((n) => n.id !== id));
}

/**
 * Move node `id` so that it ends at `index` of container `cid` (within its own container or
 * into another): what a drop reports (SortableJS's new index) and what the keyboard asks.
 */
export function moveNode(layout, id, cid, index) {
  const at = findNode(layout, id);
  if (!at || !fits(layout, at.node, cid) || cid === id) return layout;
  if (at.container === cid && at.index === index) return layout;
  const out = removeNode(layout, id);
  return withList(out, cid, (list) => {
    const copy = list.slice();
    copy.splice(Math.max(0, Math.min(index, copy.length)), 0, at.node);
    return copy;
  });
}

/**
 * One keyboard step (`by` -1 earlier, +1 later) through the page order: a plot steps over its
 * neighbour, into a group it meets, out of its group at either end, and into the next or
 * previous section at its section's ends; a group steps within its section and on to the
 * neighbouring section; a section steps among the sections.
 */
export function shiftNode(layout, id, by) {
  const at = findNode(layout, id);
  if (!at) return layout;
  const { node, container, index } = at;
  const list = listOf(layout, container);
  const secIndex = layout.sections.indexOf(at.section);
  if (kindOf(node) === 'section') {
    return index + by < 0 || index + by >= list.length ? layout : moveNode(layout, id, ROOT, index + by);
  }
  const neighbour = layout.sections[secIndex + by];
  const crossSection = () => (neighbour ? moveNode(layout, id, neighbour.id, by < 0 ? neighbour.items.length : 0) : layout);
  if (node.type === 'plot' && container !== at.section.id) { // in a group
    const g = at.section.items.findIndex((it) => it.id === container);
    if (index + by < 0) return moveNode(layout, id, at.section.id, g);
    if (index + by >= list.length) return moveNode(layout, id, at.section.id, g + 1);
    return moveNode(layout, id, container, index + by);
  }
  const next = list[index + by];
  if (!next) return crossSection();
  if (node.type === 'plot' && next.type === 'group') return moveNode(layout, id, next.id, by < 0 ? next.plots.length : 0);
  return moveNode(layout, id, container, index + by);
}

/** Node `id` with `patch` merged in (title cleaned); the same layout when nothing changes. */
export function updateNode(layout, id, patch) {
  const at = findNode(layout, id);
  if (!at) return layout;
  const next = { ...at.node, ...patch };
  if ('title' in patch) next.title = cleanTitle(patch.title);
  if (Object.keys(next).every((k) => next[k] === at.node[k])) return layout;
  return withList(layout, at.container, (list) => list.map((n) => (n.id === id ? next : n)));
}

/** Store only the plot settings that differ from its defaults. */
export function setPlotSettings(layout, id, settings, defaults) {
  const diff = {};
  for (const k of SETTINGS) if (k in settings && settings[k] !== defaults[k]) diff[k] = settings[k];
  const old = findNode(layout, id)?.node.settings ?? {};
  const same = Object.keys(diff).length === Object.keys(old).length && Object.keys(diff).every((k) => diff[k] === old[k]);
  return same ? layout : updateNode(layout, id, { settings: diff });
}

/** Series `sid` added to plot `id` (once per plot, up to the limit). */
export function addSeries(layout, id, sid, axis = 'auto') {
  const plot = findNode(layout, id)?.node;
  if (!plot || plot.type !== 'plot' || plot.series.some((s) => s.id === sid) || plot.series.length >= LIMITS.series) return layout;
  return updateNode(layout, id, { series: [...plot.series, { id: sid, axis: AXES.includes(axis) ? axis : 'auto' }] });
}

/** Series `sid` taken off plot `id`; a plot keeps its last series (remove the plot instead). */
export function removeSeries(layout, id, sid) {
  const plot = findNode(layout, id)?.node;
  if (!plot || plot.series.length < 2 || !plot.series.some((s) => s.id === sid)) return layout;
  return updateNode(layout, id, { series: plot.series.filter((s) => s.id !== sid) });
}

export function setAxis(layout, id, sid, axis) {
  const plot = findNode(layout, id)?.node;
  if (!plot || !AXES.includes(axis)) return layout;
  return updateNode(layout, id, { series: plot.series.map((s) => (s.id === sid ? { ...s, axis } : s)) });
}

// ------------------------------------------------------------ new nodes (fresh ids)

export function newPlot(layout, sids, { taken = new Set(), settings = {}, title = '' } = {}) {
  return { type: 'plot', id: nextId(layout, 'p', taken), title: cleanTitle(title), wide: false, settings,
    series: sids.slice(0, LIMITS.series).map((id) => ({ id, axis: 'auto' })) };
}

/** A group of one-series plots, one per id (ids unique in the layout). */
export function newGroup(layout, title, sids) {
  const taken = new Set();
  const plots = sids.map((sid) => {
    const p = newPlot(layout, [sid], { taken });
    taken.add(p.id);
    return p;
  });
  return { type: 'group', id: nextId(layout, 'g'), title: cleanTitle(title), plots };
}

export function newSection(layout, title, items = []) {
  return { id: nextId(layout, 's'), title: cleanTitle(title), collapsed: false, items };
}

// ------------------------------------------------------------ drops

export const NEW_SECTION = ':new';

/**
 * What a drop does: `what` is a node of the board ({node: id}), a metric of the list
 * ({metric: series id, settings}) or a group of the list ({ids, title}); it lands at `index` of
 * container `cid`, or in a new last section (NEW_SECTION, titled `what.section`). A metric
 * becomes a one-series plot; a list group becomes a group of such plots in a section, or its
 * plots in a group. The same layout when nothing may change.
 */
export function dropInto(layout, what, cid, index) {
  let out = layout;
  if (cid === NEW_SECTION) {
    const section = newSection(layout, what.section || 'New section');
    out = insertNode(layout, ROOT, layout.sections.length, section);
    if (out === layout) return layout;
    cid = section.id;
    index = 0;
  }
  const base = out;
  if (what.node) {
    out = moveNode(out, what.node, cid, index);
  } else {
    const inGroup = findNode(out, cid)?.node.type === 'group';
    const nodes = what.metric ? [newPlot(out, [what.metric], { settings: what.settings ?? {} })]
      : inGroup ? newGroup(out, '', what.ids ?? []).plots : [newGroup(out, what.title ?? '', what.ids ?? [])];
    out = nodes.reduce((acc, n, i) => insertNode(acc, cid, index + i, n), out);
  }
  return out === base ? layout : out;
}

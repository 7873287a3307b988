// @ts-check
// A run's config as data, pure: its leaves with their paths, a search that prunes the
// tree to what matches, and the side-by-side comparison of several runs' configs.

/** How a leaf reads: strings as they are, everything else as JSON ({} and [] when empty). */
export function formatValue(value) {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}

function isBranch(value) {
  return value !== null && typeof value === 'object' && Object.keys(value).length > 0;
}

/**
 * A branch's children in a stable order: arrays by index, objects by key. The server's
 * database decides the order it returns a config's keys in (PostgreSQL's jsonb sorts them by
 * length), so insertion order is not kept anyway.
 */
function entries(value) {
  const all = Object.entries(value);
  return Array.isArray(value) ? all : all.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Child path of `path` for key `key` of `parent`: `a.b`, `a[0]`. */
export function childPath(path, key, parent) {
  if (Array.isArray(parent)) return `${path}[${key}]`;
  return path ? `${path}.${key}` : String(key);
}

/** Every leaf of a config, depth first in key order (see `entries`): [{path, key, value, text}]. */
export function flattenConfig(config) {
  const out = [];
  const walk = (value, path, key) => {
    if (isBranch(value)) {
      for (const [k, v] of entries(value)) walk(v, childPath(path, k, value), k);
    } else if (path) {
      out.push({ path, key, value, text: formatValue(value) });
    }
  };
  if (config !== null && typeof config === 'object') walk(config, '', '');
  return out;
}

/** A case-insensitive predicate over leaves: the query in the path or the value text. */
export function leafMatcher(query) {
  const q = String(query ?? '').trim().toLowerCase();
  if (!q) return null;
  return (leaf) => leaf.path.toLowerCase().includes(q) || leaf.text.toLowerCase().includes(q);
}

/**
 * The config pruned to the leaves that match `query` (and their parents), with how many match;
 * the whole config for an empty query. The tree keeps its shape: {key, path, value} leaves and
 * {key, path, children} branches.
 */
export function filterConfig(config, query) {
  const match = leafMatcher(query);
  let count = 0;
  const walk = (value, path, key) => {
    if (isBranch(value)) {
      const children = entries(value)
        .map(([k, v]) => walk(v, childPath(path, k, value), k)).filter(Boolean);
      return children.length || !match ? { key, path, children, array: Array.isArray(value) } : null;
    }
    const leaf = { key, path, value, text: formatValue(value) };
    if (match && !match(leaf)) return null;
    count += 1;
    return leaf;
  };
  const root = config !== null && typeof config === 'object' ? walk(config, '', '') : null;
  return { tree: root?.children ?? [], count };
}

/**
 * Several configs side by side: one row per leaf path in any of them (first seen first), its
 * text in each (undefined where a config lacks it) and whether they differ.
 */
export function diffConfigs(configs) {
  const rows = new Map();
  configs.forEach((config, i) => {
    for (const leaf of flattenConfig(config)) {
      if (!rows.has(leaf.path)) rows.set(leaf.path, { path: leaf.path, values: new Array(configs.length).fill(undefined) });
      rows.get(leaf.path).values[i] = leaf.text;
    }
  });
  return [...rows.values()].map((row) => ({ ...row, differs: new Set(row.values).size > 1 }));
}

// The Custom view's layout as data: `{charts: [{id, wide, settings}]}` in page order. Pure
// functions (no DOM), each returning a new chart list; tested with `node --test`.

export const MAX_CHARTS = 300;
const BOOL_SETTINGS = ['ignoreOutliers', 'ignoreFirst', 'logY', 'band'];
const NUMBER_SETTINGS = ['yMin', 'yMax'];

/** A layout from the server (or anywhere): bad items are dropped, never fatal. */
export function normalizeLayout(raw) {
  const charts = [];
  const seen = new Set();
  for (const item of Array.isArray(raw?.charts) ? raw.charts : []) {
    if (!item || typeof item.id !== 'string' || !item.id || seen.has(item.id)) continue;
    seen.add(item.id);
    charts.push({ id: item.id, wide: item.wide === true, settings: cleanSettings(item.settings) });
    if (charts.length === MAX_CHARTS) break;
  }
  return { charts };
}

function cleanSettings(s) {
  const out = {};
  if (!s || typeof s !== 'object') return out;
  for (const k of BOOL_SETTINGS) if (typeof s[k] === 'boolean') out[k] = s[k];
  for (const k of NUMBER_SETTINGS) if (s[k] === null || Number.isFinite(s[k])) out[k] = s[k];
  return out;
}

/** `id` placed before index `at` (the end by default); an id already there moves instead. */
export function addChart(charts, id, at = charts.length) {
  if (charts.some((c) => c.id === id)) return moveChart(charts, id, at);
  if (charts.length >= MAX_CHARTS) return charts;
  const out = charts.slice();
  out.splice(Math.max(0, Math.min(at, out.length)), 0, { id, wide: false, settings: {} });
  return out;
}

/** Move `id` so that it lands before the chart now at index `at` (the end when `at` is past it). */
export function moveChart(charts, id, at) {
  const from = charts.findIndex((c) => c.id === id);
  if (from < 0) return charts;
  const out = charts.slice();
  const [item] = out.splice(from, 1);
  const to = Math.max(0, Math.min(at > from ? at - 1 : at, out.length));
  out.splice(to, 0, item);
  return out;
}

export function removeChart(charts, id) {
  return charts.filter((c) => c.id !== id);
}

export function setWide(charts, id, wide) {
  return charts.map((c) => (c.id === id ? { ...c, wide: Boolean(wide) } : c));
}

/** Store only the settings that differ from the chart's defaults. */
export function setSettings(charts, id, settings, defaults) {
  const diff = {};
  for (const k of [...BOOL_SETTINGS, ...NUMBER_SETTINGS]) {
    if (k in settings && settings[k] !== defaults[k]) diff[k] = settings[k];
  }
  return charts.map((c) => (c.id === id ? { ...c, settings: diff } : c));
}

/** A readable name for a series id (`kind|key|stat|env`, each part percent-encoded). */
export function labelOfId(id) {
  const [kind, key, stat, env] = id.split('|').map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return [key || id, kind === 'step' ? '' : stat, env ? `(${env})` : ''].filter(Boolean).join(' ');
}

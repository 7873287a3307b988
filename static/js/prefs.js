// Settings that survive a reload (localStorage): page controls, per-chart settings, collapsed
// sections. Every read is validated, so a stale or hand-edited entry cannot break the page.

import { clampSpan, SPAN_DEFAULT } from './transforms.js';
import { defaultChartSettings } from './catalog.js';

const PAGE_KEY = 'telescope.page.v1';
const CHART_KEY = 'telescope.charts.v1';
const COLLAPSED_KEY = 'telescope.collapsed.v1';

export const PAGE_DEFAULTS = Object.freeze({
  xaxis: 'step', ema: false, span: SPAN_DEFAULT, normalize: false, maxStep: null, maxTime: null,
  search: '', regex: false,
});

function read(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Storage full or disabled: settings just don't persist.
  }
}

const numOrNull = (v) => (v === null || v === '' || v === undefined || !Number.isFinite(Number(v)) ? null : Number(v));

/** Page settings from storage, each field checked and defaulted. */
export function loadPage() {
  const s = read(PAGE_KEY, {}) || {};
  return {
    xaxis: s.xaxis === 'time' ? 'time' : 'step',
    ema: Boolean(s.ema),
    span: clampSpan(s.span ?? SPAN_DEFAULT),
    normalize: Boolean(s.normalize),
    maxStep: numOrNull(s.maxStep),
    maxTime: numOrNull(s.maxTime),
    search: typeof s.search === 'string' ? s.search : '',
    regex: Boolean(s.regex),
  };
}

export function savePage(settings) {
  write(PAGE_KEY, settings);
}

/** Per-chart settings: stored overrides on top of the entry's defaults. */
export class ChartPrefs {
  constructor() {
    this.all = read(CHART_KEY, {}) || {};
  }

  get(entry) {
    const base = defaultChartSettings(entry);
    const saved = this.all[entry.id] || {};
    for (const k of Object.keys(base)) {
      if (!(k in saved)) continue;
      base[k] = k === 'yMin' || k === 'yMax' ? numOrNull(saved[k]) : Boolean(saved[k]);
    }
    return base;
  }

  set(entry, settings) {
    const base = defaultChartSettings(entry);
    const diff = {};
    for (const k of Object.keys(base)) if (settings[k] !== base[k]) diff[k] = settings[k];
    if (Object.keys(diff).length) this.all[entry.id] = diff;
    else delete this.all[entry.id];
    write(CHART_KEY, this.all);
  }
}

export function loadCollapsed() {
  const v = read(COLLAPSED_KEY, []);
  return new Set(Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);
}

export function saveCollapsed(set) {
  write(COLLAPSED_KEY, [...set]);
}

// @ts-check
// Settings that survive a reload (localStorage): page controls, per-chart settings (a composed
// chart's legend choices too), collapsed sections, and the badges naming a chart's settings
// that differ from its defaults. Every read is validated, so a stale or hand-edited entry
// cannot break the page.

import { clampSpan, SPAN_DEFAULT } from './transforms.js';
import { defaultChartSettings } from '../core/catalog.js';
import { ALL_TOGETHER, EVERY_ENV } from './compose.js';

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
    maxTime: numOrNull(s.maxTime) !== null && s.maxTime >= 0 ? Number(s.maxTime) : null, // hours
    search: typeof s.search === 'string' ? s.search : '',
    regex: Boolean(s.regex),
  };
}

export function savePage(settings) {
  write(PAGE_KEY, settings);
}

/**
 * A chart's default settings: the entry's (core/catalog.js), plus, for a composed chart (All view),
 * its legend's min/max envelope shown and every environment overlaid.
 */
export function chartDefaults(entry, composed = false) {
  const base = defaultChartSettings(entry);
  return composed ? { ...base, envelope: true, env: EVERY_ENV } : base;
}

function checked(key, value) {
  if (key === 'yMin' || key === 'yMax') return numOrNull(value);
  if (key === 'env') return typeof value === 'string' && value.length <= 200 ? value : EVERY_ENV;
  return Boolean(value);
}

/** Per-chart settings: stored overrides on top of the chart's defaults. */
export class ChartPrefs {
  constructor() {
    this.all = read(CHART_KEY, {}) || {};
  }

  /** Whether anything is stored for this chart. */
  has(entry) {
    return Object.hasOwn(this.all, entry.id);
  }

  get(entry, composed = false) {
    const base = chartDefaults(entry, composed);
    const saved = this.all[entry.id] || {};
    for (const k of Object.keys(base)) if (k in saved) base[k] = checked(k, saved[k]);
    return base;
  }

  set(entry, settings, composed = false) {
    const base = chartDefaults(entry, composed);
    const diff = {};
    for (const k of Object.keys(base)) if (settings[k] !== base[k]) diff[k] = settings[k];
    if (Object.keys(diff).length) this.all[entry.id] = diff;
    else delete this.all[entry.id];
    write(CHART_KEY, this.all);
  }
}

const num = (v) => String(Number(v.toPrecision(6)));

/**
 * Short texts naming each setting that differs from `defaults` ("log y", "y ≤ 5", "outliers
 * ignored", "first step shown", ...), so a changed chart shows it at a glance. `offered`
 * ({band, envelope}) leaves out toggles the chart does not have.
 */
export function settingBadges(settings, defaults, offered = {}) {
  const out = [];
  const changed = (k) => k in defaults && settings[k] !== defaults[k];
  if (changed('logY') && settings.logY) out.push('log y');
  const lo = settings.yMin ?? null;
  const hi = settings.yMax ?? null;
  if (lo !== null && hi !== null) out.push(`${num(lo)} \u2264 y \u2264 ${num(hi)}`);
  else if (lo !== null) out.push(`y \u2265 ${num(lo)}`);
  else if (hi !== null) out.push(`y \u2264 ${num(hi)}`);
  if (changed('ignoreOutliers')) out.push(settings.ignoreOutliers ? 'outliers ignored' : 'outliers kept');
  if (changed('ignoreFirst')) out.push(settings.ignoreFirst ? 'first step ignored' : 'first step shown');
  if (offered.band && changed('band')) out.push(settings.band ? '\u00b1 std shown' : 'no \u00b1 std');
  if (offered.envelope && changed('envelope')) out.push(settings.envelope ? 'min/max shown' : 'no min/max');
  if (changed('env')) out.push(settings.env === ALL_TOGETHER ? 'all envs together' : `env: ${settings.env}`);
  return out;
}

export function loadCollapsed() {
  const v = read(COLLAPSED_KEY, []);
  return new Set(Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);
}

export function saveCollapsed(set) {
  write(COLLAPSED_KEY, [...set]);
}

// @ts-check
// Settings that survive a reload (localStorage): page controls, per-chart settings (a composed
// chart's legend choices too), collapsed sections, and the badges naming a chart's settings
// that differ from its defaults. Every read is validated, so a stale or hand-edited entry
// cannot break the page. A page URL holding a view (charts/viewurl.js) wins over what is
// stored here; this is the fallback for a URL without one.

import { checkSmoothing, clampSpan, SMOOTHING_DEFAULT, SPAN_DEFAULT } from './transforms.js';
import { defaultChartSettings } from '../core/catalog.js';
import { ALL_TOGETHER, EVERY_ENV } from './compose.js';

const PAGE_KEY = 'telescope.page.v1';
const CHART_KEY = 'telescope.charts.v1';
const COLLAPSED_KEY = 'telescope.collapsed.v1';

/** `ema`: whether the page smooths (by `smoothing`, charts/transforms.js SMOOTHERS). */
export const PAGE_DEFAULTS = Object.freeze({
  xaxis: 'step', ema: false, smoothing: SMOOTHING_DEFAULT, span: SPAN_DEFAULT, normalize: false,
  maxStep: null, maxTime: null, search: '', regex: false,
});

/** The longest metric search kept (a URL or a stored entry may hold anything). */
export const MAX_SEARCH = 1000;

function read(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}

/** A stored object (anything else stored under `key`: an empty one). */
function readObject(key) {
  const v = read(key, {});
  return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Storage full or disabled: settings just don't persist.
  }
}

const numOrNull = (v) => (v === null || v === '' || v === undefined || !Number.isFinite(Number(v)) ? null : Number(v));
const nonNegative = (v) => (numOrNull(v) !== null && Number(v) >= 0 ? Number(v) : null);

/**
 * Page settings from anything (stored, or read from a URL), each field checked: what is
 * missing or invalid takes its default. Never throws.
 */
export function checkPage(raw) {
  const s = raw && typeof raw === 'object' ? raw : {};
  return {
    xaxis: s.xaxis === 'time' ? 'time' : 'step',
    ema: s.ema === true,
    smoothing: checkSmoothing(s.smoothing),
    span: clampSpan(s.span ?? SPAN_DEFAULT),
    normalize: s.normalize === true,
    maxStep: nonNegative(s.maxStep),
    maxTime: nonNegative(s.maxTime), // hours
    search: typeof s.search === 'string' ? s.search.slice(0, MAX_SEARCH) : '',
    regex: s.regex === true,
  };
}

/** Page settings from storage, each field checked and defaulted. */
export function loadPage() {
  return checkPage(readObject(PAGE_KEY));
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

/**
 * Per-chart settings: overrides on top of the chart's defaults, stored. Given `fromUrl` (the
 * overrides a page URL holds, charts/viewurl.js), those are the view's, whatever is stored; a
 * chart changed then is stored too (that chart only). `onChange()` after each change.
 */
export class ChartPrefs {
  /** @param {Record<string, object> | null} fromUrl */
  constructor(fromUrl = null) {
    this.fromUrl = fromUrl !== null;
    this.all = fromUrl ?? readObject(CHART_KEY);
    /** @type {(() => void) | null} */
    this.onChange = null;
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
    const keep = (all) => {
      if (Object.keys(diff).length) all[entry.id] = diff;
      else delete all[entry.id];
    };
    keep(this.all);
    if (this.fromUrl) {
      const all = readObject(CHART_KEY);
      keep(all);
      write(CHART_KEY, all);
    } else {
      write(CHART_KEY, this.all);
    }
    this.onChange?.();
  }

  /**
   * The overrides a page URL carries: a URL's own, all of them; stored ones, those of the
   * charts `ids` (the page's: storage holds every chart ever changed).
   * @param {Iterable<string>} ids
   */
  forUrl(ids) {
    if (this.fromUrl) return this.all;
    const out = {};
    for (const id of ids) if (Object.hasOwn(this.all, id)) out[id] = this.all[id];
    return out;
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

// @ts-check
// Health hints of registered metrics, to flag a chart that looks wrong: the pure evaluator of the registry's
// hint rules (core/registry.js holds the hints as data), and the chart add-on (charts/addons.js) that
// evaluates them on the primary run's loaded series and marks the chart header (⚠ with the
// messages as its tooltip and accessible name) and, through the view's `setHealth`, its section.
//
// When: on each draw of a hinted chart, only when its data changed (a signature of every read
// series' length, last step and last value, and of the run config), and once when the page is
// idle after a card is built, so that a section's mark appears before its charts are scrolled to. Cross-key hints
// load the other keys' series through the page's loader (low priority, like an off-screen
// chart) and are evaluated once those loads are done; a key the run never logged is absent.
// Live points re-evaluate a chart when it is redrawn (near the viewport); an off-screen chart's
// mark is refreshed when it is next drawn.

import { registerAddon } from './addons.js';
import { getRun } from '../core/api.js';
import { h } from '../core/dom.js';
import { describe, hintsFor } from '../core/registry.js';

const finite = (v) => typeof v === 'number' && Number.isFinite(v);

/** {step, value} from a series, or from a plain array of values (steps 0, 1, …). */
function points(s) {
  if (!s) return null;
  return Array.isArray(s) ? { step: s.map((_, i) => i), value: s } : s;
}

/** The finite points of a series, in order: {step: [], value: []}. */
function finitePoints(s) {
  const out = { step: [], value: [] };
  for (let i = 0; i < s.value.length; i++) {
    if (finite(s.value[i])) {
      out.step.push(s.step[i]);
      out.value.push(s.value[i]);
    }
  }
  return out;
}

function byStep(s) {
  const f = finitePoints(s);
  return new Map(f.step.map((st, i) => [st, f.value[i]]));
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The first of `paths` ('rl.n_mini') set in the config, or undefined. */
function configValue(config, paths) {
  for (const path of paths) {
    let v = config;
    for (const part of path.split('.')) v = v !== null && typeof v === 'object' ? v[part] : undefined;
    if (v !== undefined && v !== null) return v;
  }
  return undefined;
}

/**
 * Each rule: (hint, main series, {name: ref series}, context) → what it found (fills the
 * message) or null when it does not fire.
 */
const RULES = {
  /** Any nonzero value while the config says it must be 0 (clip_frac at n_mini == 1). */
  'nonzero-when-config'(hint, main, refs, ctx) {
    const set = configValue(ctx.config, hint.config);
    if (set === undefined || Number(set) !== hint.equals) return null;
    const f = finitePoints(main);
    const i = f.value.findIndex((v) => v !== 0);
    return i < 0 ? null : { step: f.step[i], value: f.value[i] };
  },
  /** The last `window` values all at most `fraction` of the total at their step (0 when no total). */
  'near-zero'(hint, main, refs) {
    const f = finitePoints(main);
    if (f.value.length < hint.window) return null;
    const total = refs.total ? byStep(refs.total) : new Map();
    for (let i = f.value.length - hint.window; i < f.value.length; i++) {
      const t = total.get(f.step[i]);
      if (f.value[i] > (t === undefined ? 0 : hint.fraction * t)) return null;
    }
    return { step: f.step.at(-1), value: f.value.at(-1), window: hint.window };
  },
  /** The latest step where main ≥ ratio × ref `mean` and ref `jump` ≥ factor × its recent median. */
  'ratio-with-jump'(hint, main, refs) {
    if (!refs.mean || !refs.jump) return null;
    const means = byStep(refs.mean);
    const jump = finitePoints(refs.jump);
    const at = new Map(jump.step.map((s, i) => [s, i]));
    const f = finitePoints(main);
    for (let i = f.value.length - 1; i >= 0; i--) {
      const m = means.get(f.step[i]);
      const j = at.get(f.step[i]);
      if (!(m > 0) || f.value[i] < hint.ratio * m || j === undefined) continue;
      const before = jump.value.slice(Math.max(0, j - hint.lookback), j);
      const base = before.length >= hint.prior ? median(before) : NaN;
      if (base > 0 && jump.value[j] >= hint.factor * base) {
        return { step: f.step[i], ratio: f.value[i] / m, jump: jump.value[j] / base };
      }
    }
    return null;
  },
  /** A counter that went up between two points (within the last `window` points when given). */
  increases(hint, main) {
    const f = finitePoints(main);
    const from = hint.window ? Math.max(1, f.value.length - hint.window) : 1;
    let first = null;
    let count = 0;
    for (let i = from; i < f.value.length; i++) {
      if (f.value[i] > f.value[i - 1]) {
        first ??= f.step[i];
        count += f.value[i] - f.value[i - 1];
      }
    }
    return first === null ? null : { step: first, count };
  },
  /** The last value above `threshold`. */
  'last-above'(hint, main) {
    const f = finitePoints(main);
    return f.value.length && f.value.at(-1) > hint.threshold ? { step: f.step.at(-1), value: f.value.at(-1) } : null;
  },
  /**
   * Above `threshold` at each of the last `window` steps: the value, or with a ref `of` its
   * share of that ref at the same step (steps where `of` is not above 0 left out). What it
   * found is the last of those steps: its value, `of` and the share in % (`pct`), and each
   * other ref's value at that step (the evidence, e.g. which rank; `?` when it has none).
   */
  'sustained-above'(hint, main, refs) {
    if (hint.refs?.of && !refs.of) return null;
    const of = refs.of ? byStep(refs.of) : null;
    const f = finitePoints(main);
    const rows = [];
    for (let i = 0; i < f.step.length; i++) {
      const base = of ? of.get(f.step[i]) : 1;
      if (base > 0) rows.push({ step: f.step[i], value: f.value[i], base, share: f.value[i] / base });
    }
    const last = rows.slice(-hint.window);
    if (last.length < hint.window || !last.every((r) => r.share > hint.threshold)) return null;
    const at = last.at(-1);
    const found = { step: at.step, value: at.value, window: hint.window };
    if (of) Object.assign(found, { of: at.base, pct: 100 * at.share });
    for (const [name, ref] of Object.entries(refs)) {
      if (name !== 'of') found[name] = byStep(ref).get(at.step) ?? '?';
    }
    for (const name of Object.keys(hint.refs ?? {})) found[name] ??= '?';
    return found;
  },
  /** Any value equal to `value` (a categorical key's string too). */
  equals(hint, main) {
    let count = 0;
    let step = null;
    main.value.forEach((v, i) => {
      if (v === hint.value) {
        count++;
        step = main.step[i];
      }
    });
    return count ? { step, count } : null;
  },
  /**
   * Mean of the first `window` values against the last `window` (2 × window needed): `up` fires
   * when the last is above 0 and at least `factor` × the first, `flat` when it is not above it.
   */
  trend(hint, main) {
    const f = finitePoints(main);
    if (f.value.length < 2 * hint.window) return null;
    const first = mean(f.value.slice(0, hint.window));
    const last = mean(f.value.slice(-hint.window));
    const fires = hint.direction === 'up' ? last > 0 && last >= hint.factor * first : last <= first;
    return fires ? { step: f.step.at(-1), first, last } : null;
  },
};

/** The rule kinds the evaluator knows (a registry hint must use one of them). */
export const HINT_RULES = Object.freeze(Object.keys(RULES));

function format(v) {
  if (typeof v !== 'number') return String(v);
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(3)));
}

/** Every key a hint reads: its own and its refs. */
export function hintKeys(hint) {
  return [hint.key, ...Object.values(hint.refs ?? {})];
}

/**
 * Evaluate hints (from registry.hintsFor) over one run's series, `{key: {step, value}}` (or
 * plain value arrays), with `context.config` the run's config. Returns the hints that fire:
 * [{rule, key, message, ...found}]. A hint whose own key has no series does not fire.
 */
export function evaluate(hints, series, context = {}) {
  const fired = [];
  for (const hint of hints) {
    const rule = RULES[hint.rule];
    const main = points(series[hint.key]);
    if (!rule || !main) continue;
    const refs = Object.fromEntries(Object.entries(hint.refs ?? {}).map(([n, k]) => [n, points(series[k])])
      .filter(([, s]) => s));
    const found = rule(hint, main, refs, context);
    if (!found) continue;
    const message = hint.message.replace(/\{(\w+)\}/g, (all, name) => (name in found ? format(found[name]) : all));
    fired.push({ rule: hint.rule, key: hint.key, message, ...found });
  }
  return fired;
}

// ------------------------------------------------------------------ the chart add-on

const configs = new WeakMap(); // RunStore -> {value: config | null | undefined (pending), waiting}

/** The run's config: from its info, else read once with getRun (undefined until it arrives). */
function runConfig(store, chart) {
  if (store.info && 'config' in store.info) return store.info.config ?? null;
  let c = configs.get(store);
  if (!c) {
    c = { value: undefined, waiting: new Set() };
    configs.set(store, c);
    getRun(store.id).then((info) => { c.value = info?.config ?? null; }, () => { c.value = null; })
      .finally(() => { for (const waiting of c.waiting) check(waiting); c.waiting.clear(); });
  }
  if (c.value === undefined) c.waiting.add(chart);
  return c.value;
}

/** Kinds whose keys the registry describes: trainer step keys and the derived `timing_*` series. */
const HINTED_KINDS = new Set(['step', 'timeline']);

/**
 * The series id of a key in a run's catalog, null when the run has none: of the chart's own
 * kind first, so that a trainer's `timing_*` key and the series derived from the events (kind
 * `timeline`, same name) each read their own, and either reads the other's when it lacks one.
 */
function seriesIdOf(store, key, kind) {
  let other = null;
  for (const e of store.catalog.values()) {
    if (e.key !== key || e.normalized || !HINTED_KINDS.has(e.kind)) continue;
    if (e.kind === kind) return e.id;
    other ??= e.id;
  }
  return other;
}

/**
 * The keys whose hints a chart evaluates: its entry's, and of a composed chart every hinted
 * key it draws (a timeline family's chart draws several: charts/compose.js), its own first.
 */
function hintedKeys(chart) {
  const keys = HINTED_KINDS.has(chart.entry.kind) ? [chart.entry.key] : [];
  for (const e of chart.family ? chart.familyEntries?.() ?? [] : []) {
    if (HINTED_KINDS.has(e.kind) && !e.normalized && !keys.includes(e.key)) keys.push(e.key);
  }
  return keys;
}

/** A chart's health state; its hints follow the keys it draws (a family gains series live). */
function state(chart) {
  const keys = hintedKeys(chart);
  const sig = keys.join('\u0000');
  if (!chart.health) chart.health = { hints: [], keys: null, sig: null, mark: null };
  if (chart.health.keys !== sig) {
    chart.health.keys = sig;
    chart.health.hints = keys.flatMap((key) => hintsFor(key));
    chart.health.sig = null;
  }
  return chart.health;
}

/** Evaluate a chart's hints on the primary run when its data changed; show the outcome. */
function check(chart) {
  const st = state(chart);
  const store = chart.page.runs[0];
  if (!st.hints.length || !store || !chart.el) return;
  const series = {};
  let loading = false;
  for (const key of new Set(st.hints.flatMap(hintKeys))) {
    const sid = seriesIdOf(store, key, chart.entry.kind);
    const rec = sid && store.series.get(sid);
    if (rec?.data) series[key] = rec.data;
    else if (sid && !rec?.missing && (!st.asked?.has(sid) || chart.page.loader.isPending(store, sid))) {
      (st.asked ??= new Set()).add(sid);
      loading = true;
      chart.page.loader.request(store, sid, false).then(() => check(chart));
    }
  }
  if (loading) return;
  const config = st.hints.some((hint) => hint.config) ? runConfig(store, chart) : null;
  const shape = Object.entries(series).map(([k, d]) => [k, d.step.length, d.step.at(-1), d.value.at(-1)]);
  const sig = JSON.stringify([config === undefined ? 'pending' : config, shape]);
  if (sig === st.sig) return;
  st.sig = sig;
  // A chart of several keys says whose hint fired (two weight syncs warn alike).
  const many = new Set(st.hints.map((hint) => hint.key)).size > 1;
  const words = (f) => (many ? `${describe(f.key)?.title ?? f.key}: ${f.message}` : f.message);
  show(chart, evaluate(st.hints, series, { config }).map(words), config === undefined);
}

function show(chart, messages, pending) {
  const st = state(chart);
  if (!st.mark && messages.length) {
    st.mark = h('span', { class: 'health-mark', role: 'img', tabindex: '0', dataset: { health: '' } }, '\u26a0');
    chart.el.querySelector('.chart-title')?.after(st.mark);
  }
  if (st.mark) {
    st.mark.hidden = messages.length === 0;
    st.mark.title = messages.join('\n');
    st.mark.setAttribute('aria-label', `Health warning: ${messages.join(' · ')}`);
  }
  // 'pending' while the run config is still being read (a config hint may yet fire).
  chart.el.dataset.healthState = messages.length ? 'warn' : pending ? 'pending' : 'ok';
  chart.page.view?.setHealth?.(chart, messages);
}

function whenIdle(fn) {
  if (typeof requestIdleCallback === 'function') requestIdleCallback(fn, { timeout: 2000 });
  else setTimeout(fn, 0);
}

registerAddon({
  tools(chart) {
    // The card is being built: evaluate it, drawn or not, once the page is idle, so that a chart
    // in view has asked for its own series first (at its urgent priority, not ours).
    if (state(chart).hints.length) whenIdle(() => check(chart));
    return null;
  },
  drawn(chart) {
    check(chart);
  },
});

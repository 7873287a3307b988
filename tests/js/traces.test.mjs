// What one chart draws (static/js/charts/traces.js): overlay, EMA, outliers, normalized charts, bands.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { buildFigure, labelWidth, leftMargin, tickLabel, withAlpha } from '../../static/js/charts/traces.js';
import { buildComposedFigure } from '../../static/js/charts/composed.js';

const theme = { fg: '#000', muted: '#888', grid: '#eee', bg: '#fff', font: 'sans-serif' };
const page = (over = {}) => ({ xaxis: 'step', ema: false, span: 10, normalize: false, maxStep: null, maxTime: null, ...over });
const chart = (over = {}) => ({ ignoreOutliers: false, ignoreFirst: false, logY: false, yMin: null, yMax: null, band: true, ...over });
const series = (values, { t0 = 1000, dt = 10, step0 = 0 } = {}) => ({
  step: values.map((_, i) => step0 + i), time: values.map((_, i) => t0 + dt * (i + step0)),
  value: values.slice(), bmin: null, bmax: null, downsampled: false,
});
const run = (id, values, over = {}) => ({ id, name: `run-${id}`, color: '#112233', data: series(values), std: null,
  range: { min: Math.min(...values), max: Math.max(...values), source: 'observed', invert: false }, t0: 1000, firstStep: 0, ...over });
const entry = (over = {}) => ({ id: 'step|x||', kind: 'step', key: 'x', stat: null, env: null, ...over });
const role = (fig, r, runId = 1) => fig.data.find((t) => t.meta.role === r && t.meta.run === runId);

test('each overlaid run gets its own traces in its colour, names escaped for Plotly', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [1, 2, 3]), run(2, [3, 2], { name: '<b>x</b>', color: '#abcdef' })],
    chart: chart(), page: page(), theme });
  assert.equal(role(fig, 'raw', 1).line.color, '#112233');
  assert.equal(role(fig, 'raw', 2).line.color, '#abcdef');
  assert.equal(role(fig, 'raw', 2).name, '&lt;b&gt;x&lt;/b&gt;');
  assert.deepEqual(role(fig, 'raw', 2).y, [3, 2]);
  assert.equal(fig.layout.hovermode, 'x unified');
  assert.equal(fig.points, 5);
});

test('EMA adds a line and makes the raw line faint', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [4, 2, 6])], chart: chart(), page: page({ ema: true, span: 3 }), theme });
  assert.deepEqual(role(fig, 'ema').y, [4, 3, 4.5]);
  assert.ok(role(fig, 'raw').opacity < 1);
  assert.equal(role(fig, 'ema').name, 'run-1 EMA');
});

test('ignoring outliers fixes the y-range and the EMA but still draws the point', () => {
  const values = [1, 1.1, 0.9, 1.05, 0.95, 50, 1];
  const fig = buildFigure({ entry: entry(), runs: [run(1, values)], chart: chart({ ignoreOutliers: true }),
    page: page({ ema: true, span: 3 }), theme });
  assert.deepEqual(role(fig, 'raw').y, values);
  assert.equal(role(fig, 'ema').y[5], role(fig, 'ema').y[4]);
  const [lo, hi] = fig.layout.yaxis.range;
  assert.ok(hi < 2 && lo > 0.5, `${lo}..${hi}`);
  assert.equal(fig.layout.yaxis.autorange, false);
});

test('ignore first step drops the run\'s first step only', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [60, 10, 11])], chart: chart({ ignoreFirst: true }), page: page(), theme });
  assert.deepEqual(role(fig, 'raw').x, [1, 2]);
  const later = run(1, [5, 6], { data: series([5, 6], { step0: 3 }), firstStep: 0 });
  const fig2 = buildFigure({ entry: entry(), runs: [later], chart: chart({ ignoreFirst: true }), page: page(), theme });
  assert.deepEqual(role(fig2, 'raw').x, [3, 4]);
});

test('a normalized chart draws its series as they are, on 0–1, without the declared lines', () => {
  const r = run(1, [0, 1, 2], { range: { min: 0, max: 2, source: 'declared', invert: false } });
  const e = entry({ kind: 'reward', stat: 'mean' });
  const raw = buildFigure({ entry: e, runs: [r], chart: chart(), page: page(), theme });
  assert.deepEqual(raw.layout.shapes.map((s) => s.y0), [0, 2]);
  const twin = run(1, [0, 0.25, 0.75], { range: { normalized: true, min: 0, max: 2, source: 'declared', invert: false } });
  const norm = buildFigure({ entry: e, runs: [twin], chart: chart(), page: page(), theme, normalized: true });
  assert.deepEqual(role(norm, 'raw').y, [0, 0.25, 0.75]); // never rescaled on the client
  assert.equal(norm.layout.shapes.length, 0);
  const [lo, hi] = norm.layout.yaxis.range;
  assert.ok(lo <= 0 && hi >= 1);
});

test('the page toggle alone changes nothing: a raw chart stays raw', () => {
  const r = run(1, [3, 5, 4], { range: { min: 3, max: 5, source: 'observed' } });
  const off = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page(), theme });
  const on = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page({ normalize: true }), theme });
  assert.deepEqual(role(on, 'raw').y, [3, 5, 4]);
  assert.deepEqual(on.layout.yaxis, off.layout.yaxis);
});

test('the time axis counts from the end of the first step, in a readable unit', () => {
  const r = run(1, [1, 2, 3]);
  r.data.time = [1000, 1030, 1060];
  const fig = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page({ xaxis: 'time' }), theme });
  assert.deepEqual(role(fig, 'raw').x, [0, 30, 60]);
  assert.equal(fig.layout.xaxis.ticksuffix, ' s');
});

test('max step and max time (hours) limit the points', () => {
  const r = run(1, [1, 2, 3, 4]);
  r.data.time = [1000, 1000 + 1800, 1000 + 3600, 1000 + 7200];
  const fig = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page({ maxStep: 2 }), theme });
  assert.deepEqual(role(fig, 'raw').x, [0, 1, 2]);
  const fig2 = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page({ maxTime: 1 }), theme });
  assert.deepEqual(role(fig2, 'raw').x, [0, 1, 2]);
});

test('mean ± std band from the std series', () => {
  const r = run(1, [1, 2], { std: series([0.5, 1]), range: { min: 0, max: 4, source: 'declared' } });
  const fig = buildFigure({ entry: entry({ kind: 'reward', stat: 'mean' }), runs: [r], chart: chart(), page: page(), theme });
  const band = role(fig, 'band');
  assert.deepEqual(band.y, [1.5, 3, 1, 0.5]);
  assert.equal(band.fill, 'toself');
  assert.equal(fig.data[0].meta.role, 'band'); // bands under lines
  const off = buildFigure({ entry: entry({ kind: 'reward', stat: 'mean' }), runs: [r], chart: chart({ band: false }), page: page(), theme });
  assert.equal(role(off, 'band'), undefined);
});

test('a downsampled series draws its bucket extremes as a band', () => {
  const r = run(1, [1, 2]);
  Object.assign(r.data, { bmin: [0, 1], bmax: [3, 4], downsampled: true });
  const fig = buildFigure({ entry: entry(), runs: [r], chart: chart(), page: page(), theme });
  assert.deepEqual(role(fig, 'extremes').y, [3, 4, 1, 0]);
});

test('y min / max and log y', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [1, 10, 100])], chart: chart({ yMin: 0, yMax: 50 }), page: page(), theme });
  assert.deepEqual(fig.layout.yaxis.range, [0, 50]);
  const log = buildFigure({ entry: entry(), runs: [run(1, [1, 10, 100])], chart: chart({ logY: true, yMin: 1, yMax: 1000 }), page: page(), theme });
  assert.equal(log.layout.yaxis.type, 'log');
  assert.deepEqual(log.layout.yaxis.range, [0, 3]);
});

test('advantage charts carry a zero line; user zoom wins', () => {
  const fig = buildFigure({ entry: entry({ kind: 'advantage', stat: 'mean' }), runs: [run(1, [-1, 1])], chart: chart(), page: page(), theme,
    zoom: { x: [0, 0.5] } });
  assert.deepEqual(fig.layout.shapes.map((s) => s.y0), [0]);
  assert.deepEqual(fig.layout.xaxis.range, [0, 0.5]);
});

test('a run without data draws nothing', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [1], { data: null })], chart: chart(), page: page(), theme });
  assert.equal(fig.data.length, 0);
  assert.equal(fig.points, 0);
});

test('withAlpha', () => {
  assert.equal(withAlpha('#ff0080', 0.5), 'rgba(255,0,128,0.5)');
  assert.equal(withAlpha('bad', 0.2), 'rgba(128,128,128,0.2)');
});

// ------------------------------------------------------------ Telescope parity

const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps, `${a} != ${b}`);
const closeRange = (r, [lo, hi]) => { close(r[0], lo); close(r[1], hi); };

test('the y-range follows Telescope\'s autoscale: max(10% of the range, 5% of |max|, 1e-10)', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [2, 4, 3])], chart: chart(), page: page(), theme });
  assert.equal(fig.layout.yaxis.autorange, false);
  closeRange(fig.layout.yaxis.range, [1.8, 4.2]); // pad 0.2 (5% of 4 = 0.2 = 10% of 2)
  const flat = buildFigure({ entry: entry(), runs: [run(1, [100, 100])], chart: chart(), page: page(), theme });
  closeRange(flat.layout.yaxis.range, [95, 105]); // a flat line: 5% of |max|
  const zero = buildFigure({ entry: entry(), runs: [run(1, [0, 0])], chart: chart(), page: page(), theme });
  closeRange(zero.layout.yaxis.range, [-1e-10, 1e-10]);
  // Every drawn run counts, and so do the EMA and the declared bounds.
  const two = buildFigure({ entry: entry(), runs: [run(1, [1, 2]), run(2, [5, 6])], chart: chart(), page: page(), theme });
  closeRange(two.layout.yaxis.range, [0.5, 6.5]);
  const declared = buildFigure({ entry: entry({ kind: 'reward', stat: 'mean' }),
    runs: [run(1, [0.5, 1], { range: { min: 0, max: 2, source: 'declared' } })], chart: chart({ band: false }), page: page(), theme });
  closeRange(declared.layout.yaxis.range, [-0.2, 2.2]);
});

test('advantage charts always include zero; normalized charts span 0–1 at least', () => {
  const adv = buildFigure({ entry: entry({ kind: 'advantage', stat: 'mean' }), runs: [run(1, [0.5, 1.5])], chart: chart(), page: page(), theme });
  closeRange(adv.layout.yaxis.range, [-0.15, 1.65]);
  const twin = run(1, [0.2, 0.4], { range: { normalized: true, min: 0, max: 2, source: 'declared' } });
  const norm = buildFigure({ entry: entry({ kind: 'reward', stat: 'mean' }), runs: [twin], chart: chart(), page: page(), theme, normalized: true });
  closeRange(norm.layout.yaxis.range, [-0.1, 1.1]);
});

test('ignored outliers leave the range; y min / max replace one end; log y pads in decades', () => {
  const values = [1, 1.1, 0.9, 1.05, 0.95, 50, 1];
  const fig = buildFigure({ entry: entry(), runs: [run(1, values)], chart: chart({ ignoreOutliers: true }), page: page(), theme });
  closeRange(fig.layout.yaxis.range, [0.9 - 0.055, 1.1 + 0.055]); // 5% of 1.1 beats 10% of 0.2
  const kept = buildFigure({ entry: entry(), runs: [run(1, values)], chart: chart(), page: page(), theme });
  closeRange(kept.layout.yaxis.range, [0.9 - 4.91, 50 + 4.91]);
  const top = buildFigure({ entry: entry(), runs: [run(1, [2, 4])], chart: chart({ yMax: 5 }), page: page(), theme });
  closeRange(top.layout.yaxis.range, [1.8, 5]);
  const log = buildFigure({ entry: entry(), runs: [run(1, [0, 1, 10, 100])], chart: chart({ logY: true }), page: page(), theme });
  closeRange(log.layout.yaxis.range, [-0.2, 2.2]); // 10^0..10^2, zero left out
  const none = buildFigure({ entry: entry(), runs: [run(1, [-1, 0])], chart: chart({ logY: true }), page: page(), theme });
  assert.equal(none.layout.yaxis.autorange, true); // nothing a log axis can show
});

test('a user zoom keeps its y-range', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [1, 2])], chart: chart(), page: page(), theme, zoom: { y: [0, 9] } });
  assert.deepEqual(fig.layout.yaxis.range, [0, 9]);
});

test('a dot marks the last point of each run\'s main line, the EMA when drawn', () => {
  const fig = buildFigure({ entry: entry(), runs: [run(1, [1, 2, 3]), run(2, [5, NaN], { color: '#abcdef' })],
    chart: chart(), page: page(), theme });
  const dots = fig.data.filter((t) => t.meta.role === 'last');
  assert.deepEqual(dots.map((t) => [t.meta.run, t.x, t.y, t.marker.color]), [[1, [2], [3], '#112233'], [2, [0], [5], '#abcdef']]);
  assert.ok(fig.data.slice(-2).every((t) => t.meta.role === 'last')); // on top of every line
  assert.equal(dots[0].hoverinfo, 'skip'); // the tooltip lists the lines, not the dots
  const ema = buildFigure({ entry: entry(), runs: [run(1, [4, 2, 6])], chart: chart(), page: page({ ema: true, span: 3 }), theme });
  assert.deepEqual(role(ema, 'last').y, [4.5]);
  const time = buildFigure({ entry: entry(), runs: [run(1, [4, 2, 6])], chart: chart(), page: page({ xaxis: 'time' }), theme });
  assert.deepEqual(role(time, 'last').x, [20]);
});

test('the left margin holds the y labels and the unit from the first draw (no automargin redraw)', () => {
  assert.equal(tickLabel(1500, ',d'), '1,500');
  assert.equal(tickLabel(0.1 + 0.2, ',~g'), '0.3');
  assert.equal(tickLabel(-0.1, ',~g'), '-0.1');
  assert.equal(tickLabel(5e-7, '~s'), '500n');
  assert.equal(tickLabel(1.5e6, '~s'), '1.5M');
  assert.ok(Math.abs(labelWidth('0.001') - (4 * 6.4 + 3.2)) < 1e-9);
  // The demo's KL: labels 0.001..0.003 and the unit's title need ~49 px (Plotly pushed 44 to 49).
  assert.equal(leftMargin([0.0004, 0.0036], { unit: 'nats' }), 50);
  assert.equal(leftMargin([0.0004, 0.0036]), 44); // without a title they fit
  assert.equal(leftMargin([0.5, 1.3], { unit: 'nats' }), 44);
  assert.equal(leftMargin([-20, 1600], { unit: 'tokens', integer: true }), 50);
  assert.equal(leftMargin(null, { unit: 'nats' }), 44); // unknown: Plotly pushes it when it must
  assert.equal(leftMargin([-3, 2], { log: true, unit: 's' }), 44);
  const fig = buildFigure({ entry: entry(), runs: [run(1, [0.0005, 0.0035])], chart: chart(), page: page(), theme,
    axis: { unit: 'nats' } });
  assert.equal(fig.layout.margin.l, 50);
});

test('a share in % is not padded past 0 or 100 %; other units are', () => {
  const full = buildFigure({ entry: entry(), runs: [run(1, [100, 100, 100])], chart: chart(), page: page(), theme,
    axis: { unit: '%' } });
  const [lo, hi] = full.layout.yaxis.range;
  assert.equal(hi, 100);
  assert.ok(lo < 100 && lo >= 90);
  const some = buildFigure({ entry: entry(), runs: [run(1, [0, 40, 100])], chart: chart(), page: page(), theme,
    axis: { unit: '%' } });
  assert.deepEqual(some.layout.yaxis.range, [0, 100]);
  const inside = buildFigure({ entry: entry(), runs: [run(1, [20, 40])], chart: chart(), page: page(), theme,
    axis: { unit: '%' } });
  const [a, b] = inside.layout.yaxis.range;
  assert.ok(a > 0 && a < 20 && b > 40 && b < 100); // padded as any axis inside the bounds
  const plain = buildFigure({ entry: entry(), runs: [run(1, [100, 100, 100])], chart: chart(), page: page(), theme,
    axis: { unit: 'tokens' } });
  assert.ok(plain.layout.yaxis.range[1] > 100);
  const flatZero = buildFigure({ entry: entry(), runs: [run(1, [0, 0, 0])], chart: chart(), page: page(), theme,
    axis: { unit: '%' } });
  assert.ok(flatZero.layout.yaxis.range[0] < 0); // a flat 0 keeps its tiny symmetric range
});

test('a flat whole-number counter ticks at least three integers around its value; a flat 0 keeps its "0"', () => {
  // The demo's Microbatches: 4 at every step. Padded to 3.8–4.2 it had one tick, "4".
  const micro = buildFigure({ entry: entry({ kind: 'timeline', key: 'timing_microbatch_count' }), runs: [run(1, [4, 4, 4])],
    chart: chart(), page: page(), theme, axis: { unit: 'microbatches', integer: true } });
  assert.deepEqual(micro.layout.yaxis.range, [3, 5]);
  assert.equal(micro.layout.yaxis.dtick, 1); // ticks 3, 4, 5
  assert.equal(micro.layout.yaxis.tickformat, ',d');
  // Whole values without the registry's word count too; a flag stuck at 1 ticks 0, 1, 2.
  const one = buildFigure({ entry: entry(), runs: [run(1, [1, 1])], chart: chart(), page: page(), theme });
  assert.deepEqual(one.layout.yaxis.range, [0, 2]);
  const negative = buildFigure({ entry: entry(), runs: [run(1, [-7, -7])], chart: chart(), page: page(), theme });
  assert.deepEqual(negative.layout.yaxis.range, [-8, -6]);
  // Ranges that already hold two whole numbers stay padded as before; so does a flat 0 and a fraction.
  closeRange(buildFigure({ entry: entry(), runs: [run(1, [3, 4])], chart: chart(), page: page(), theme })
    .layout.yaxis.range, [2.8, 4.2]);
  closeRange(buildFigure({ entry: entry(), runs: [run(1, [100, 100])], chart: chart(), page: page(), theme })
    .layout.yaxis.range, [95, 105]);
  closeRange(buildFigure({ entry: entry(), runs: [run(1, [0, 0])], chart: chart(), page: page(), theme })
    .layout.yaxis.range, [-1e-10, 1e-10]);
  closeRange(buildFigure({ entry: entry(), runs: [run(1, [4.5, 4.5])], chart: chart(), page: page(), theme })
    .layout.yaxis.range, [4.275, 4.725]);
  // The user's y min / max still win; a share in % stays within 0–100.
  const bounded = buildFigure({ entry: entry(), runs: [run(1, [4, 4])], chart: chart({ yMin: 0 }), page: page(), theme });
  assert.deepEqual(bounded.layout.yaxis.range, [0, 5]);
  const pct = buildFigure({ entry: entry(), runs: [run(1, [1, 1])], chart: chart(), page: page(), theme, axis: { unit: '%' } });
  assert.deepEqual(pct.layout.yaxis.range, [0, 2]);
  // A composed chart (a family's mean and its environments) alike.
  const e4 = (env) => ({ entry: entry({ kind: 'sample', key: 'turns', stat: 'mean', env }), role: 'line', data: series([4, 4]) });
  const composed = buildComposedFigure({ primary: entry({ kind: 'sample', key: 'turns', stat: 'mean' }), envs: ['a'],
    runs: [{ id: 1, name: 'r', color: '#112233', t0: 1000, firstStep: 0, range: null, members: [e4(null), e4('a')] }],
    chart: chart({ envelope: false }), page: page(), theme });
  assert.deepEqual(composed.layout.yaxis.range, [3, 5]);
});

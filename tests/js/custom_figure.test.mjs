// What a Custom view plot draws (static/js/custom/figure.js): several series, each run's, on
// their axis sides; colours by series for one run, by run (dash by series) for several.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  assignAxes, AXIS_RATIO, buildPlotFigure, colorDistance, seriesColor, SERIES_COLORS,
} from '../../static/js/custom/figure.js';

const theme = { fg: '#000', muted: '#888', grid: '#eee', bg: '#fff', font: 'sans-serif' };
const page = { xaxis: 'step', ema: false, span: 10, normalize: false, maxStep: null, maxTime: null };
const chart = { ignoreOutliers: false, ignoreFirst: false, logY: false, yMin: null, yMax: null, band: true };
const data = (values) => ({ step: values.map((_, i) => i), time: values.map((_, i) => 1000 + i), value: values.slice(),
  bmin: null, bmax: null, downsampled: false });
const line = (values) => ({ data: values ? data(values) : null, std: null, range: null });
const run = (id, lines, over = {}) => ({ id, name: `run-${id}`, color: '#112233', t0: 1000, firstStep: 0, lines, ...over });
const serie = (id, axis = 'auto') => ({ id, name: id, axis, entry: { id, kind: 'step', key: id, stat: null, env: null } });
const raw = (fig) => fig.data.filter((t) => t.meta.role === 'raw');

test('assignAxes: an auto series goes right only when its scale is far from the first left one', () => {
  assert.deepEqual(assignAxes(['auto', 'auto'], [1, 2]), ['left', 'left']);
  assert.deepEqual(assignAxes(['auto', 'auto'], [0.01, 0.01 * AXIS_RATIO]), ['left', 'right']);
  assert.deepEqual(assignAxes(['auto', 'auto', 'auto'], [100, 1, 50]), ['left', 'right', 'left']);
  assert.deepEqual(assignAxes(['right', 'auto'], [100, 1]), ['right', 'left']); // the reference is on the left
  assert.deepEqual(assignAxes(['auto', 'left'], [1, 1000]), ['left', 'left']); // a choice is kept
  assert.deepEqual(assignAxes(['auto', 'auto'], [null, 5]), ['left', 'left']); // no data yet: left
  assert.deepEqual(assignAxes(['auto', 'auto'], [0, 5]), ['left', 'left']); // all zero: fits anywhere
});

test('two series of one run: their own colours, the far one on a right axis with its own range', () => {
  const fig = buildPlotFigure({ series: [serie('kl_mean'), serie('kl_max')],
    runs: [run(1, [line([0.01, 0.02, 0.03]), line([1, 3, 2])])], chart, page, theme });
  const [a, b] = raw(fig);
  assert.deepEqual([a.name, b.name], ['kl_mean', 'kl_max']);
  assert.deepEqual([a.line.color, b.line.color], ['#112233', seriesColor(1, '#112233')]);
  assert.deepEqual([a.yaxis, b.yaxis], ['y', 'y2']);
  assert.deepEqual(fig.sides, ['left', 'right']);
  assert.equal(fig.layout.yaxis2.side, 'right');
  assert.equal(fig.layout.yaxis2.overlaying, 'y');
  assert.ok(fig.layout.yaxis.range[1] < 0.05 && fig.layout.yaxis2.range[1] > 3);
  assert.equal(fig.points, 6);
  assert.deepEqual(fig.prepared.map((p) => p.run.id), [1]); // the first series, per run
});

test('series of one scale share the left axis; no right axis is drawn', () => {
  const fig = buildPlotFigure({ series: [serie('a'), serie('b')],
    runs: [run(1, [line([1, 2]), line([2, 3])])], chart, page, theme });
  assert.deepEqual(raw(fig).map((t) => t.yaxis), ['y', 'y']);
  assert.equal(fig.layout.yaxis2, undefined);
});

test('several runs: colour by run, dash by series; names say both', () => {
  const fig = buildPlotFigure({ series: [serie('a'), serie('b')],
    runs: [run(1, [line([1, 2]), line([2, 3])]), run(2, [line([1, 1]), line(null)], { color: '#abcdef' })],
    chart, page, theme });
  const t = raw(fig);
  assert.deepEqual(t.map((x) => [x.meta.run, x.meta.series, x.line.color, x.line.dash]), [
    [1, 'a', '#112233', 'solid'], [2, 'a', '#abcdef', 'solid'], [1, 'b', '#112233', 'dot']]);
  assert.equal(t[1].name, 'run-2 · a');
});

test('a series is never drawn in a colour like its run\'s', () => {
  assert.equal(seriesColor(0, SERIES_COLORS[0]), SERIES_COLORS[0]);
  assert.equal(seriesColor(1, '#112233'), SERIES_COLORS[0]);
  for (const own of ['#4e79a7', '#1f77b4', '#f28e2b', '#59a14f', '#e15759']) { // runs' own colours
    for (let i = 1; i < 6; i++) assert.ok(colorDistance(seriesColor(i, own), own) >= 90, `${own} ${i}`);
  }
  assert.equal(colorDistance('#000000', 'not a colour'), Infinity);
});

test('a plot of several series draws no std band; one series keeps it', () => {
  const std = { ...data([0.1, 0.1]) };
  const one = buildPlotFigure({ series: [serie('a')], runs: [run(1, [{ ...line([1, 2]), std }])], chart, page, theme });
  assert.ok(one.data.some((t) => t.meta.role === 'band'));
  const two = buildPlotFigure({ series: [serie('a'), serie('b')],
    runs: [run(1, [{ ...line([1, 2]), std }, { ...line([1, 3]), std }])], chart, page, theme });
  assert.ok(!two.data.some((t) => t.meta.role === 'band'));
});

test('y min / max and log apply to the left axis; the right one scales itself', () => {
  const fig = buildPlotFigure({ series: [serie('a'), serie('b')],
    runs: [run(1, [line([1, 2]), line([100, 300])])], chart: { ...chart, yMin: 0, yMax: 5 }, page, theme });
  assert.deepEqual(fig.layout.yaxis.range, [0, 5]);
  assert.ok(fig.layout.yaxis2.range[0] > 5);
});

// The state strip of a categorical step key (static/js/charts/states.js) and the store's handling of
// string values (live merge, no pairwise compaction).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  buildStateFigure, discreteScale, STATE_COLORS, stateCounts, stateRuns, stripCells, valueOrder,
} from '../../static/js/charts/states.js';
import { mergePoints } from '../../static/js/charts/transforms.js';

const theme = { fg: '#000', muted: '#888', grid: '#eee', bg: '#fff', font: 'sans-serif' };
const page = (over = {}) => ({ xaxis: 'step', ema: true, span: 10, normalize: true, maxStep: null, maxTime: null, ...over });
const series = (values, steps = values.map((_, i) => i)) => ({
  step: steps, time: steps.map((s) => 1000 + s), value: values, bmin: null, bmax: null, downsampled: false });
const run = (id, values, steps) => ({ id, name: `run-${id}`, color: '#123456', data: series(values, steps), t0: 1000 });

test('bands are runs of equal consecutive values; a state lasts until the next point', () => {
  const bands = stateRuns([0, 1, 2, 3, 5, 6], ['a', 'a', 'b', 'a', 'a', 'c']);
  assert.deepEqual(bands.map((b) => [b.value, b.first, b.last, b.end, b.n]), [
    ['a', 0, 1, 1.5, 2], ['b', 2, 2, 2.5, 1], ['a', 3, 5, 5.5, 2], ['c', 6, 6, 6.5, 1]]);
});

test('a null value ends a band and leaves a gap', () => {
  const bands = stateRuns([0, 1, 2, 3], ['a', null, 'a', 'a']);
  assert.deepEqual(bands.map((b) => [b.value, b.first, b.last, b.end]), [['a', 0, 0, 0.5], ['a', 2, 3, 3.5]]);
  const cells = stripCells(bands, new Map([['a', 0]]));
  assert.deepEqual(cells.x, [-0.5, 0.5, 1.5, 3.5]);
  assert.deepEqual(cells.z, [0, null, 0]);
  assert.deepEqual(cells.text, ['a · step 0 (1)', '', 'a · steps 2–3 (2)']);
});

test('counts per value and a value order that keeps the first run\'s first', () => {
  assert.deepEqual([...stateCounts(['x', 'y', 'x', null, 'x'])], [['x', 3], ['y', 1]]);
  assert.deepEqual(valueOrder([['b', 'a'], ['c', 'a']]), ['b', 'a', 'c']);
});

test('a discrete colorscale gives each code its own colour', () => {
  assert.deepEqual(discreteScale(['#111111']), [[0, '#111111'], [1, '#111111']]);
  assert.deepEqual(discreteScale(['#1', '#2']), [[0, '#1'], [0.5, '#1'], [0.5, '#2'], [1, '#2']]);
});

test('the figure: one strip row per run, hover naming the value, legend with counts', () => {
  const a = run(1, ['applied', 'applied', 'skipped', 'applied']);
  const b = run(2, ['applied', 'nan_grad'], [0, 1]);
  b.name = '<b>b</b>';
  const fig = buildStateFigure({ runs: [a, b], page: page(), theme });
  assert.equal(fig.data.length, 2);
  const [ra, rb] = fig.data;
  assert.equal(ra.type, 'heatmap');
  assert.deepEqual(ra.z, [[0, 1, 0]]);
  assert.deepEqual(ra.x, [-0.5, 1.5, 2.5, 3.5]);
  assert.deepEqual(ra.text, [['applied · steps 0–1 (2)', 'skipped · step 2 (1)', 'applied · step 3 (1)']]);
  assert.deepEqual(rb.z, [[0, 2]]);
  assert.equal(rb.hovertemplate, '%{text}<extra>&lt;b&gt;b&lt;/b&gt;</extra>');
  assert.deepEqual(ra.meta.values, ['applied', 'skipped', 'nan_grad']);
  assert.deepEqual(ra.meta.colors, STATE_COLORS.slice(0, 3));
  assert.deepEqual(fig.legend.map((r) => r.items.map((i) => [i.value, i.count])),
    [[['applied', 3], ['skipped', 1]], [['applied', 1], ['nan_grad', 1]]]);
  assert.deepEqual(fig.layout.yaxis.range, [1.5, -0.5]); // first run on top
  assert.equal(fig.layout.yaxis.showticklabels, true);
  assert.equal(fig.points, 6);
  assert.equal(fig.layout.hovermode, 'closest');
});

test('max step limits the strip; EMA and normalize do not apply', () => {
  const fig = buildStateFigure({ runs: [run(1, ['a', 'b', 'b', 'c'])], page: page({ maxStep: 2 }), theme });
  assert.deepEqual(fig.data[0].z, [[0, 1]]);
  assert.deepEqual(fig.legend[0].items.map((i) => [i.value, i.count]), [['a', 1], ['b', 2]]);
  assert.equal(fig.layout.yaxis.showticklabels, false);
  const none = buildStateFigure({ runs: [{ ...run(1, []), data: null }], page: page(), theme });
  assert.equal(none.data.length, 0);
  assert.equal(none.points, 0);
});

test('live string points merge in place and are never compacted away', () => {
  const s = series(['a', 'a']);
  assert.equal(mergePoints(s, { step: [2, 1], time: [3, 2], value: ['b', 'c'] }, Infinity), 2);
  assert.deepEqual(s.value, ['a', 'c', 'b']);
  mergePoints(s, { step: [1], time: [2], value: [null] }, Infinity);
  assert.deepEqual(s.step, [0, 2]);
});

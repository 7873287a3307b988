// The run legend of a chart and its focus (static/js/charts/legend.js): which runs it names, how the
// other runs dim, which run the pointer is on.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DIM, focusOpacities, nearestRun, runLegendItems } from '../../static/js/charts/legend.js';
import { buildFigure } from '../../static/js/charts/traces.js';

test('overlaid runs are named with their colours; a single run needs no legend', () => {
  const runs = [{ id: 1, name: 'a', color: '#111111', data: {} }, { id: 2, name: '<b>', color: '#222222' }];
  assert.deepEqual(runLegendItems(runs), [{ id: 1, name: 'a', color: '#111111' }, { id: 2, name: '<b>', color: '#222222' }]);
  assert.deepEqual(runLegendItems(runs.slice(0, 1)), []);
  assert.deepEqual(runLegendItems([]), []);
});

test('focusing a run dims every other run\'s traces and keeps faint lines fainter', () => {
  const traces = [
    { meta: { run: 1, role: 'raw' }, opacity: 0.3 }, { meta: { run: 1, role: 'ema' } },
    { meta: { run: 2, role: 'raw' } }, { meta: { run: 2, role: 'last' } }, { meta: {} },
  ];
  assert.deepEqual(focusOpacities(traces, null), [0.3, 1, 1, 1, 1]);
  assert.deepEqual(focusOpacities(traces, 1), [0.3, 1, DIM, DIM, 1]);
  assert.deepEqual(focusOpacities(traces, 2), [0.3 * DIM, DIM, 1, 1, 1]);
  assert.ok(DIM > 0 && DIM < 0.5);
});

test('the run under the pointer: the nearest point within reach, vertically', () => {
  const pts = [{ run: 1, y: 100 }, { run: 2, y: 140 }, { run: 3, y: NaN }];
  assert.equal(nearestRun(pts, 104), 1);
  assert.equal(nearestRun(pts, 130), 2);
  assert.equal(nearestRun(pts, 300), null); // far from every line
  assert.equal(nearestRun([], 100), null);
});

test('the legend\'s runs are the runs a figure draws', () => {
  const series = (v) => ({ step: v.map((_, i) => i), time: v.map((_, i) => i), value: v, bmin: null, bmax: null });
  const run = (id, data) => ({ id, name: `r${id}`, color: '#123456', data, std: null, range: null, t0: 0, firstStep: 0 });
  const fig = buildFigure({ entry: { kind: 'step' }, runs: [run(1, series([1, 2])), run(2, null), run(3, series([3]))],
    chart: { logY: false, yMin: null, yMax: null }, page: { xaxis: 'step' }, theme: { bg: '#fff', muted: '#888' } });
  assert.deepEqual(runLegendItems(fig.prepared.map((p) => p.run)).map((r) => r.id), [1, 3]);
});

// The page's three smoothers (static/js/charts/transforms.js; docs/statistics.md "Smoothing"):
// EMA, running mean, Gaussian, on inputs whose results are worked out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  checkSmoothing, ema, gaussian, runningMean, smooth, smoothingName, SMOOTHERS,
} from '../../static/js/charts/transforms.js';

const near = (got, want, eps = 1e-9) => {
  assert.equal(got.length, want.length);
  got.forEach((g, i) => {
    if (want[i] === null) assert.equal(g, null, `index ${i}: ${g} is not null`);
    else assert.ok(Math.abs(g - want[i]) <= eps, `index ${i}: ${g} != ${want[i]}`);
  });
};

test('the running mean is the mean of the last span accepted values, fewer at the start', () => {
  near(runningMean([1, 2, 3, 4, 5], 3), [1, 1.5, 2, 3, 4]);
  near(runningMean([4, 8], 10), [4, 6]); // a window longer than the line: what there is
  // span below 2 is 2 (the control's range)
  near(runningMean([1, 3, 5], 1), [1, 2, 4]);
});

test('the running mean skips rejected and non-finite points and carries the last mean there', () => {
  // an outlier at 1: windows [1], –, [1, 3], [3, 5], [5, 7]
  near(runningMean([1, 100, 3, 5, 7], 2, [true, false, true, true, true]), [1, 1, 2, 4, 6]);
  near(runningMean([NaN, 2, Infinity, 4], 2), [null, 2, 2, 3]);
  near(runningMean([5, 6], 3, [false, false]), [null, null]);
});

test('the Gaussian is centred: weights exp(-d²/2σ²) over ±⌊span/2⌋ points, σ half of that', () => {
  // span 4: reach 2, σ = 1; weights 1, e^-1/2 = 0.60653066, e^-2 = 0.13533528
  near(gaussian([0, 0, 10, 0, 0], 4), [
    0.776955791485706, // i = 0: window cut to 0..2, 10·e^-2 / (1 + e^-1/2 + e^-2)
    2.5827437283171766, // i = 1: 0..3, 10·e^-1/2 / (1 + 2e^-1/2 + e^-2)
    4.026199468942475, // i = 2: 10 / (1 + 2e^-1/2 + 2e^-2)
    2.5827437283171766,
    0.776955791485706,
  ]);
  // span 2 (and 3): reach 1, σ = 1/2; weights 1, e^-2
  near(gaussian([0, 0, 3, 0, 0], 2).slice(2, 3), [2.3609581264847956]); // 3 / (1 + 2e^-2)
  near(gaussian([0, 0, 3, 0, 0], 3), gaussian([0, 0, 3, 0, 0], 2));
  near(gaussian([2, 2, 2, 2], 10), [2, 2, 2, 2]); // a flat line stays flat, ends included
});

test('the Gaussian leaves rejected points out of every window and fills them from neighbours', () => {
  // the outlier at 1 never counts; there the mean of its neighbours 1 and 3 (equal weights)
  near(gaussian([1, 100, 3], 2, [true, false, true]), [1, 2, 3]);
  // no accepted point within reach: null
  near(gaussian([NaN, NaN, NaN, 5], 2), [null, null, 5, 5]);
});

test('smooth picks the smoother by name; anything else is the EMA', () => {
  const v = [4, 2, 6, 1, 9];
  const accept = [true, true, false, true, true];
  assert.deepEqual(smooth('ema', v, 3, accept), ema(v, 3, accept));
  assert.deepEqual(smooth('mean', v, 3, accept), runningMean(v, 3, accept));
  assert.deepEqual(smooth('gauss', v, 3, accept), gaussian(v, 3, accept));
  assert.deepEqual(smooth('cubic', v, 3, accept), ema(v, 3, accept));
  assert.deepEqual(smooth(undefined, v, 3), ema(v, 3));
  assert.deepEqual(Object.keys(SMOOTHERS), ['ema', 'mean', 'gauss']);
  assert.equal(checkSmoothing('__proto__'), 'ema');
  assert.equal(checkSmoothing('toString'), 'ema');
  assert.equal(smoothingName({ smoothing: 'gauss' }), 'Gaussian');
  assert.equal(smoothingName({}), 'EMA');
});

test('a chart draws the page\'s smoother over what it shows, named after it', async () => {
  const { buildFigure } = await import('../../static/js/charts/traces.js');
  const theme = { fg: '#000', muted: '#888', grid: '#eee', bg: '#fff', font: 'sans-serif' };
  const values = [1, 100, 3, 5, 7, 9];
  const run = { id: 1, name: 'run-1', color: '#112233', std: null, t0: 1000, firstStep: 0,
    data: { step: [0, 1, 2, 3, 4, 5], time: [1000, 1010, 1020, 1030, 1040, 1050], value: values,
      bmin: null, bmax: null, downsampled: false } };
  const chart = { ignoreOutliers: true, ignoreFirst: false, logY: false, yMin: null, yMax: null, band: false };
  const page = (smoothing) => ({ xaxis: 'step', ema: true, smoothing, span: 2, normalize: false,
    maxStep: 4, maxTime: null });
  const drawn = (smoothing) => buildFigure({ entry: { id: 'step|x||', kind: 'step', key: 'x', stat: null, env: null },
    runs: [run], chart, page: page(smoothing), theme }).data.find((t) => t.meta.role === 'ema');
  // steps 0..4 (max step), 100 an outlier (beyond Q3 + 6·IQR of 1, 100, 3, 5, 7): left out
  const accept = [true, false, true, true, true];
  const shown = values.slice(0, 5);
  assert.deepEqual(drawn('mean').y, [1, 1, 2, 4, 6]);
  assert.equal(drawn('mean').name, 'run-1 running mean');
  near(drawn('gauss').y, gaussian(shown, 2, accept));
  assert.equal(drawn('gauss').name, 'run-1 Gaussian');
  assert.deepEqual(drawn('ema').y, ema(shown, 2, accept));
  assert.equal(drawn('ema').name, 'run-1 EMA');
});

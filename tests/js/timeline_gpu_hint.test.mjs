// The Performance page's health hint "GPU utilisation low while the run is busy"
// (static/js/timeline/perf.js gpuIdleHint): it fires on the last busy whole buckets only, with
// the evidence it fired on, and stays quiet when the GPUs are busy, the run is idle, the
// readings are missing or only the filling bucket says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { GPU_HINT, gpuIdleHint } from '../../static/js/timeline/perf.js';

const B = 60;
const T0 = 1_700_000_040; // a multiple of 60

/** Buckets of the given busy shares (trainer working %), the last one partial if asked. */
function perf(busy, { partialLast = false } = {}) {
  return {
    bucket: B,
    time: busy.map((_, i) => T0 + i * B),
    partial: busy.map((_, i) => partialLast && i === busy.length - 1),
    series: { trainer_working_pct: busy, inference_utilization_pct: busy.map(() => 0) },
  };
}

/** One gauge line per device: a reading every 10 s of each bucket at the given utilisation. */
function gauges(utils, devices = 2) {
  const lines = [];
  for (let d = 0; d < devices; d++) {
    const time = [];
    const value = [];
    utils.forEach((u, i) => {
      for (let s = 0; s < B; s += 10) { time.push(T0 + i * B + s); value.push(u); }
    });
    lines.push({ host: 'node-1', device: d, time, value });
  }
  return { [GPU_HINT.gauge]: lines };
}

test('low GPU utilisation over the last busy buckets fires, with its evidence', () => {
  const hint = gpuIdleHint(perf([90, 90, 90, 90]), gauges([80, 12, 10, 14]));
  assert.ok(hint);
  assert.equal(hint.buckets, 3);
  assert.equal(hint.from, T0 + B);
  assert.equal(hint.gpu, 12);
  assert.equal(hint.busy, 90);
  assert.match(hint.message, /12% on average over the last 3 busy buckets/);
});

test('busy GPUs, an idle run, missing readings or only the filling bucket: no hint', () => {
  assert.equal(gpuIdleHint(perf([90, 90, 90]), gauges([80, 70, 75])), null);
  assert.equal(gpuIdleHint(perf([10, 20, 5]), gauges([5, 5, 5])), null);
  assert.equal(gpuIdleHint(perf([90, 90, 90]), {}), null);
  // the filling bucket is left out: two whole busy buckets are not enough
  assert.equal(gpuIdleHint(perf([90, 90, 90], { partialLast: true }), gauges([5, 5, 5])), null);
  // one busy bucket of the last three has the GPUs at work
  assert.equal(gpuIdleHint(perf([90, 90, 90, 90]), gauges([5, 5, 50, 5])), null);
});

test('idle buckets between busy ones are skipped, not counted', () => {
  const hint = gpuIdleHint(perf([90, 10, 90, 10, 90]), gauges([20, 99, 20, 99, 20]));
  assert.ok(hint);
  assert.equal(hint.from, T0);
  assert.equal(hint.gpu, 20);
});

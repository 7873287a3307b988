// Pure transforms of the Metrics page (static/js/charts/transforms.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  acceptMask, alignByStep, autoscale, autoscalePad, clampSpan, compact, ema, emaAlpha, extent,
  firstStepTime, fromPayload, limitIndices, lowerBound, mergePoints, outlierBounds, padRange,
  positiveExtent, quantile, spliceDetail, timeAxis, timeUnit,
} from '../../static/js/charts/transforms.js';

const close = (a, b, eps = 1e-12) => assert.ok(Math.abs(a - b) <= eps, `${a} != ${b}`);

test('span is clamped to 2..100 with default 10, alpha = 2/(span+1)', () => {
  assert.equal(clampSpan(1), 2);
  assert.equal(clampSpan(1000), 100);
  assert.equal(clampSpan('abc'), 10);
  assert.equal(clampSpan(7.4), 7);
  close(emaAlpha(10), 2 / 11);
  close(emaAlpha(3), 0.5);
});

test('ema is seeded with the first accepted value', () => {
  const out = ema([4, 2, 6], 3);
  assert.deepEqual(out, [4, 3, 4.5]);
});

test('ema skips rejected points and carries the previous value there', () => {
  // first point rejected (ignored first step), third an outlier
  const out = ema([100, 2, 1000, 4], 3, [false, true, false, true]);
  assert.deepEqual(out, [null, 2, 2, 3]);
});

test('ema never accepts non-finite values', () => {
  assert.deepEqual(ema([NaN, 1, Infinity, 3], 3), [null, 1, 1, 2]);
});

test('quantile interpolates linearly like numpy', () => {
  const s = [1, 2, 3, 4];
  close(quantile(s, 0.25), 1.75);
  close(quantile(s, 0.75), 3.25);
  close(quantile([5], 0.25), 5);
});

test('outlier bounds are Q1 - 6 IQR and Q3 + 6 IQR, and need four values', () => {
  assert.equal(outlierBounds([1, 2, 3]), null);
  const b = outlierBounds([1, 2, 3, 4, NaN]);
  close(b.lo, 1.75 - 6 * 1.5);
  close(b.hi, 3.25 + 6 * 1.5);
  const values = [1, 1.1, 0.9, 1.05, 0.95, 50];
  const mask = acceptMask(values, outlierBounds(values));
  assert.deepEqual(mask, [true, true, true, true, true, false]);
});

test('time axis counts from the end of the first step', () => {
  const first = firstStepTime([3, 1, 2], [130, 100, 115]);
  assert.deepEqual(first, { step: 1, time: 100 });
  assert.deepEqual(timeAxis([100, 160, 220], first.time, timeUnit(120)), [0, 1, 2]);
  assert.equal(timeUnit(30).unit, 's');
  assert.equal(timeUnit(3600).unit, 'min');
  assert.equal(timeUnit(86400).unit, 'h');
});

test('extent and padRange', () => {
  assert.deepEqual(extent([1, null, 5], [NaN, -2]), [-2, 5]);
  assert.equal(extent([null]), null);
  // Telescope's rule: pad = max(10% of the range, 5% of |max|, 1e-10), both sides.
  assert.deepEqual(padRange([0, 10]), [-1, 11]); // 10% of the range wins
  assert.deepEqual(padRange([2, 2]), [1.9, 2.1]); // a flat line: 5% of |max|
  close(padRange([99, 100])[0], 94, 1e-9); // 5% of |max| (5) beats 10% of the range (0.1)
  close(padRange([99, 100])[1], 105, 1e-9);
  assert.deepEqual(padRange([0, 0]), [-1e-10, 1e-10]); // all zero: the floor
  assert.deepEqual(padRange([-10, -8]), [-10.4, -7.6]); // |max| = 8: 0.4 beats 0.2
});

test('autoscale pads an extent, with zero in it when asked (advantage charts)', () => {
  assert.equal(autoscale(null), null);
  assert.deepEqual(autoscale([0, 10]), [-1, 11]);
  const adv = autoscale([0.5, 1.5], { includeZero: true }); // [0, 1.5]: pad 0.15
  close(adv[0], -0.15);
  close(adv[1], 1.65);
  const neg = autoscale([-3, -1], { includeZero: true }); // [-3, 0]: pad max(0.3, 0, 1e-10)
  close(neg[0], -3.3);
  close(neg[1], 0.3);
  assert.equal(autoscalePad([5, 5]), 0.25);
  assert.deepEqual(positiveExtent([-1, 0, 2, 8], null, [NaN, 0.5]), [0.5, 8]);
  assert.equal(positiveExtent([-1, 0]), null);
});

test('lowerBound finds the insertion point', () => {
  assert.equal(lowerBound([1, 3, 5], 3), 1);
  assert.equal(lowerBound([1, 3, 5], 4), 2);
  assert.equal(lowerBound([1, 3, 5], 9), 3);
});

const raw = () => fromPayload({ step: [0, 1, 2], time: [10, 11, 12], value: [5, 6, 7], downsampled: false });

test('mergePoints appends, replaces and withdraws points by step', () => {
  const s = raw();
  mergePoints(s, { step: [3, 1, 2], time: [13, 11.5, 12], value: [8, 60, null] });
  assert.deepEqual(s.step, [0, 1, 3]);
  assert.deepEqual(s.value, [5, 60, 8]);
  assert.deepEqual(s.time, [10, 11.5, 13]);
  assert.equal(s.bmin, null);
});

test('mergePoints inserts an out-of-order step in place', () => {
  const s = fromPayload({ step: [0, 4], time: [0, 4], value: [1, 2], downsampled: false });
  mergePoints(s, { step: [2], time: [2], value: [9] });
  assert.deepEqual(s.step, [0, 2, 4]);
  assert.deepEqual(s.value, [1, 9, 2]);
});

test('mergePoints widens the band of a downsampled bucket instead of inserting', () => {
  const s = fromPayload({ step: [0, 10, 20], time: [0, 10, 20], value: [1, 2, 3], downsampled: true,
    bucket_min: [1, 2, 3], bucket_max: [1.5, 2.5, 3] });
  mergePoints(s, { step: [15, 25], time: [15, 25], value: [-4, 9] });
  assert.deepEqual(s.step, [0, 10, 20, 25]);
  assert.deepEqual(s.bmin, [1, -4, 3, 9]);
  assert.deepEqual(s.bmax, [1.5, 2.5, 3, 9]);
});

test('mergePoints compacts a series that outgrows twice maxPoints, keeping every extreme', () => {
  const s = fromPayload({ step: [], time: [], value: [], downsampled: false });
  const n = 41;
  const values = Array.from({ length: n }, (_, i) => Math.sin(i) * i);
  mergePoints(s, { step: [...values.keys()], time: [...values.keys()], value: values }, 10);
  assert.ok(s.step.length <= 21, `length ${s.step.length}`);
  assert.equal(s.downsampled, true);
  assert.equal(Math.min(...s.bmin), Math.min(...values));
  assert.equal(Math.max(...s.bmax), Math.max(...values));
  assert.equal(s.step.at(-1), n - 1);
  assert.equal(s.value.at(-1), values.at(-1));
  for (let i = 1; i < s.step.length; i++) assert.ok(s.step[i] > s.step[i - 1]);
});

test('compact alternates the low and the high point of each pair', () => {
  const s = { step: [0, 1, 2, 3, 4], time: [0, 1, 2, 3, 4], value: [5, 1, 2, 9, 7], bmin: null, bmax: null };
  compact(s);
  assert.deepEqual(s.step, [1, 3, 4]);
  assert.deepEqual(s.value, [1, 9, 7]);
  assert.deepEqual(s.bmin, [1, 2, 7]);
  assert.deepEqual(s.bmax, [5, 9, 7]);
});

test('spliceDetail swaps the zoomed window for finer points', () => {
  const over = fromPayload({ step: [0, 10, 20, 30], time: [0, 10, 20, 30], value: [0, 1, 2, 3],
    downsampled: true, bucket_min: [0, 1, 2, 3], bucket_max: [0, 1, 2, 3] });
  const detail = fromPayload({ step: [10, 11, 12], time: [10, 11, 12], value: [1, 1.1, 1.2], downsampled: false });
  const out = spliceDetail(over, detail, 10, 19);
  assert.deepEqual(out.step, [0, 10, 11, 12, 20, 30]);
  assert.deepEqual(out.bmin, [0, 1, 1.1, 1.2, 2, 3]);
  assert.deepEqual(over.step, [0, 10, 20, 30]);
});

test('limitIndices applies max step and max time since t0', () => {
  const s = raw();
  assert.deepEqual(limitIndices(s, { maxStep: 1 }), [0, 1]);
  assert.deepEqual(limitIndices(s, { maxTime: 1, t0: 10 }), [0, 1]);
  assert.deepEqual(limitIndices(s, {}), [0, 1, 2]);
});

test('alignByStep lines a std series up with mean steps', () => {
  assert.deepEqual(alignByStep([0, 1, 2], { step: [0, 2], value: [0.5, 0.7] }), [0.5, null, 0.7]);
});

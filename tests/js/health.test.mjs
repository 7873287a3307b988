// Health hints (static/js/charts/health.js): each rule of the registry's hints fires on constructed
// data that shows the problem and stays quiet on data that does not.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { evaluate, hintKeys } from '../../static/js/charts/health.js';
import { hintsFor } from '../../static/js/core/registry.js';

const run = (key, values, context = {}, others = {}) => evaluate(hintsFor(key), { [key]: values, ...others }, context);
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));

test('clip_frac and ratio_absdev must be exactly 0 when n_mini == 1', () => {
  for (const key of ['train/clip_frac', 'train/ratio_absdev', 'clip_frac']) {
    const [hit, ...more] = run(key, [0, 0, 0.01, 0], { config: { n_mini: 1 } });
    assert.equal(more.length, 0);
    assert.equal(hit.step, 2);
    assert.match(hit.message, /^Not 0 at step 2 with n_mini == 1/);
    assert.deepEqual(run(key, [0, 0, 0, 0], { config: { n_mini: 1 } }), [], `${key}: zeros are healthy`);
    assert.deepEqual(run(key, [0.02, 0.01], { config: { n_mini: 4 } }), [], `${key}: n_mini > 1 clips`);
    assert.deepEqual(run(key, [0.02, 0.01], { config: {} }), [], `${key}: n_mini unknown`);
    assert.deepEqual(run(key, [0.02, 0.01], { config: null }), []);
    assert.deepEqual(run(key, [0.02, 0.01]), []);
  }
  assert.equal(run('train/clip_frac', [0, 0.5], { config: { rl: { n_mini: 1 } } }).length, 1, 'nested rl.n_mini');
  assert.equal(run('train/clip_frac', [null, NaN, 0], { config: { n_mini: 1 } }).length, 0, 'non-finite values are no values');
});

test('kl_mean is exactly 0 without a reference (kl_beta == 0)', () => {
  assert.equal(run('train/kl_mean', [0, 0.003], { config: { rl: { kl_beta: 0 } } }).length, 1);
  assert.deepEqual(run('train/kl_mean', [0, 0], { config: { rl: { kl_beta: 0 } } }), []);
  assert.deepEqual(run('train/kl_mean', [0.01, 0.003], { config: { rl: { kl_beta: 0.05 } } }), []);
});

test('informative groups near 0 for the last steps: the reward does not discriminate', () => {
  const key = 'train/grpo_informative_group_count';
  const groups = { 'train/grpo_group_count': range(8, () => 64) };
  const [hit] = run(key, [30, 20, 12, 3, 2, 0, 1, 0], {}, groups); // ≤ 5% of 64 for the last 5
  assert.equal(hit.step, 7);
  assert.match(hit.message, /^Near 0 for the last 5 steps \(0 at step 7\): the reward does not discriminate/);
  assert.deepEqual(run(key, [30, 20, 12, 3, 2, 0, 4, 0], {}, groups), [], '4 of 64 is not near 0');
  assert.deepEqual(run(key, [30, 20, 12, 9, 8, 7, 6, 5], {}, groups), []);
  // Without the group count, near 0 is 0.
  assert.equal(run(key, [5, 0, 0, 0, 0, 0]).length, 1);
  assert.deepEqual(run(key, [5, 0, 0, 1, 0, 0]), []);
  assert.deepEqual(run(key, [0, 0, 0, 0]), [], 'fewer steps than the window');
  // Steps align across keys: group counts of other steps are not used.
  const at = (steps, value) => ({ step: steps, value: steps.map(value) });
  const informative = at([10, 11, 12, 13, 14], () => 2);
  assert.equal(evaluate(hintsFor(key), { [key]: informative, 'train/grpo_group_count': at([10, 11, 12, 13, 14], () => 64) }).length, 1);
  assert.deepEqual(evaluate(hintsFor(key), { [key]: informative, 'train/grpo_group_count': at([10, 11, 12, 13, 14], () => 8) }), []);
});

test('kl_max far above kl_mean with a grad_norm jump at the same step: one token owns the step', () => {
  const n = 20;
  const klMean = range(n, () => 0.01);
  const quiet = range(n, (i) => 0.03 + 0.001 * i);
  const spike = quiet.map((v, i) => (i === 15 ? 2.0 : v)); // 200 x the mean
  const grad = range(n, (i) => 1 + 0.05 * (i % 3));
  const jumped = grad.map((v, i) => (i === 15 ? 6 : v));
  const both = { 'train/kl_mean': klMean, 'train/grad_norm': jumped };
  const [hit] = run('train/kl_max', spike, {}, both);
  assert.equal(hit.step, 15);
  assert.match(hit.message, /^Step 15: kl_max is 200× kl_mean while grad_norm jumped 5\.\d+× its recent median: one token owns the step/);
  assert.deepEqual(run('train/kl_max', spike, {}, { 'train/kl_mean': klMean, 'train/grad_norm': grad }), [], 'no grad_norm jump');
  assert.deepEqual(run('train/kl_max', quiet, {}, both), [], 'kl_max close to kl_mean');
  const later = jumped.map((v, i) => (i === 16 ? 6 : i === 15 ? 1 : v));
  assert.deepEqual(run('train/kl_max', spike, {}, { 'train/kl_mean': klMean, 'train/grad_norm': later }), [], 'not the same step');
  assert.deepEqual(run('train/kl_max', spike, {}, { 'train/kl_mean': klMean }), [], 'grad_norm not logged');
  assert.deepEqual(run('train/kl_max', spike, {}, { 'train/kl_mean': range(n, () => 0), 'train/grad_norm': jumped }), [],
    'no reference: kl_mean 0');
  // Bare keys read bare refs.
  assert.equal(run('kl_max', spike, {}, { kl_mean: klMean, grad_norm: jumped }).length, 1);
});

test('non-finite optimizer skips rising, and in a row', () => {
  const [hit] = run('optim/nonfinite_skips_total', [0, 0, 0, 1, 1, 3]);
  assert.equal(hit.step, 3);
  assert.equal(hit.count, 3);
  assert.match(hit.message, /^Rising: 3 update\(s\) rejected for a non-finite loss or gradient, first at step 3$/);
  assert.deepEqual(run('optim/nonfinite_skips_total', [2, 2, 2, 2]), [], 'a flat counter');
  assert.deepEqual(run('optim/nonfinite_skips_total', [0]), []);
  assert.equal(run('optim/nonfinite_skips_consecutive', [0, 1, 2]).length, 1);
  assert.deepEqual(run('optim/nonfinite_skips_consecutive', [0, 2, 0]), [], 'recovered');
  // A rising zero-gradient counter is expected in GRPO: no hint.
  assert.deepEqual(run('optim/zero_grad_skips_total', [0, 1, 2, 3, 4]), []);
});

test('a skipped update (categorical outcome) is flagged', () => {
  const [hit] = run('optim/update_outcome', ['applied', 'skipped', 'applied', 'skipped', 'applied']);
  assert.equal(hit.count, 2);
  assert.equal(hit.step, 3);
  assert.deepEqual(run('optim/update_outcome', ['applied', 'accumulating', 'applied']), []);
});

test('trends: DPO accuracy that does not rise, truncation and logprob gap that do', () => {
  const flat = range(20, (i) => 0.5 + 0.01 * (i % 2));
  const rising = range(20, (i) => 0.5 + 0.01 * i);
  assert.match(run('train/dpo_accuracy', flat)[0].message, /^Not rising \(mean 0\.505 → 0\.505/);
  assert.deepEqual(run('train/dpo_accuracy', rising), []);
  assert.deepEqual(run('train/dpo_accuracy', flat.slice(0, 19)), [], 'fewer than two windows');
  assert.equal(run('val/dpo_accuracy', flat).length, 1);
  const cut = range(20, (i) => (i < 10 ? 0.01 : 0.05));
  assert.equal(run('train/rollout_truncated_frac', cut).length, 1);
  assert.deepEqual(run('train/rollout_truncated_frac', range(20, () => 0.02)), []);
  assert.deepEqual(run('train/rollout_truncated_frac', range(20, () => 0)), [], 'never cut');
  assert.equal(run('train/logprob_gap_mean', range(20, (i) => 0.01 * (1 + i))).length, 1);
  assert.deepEqual(run('train/logprob_gap_mean', range(20, () => 0.01)), []);
});

test('the evaluator: steps with values, missing series, unknown rules', () => {
  assert.deepEqual(evaluate(hintsFor('train/clip_frac'), {}, { config: { n_mini: 1 } }), [], 'no series');
  const odd = [{ rule: 'no-such-rule', key: 'x', message: 'never' }];
  assert.deepEqual(evaluate(odd, { x: [1, 2, 3] }), []);
  const hit = evaluate(hintsFor('train/clip_frac'), { 'train/clip_frac': { step: [40, 50, 60], value: [0, 0.2, 0] } },
    { config: { n_mini: 1 } });
  assert.equal(hit[0].step, 50);
  assert.deepEqual(hintKeys(hintsFor('train/kl_max')[0]), ['train/kl_max', 'train/kl_mean', 'train/grad_norm']);
});

// ------------------------------------------------------------------ where the time goes

const steps = (from, values) => ({ step: values.map((_, i) => from + i), value: values });

test('the trainer waiting for data most of its step, for the last 3 steps', () => {
  const total = steps(10, [10, 10, 10, 10, 8]);
  const [hit, ...more] = run('timing_waiting_for_data', steps(10, [1, 2, 6, 7, 5]), {}, { timing_step_total: total });
  assert.equal(more.length, 0);
  assert.equal(hit.step, 14);
  assert.equal(hit.value, 5);
  assert.equal(hit.of, 8);
  assert.equal(hit.pct, 62.5);
  assert.match(hit.message, /^Waiting for data 62\.5% of step 14 \(5 s of 8 s\), over half of each of the last 3 steps: /);
  assert.match(hit.message, /inference is the bottleneck/);
  // One step of the last three at half: not most of each step.
  assert.deepEqual(run('timing_waiting_for_data', steps(10, [1, 2, 5, 7, 5]), {}, { timing_step_total: total }), []);
  assert.deepEqual(run('timing_waiting_for_data', steps(10, [1, 1, 1, 1, 1]), {}, { timing_step_total: total }), []);
  assert.deepEqual(run('timing_waiting_for_data', steps(10, [6, 7]), {}, { timing_step_total: total }), [], 'fewer steps than the window');
  assert.deepEqual(run('timing_waiting_for_data', steps(10, [6, 7, 6, 7, 6])), [], 'no step total to compare with');
  // Only steps that have both count, and a step total of 0 is no step to divide by.
  const gappy = { step: [10, 12, 13, 14], value: [10, 0, 10, 10] };
  assert.deepEqual(run('timing_waiting_for_data', steps(10, [2, 6, 6, 6, 6]), {}, { timing_step_total: gappy }), [],
    'steps 10, 13, 14 only');
  assert.equal(run('timing_waiting_for_data', steps(10, [2, 6, 6, 6, 6]), {},
    { timing_step_total: { step: [10, 11, 12, 13, 14], value: [10, 10, 0, 10, 10] } }).length, 1, 'steps 11, 13, 14');
});

test('inference idle most of the window for the last 3 steps', () => {
  const [hit] = run('timing_idle_pct', [20, 30, 55, 80, 60.25]);
  assert.equal(hit.step, 4);
  assert.match(hit.message, /^Inference idle 60\.3% of the window of step 4, over 50% in each of the last 3 steps: /);
  assert.deepEqual(run('timing_idle_pct', [20, 30, 50, 80, 60]), [], '50% is not over 50%');
  assert.deepEqual(run('timing_idle_pct', [90, 90, 10, 10, 10]), [], 'busy now');
  assert.deepEqual(run('timing_idle_pct', [null, 90, NaN, 90, 90]).length, 1, 'non-finite points are no steps');
});

test('weight sync over a quarter of the step, trainer side and inference side', () => {
  const total = steps(0, [4, 4, 4, 4, 4, 4]);
  for (const key of ['timing_weight_sync_trainer_total', 'timing_weight_sync_inference_total']) {
    // synced at steps 1, 3 and 5 only: those are the last three with both
    const sync = { step: [1, 3, 5], value: [1.2, 1.5, 2] };
    const [hit] = run(key, sync, {}, { timing_step_total: total });
    assert.equal(hit.step, 5, key);
    assert.match(hit.message, /^Weight sync took 50% of step 5 \(2 s of 4 s\), over 25% at each of the last 3 steps with one: /);
    assert.deepEqual(run(key, { step: [1, 3, 5], value: [1.2, 1, 2] }, {}, { timing_step_total: total }), [], `${key}: 25% at step 3`);
    assert.deepEqual(run(key, steps(0, [0.1, 0.2, 0.1, 0.1]), {}, { timing_step_total: total }), [], `${key}: cheap`);
  }
});

test('a straggler rank: the rank spread over 1.5 for the last 3 steps, naming the slowest rank', () => {
  const slowest = steps(0, [0, 3, 3, 3, 5]);
  const [hit] = run('timing_rank_spread', steps(0, [1.1, 1.6, 1.7, 2.5, 1.8]), {}, { timing_slowest_rank: slowest });
  assert.equal(hit.step, 4);
  assert.equal(hit.rank, 5);
  assert.match(hit.message, /^Rank 5 is a straggler: it worked 1\.8× the median rank’s time at step 4, over 1\.5× at each of the last 3 steps: /);
  assert.deepEqual(run('timing_rank_spread', steps(0, [1.1, 1.6, 1.4, 2.5, 1.8]), {}, { timing_slowest_rank: slowest }), []);
  assert.deepEqual(run('timing_rank_spread', steps(0, [1, 1.05, 1.1, 1.02, 1])), []);
  // Without the slowest-rank series the hint still fires, the rank unknown.
  assert.match(run('timing_rank_spread', steps(0, [2, 2, 2]))[0].message, /^Rank \? is a straggler/);
  assert.deepEqual(hintKeys(hintsFor('timing_rank_spread')[0]), ['timing_rank_spread', 'timing_slowest_rank']);
});

// The metric registry (static/js/registry.js): human titles for known keys, none for others.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describe, tooltip } from '../../static/js/registry.js';

test('known keys get a title, a description, unit and aggregation; phases are recognised', () => {
  assert.equal(describe('entropy').title, 'Entropy');
  assert.equal(describe('train/clip_frac').title, 'Clip fraction');
  assert.match(describe('train/clip_frac').description, /n_mini == 1/);
  assert.equal(describe('val/loss_avg').title, 'Loss (validation)');
  assert.equal(describe('loss/policy').title, 'Policy loss');
  assert.equal(describe('train/grad_norm').aggregation, 'last chunk of the window');
});

test('timing keys: total per step or per microbatch', () => {
  assert.deepEqual(describe('timing_forward_total'), { title: 'Forward pass', description: 'Total time of forward pass per step',
    unit: 's', aggregation: 'per step' });
  assert.equal(describe('timing_forward_microbatch_mean').title, 'Forward pass (per microbatch)');
  assert.equal(describe('timing_step_total').title, 'Training step');
  assert.equal(describe('timing_waiting_for_data').title, 'Waiting for data');
  assert.equal(describe('timing_unknown_total'), null);
});

test('unknown keys, inherited names and non-strings are not described', () => {
  for (const key of ['my/custom', 'constructor', 'toString', 'train/constructor', null, 3]) assert.equal(describe(key), null);
});

test('the tooltip says what, how and which key', () => {
  const text = tooltip('entropy', describe('entropy'));
  assert.equal(text, 'Policy entropy over masked token positions\nunit: nats · aggregation: token mean\nkey: entropy');
});

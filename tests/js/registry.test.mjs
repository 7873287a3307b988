// The metric registry (static/js/core/registry.js): every key the seeds' references name is
// described (the key list is read from the spec markdown itself, so a key the registry lacks
// fails here); phases, patterns, unknown keys; hints are data the evaluator knows.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { HINT_RULES } from '../../static/js/charts/health.js';
import { specRows } from './fixtures/spec_keys.mjs';
import { describe, hintsFor, RECORDS, tooltip } from '../../static/js/core/registry.js';

// The seeds live beside the repository (../shared/spec from its root); TELESCOPE_SPEC_DIR points elsewhere.
const SPEC_DIR = process.env.TELESCOPE_SPEC_DIR
  ?? fileURLToPath(new URL('../../../shared/spec/', import.meta.url));
const SPECS = ['telescope-metrics.md', 'posttrain-metrics-reference.md'];

// The key lists, kept in the repository: a clone without the seeds beside it (CI) still
// checks every key; with the seeds present, the list must match them (a changed seed fails here).
const KEY_LIST = fileURLToPath(new URL('./fixtures/spec_keys.json', import.meta.url));

function specKeys() {
  const listed = JSON.parse(readFileSync(KEY_LIST, 'utf8'));
  if (!SPECS.every((name) => existsSync(`${SPEC_DIR}/${name}`))) {
    return listed.map((keys) => ({ keys, meaning: null }));
  }
  const rows = SPECS.flatMap((name) => specRows(readFileSync(`${SPEC_DIR}/${name}`, 'utf8')));
  assert.deepEqual(rows.map((r) => r.keys), listed,
    `${KEY_LIST} is behind the seeds: node tests/js/fixtures/spec_keys.mjs DIR regenerates it`);
  return rows;
}

/** A family key `train/initial_ratio_*` stands for its members: test one. */
const concrete = (key) => key.replace('*', 'mean');

test('the spec tables are found and hold the keys of every family', () => {
  const keys = specKeys().flatMap((r) => r.keys);
  for (const k of ['entropy', 'timing_step_total', 'train/loss_avg', 'train/kl_max', 'train/grpo_informative_group_count',
    'train/policy_total_loss', 'train/dpo_accuracy', 'train/opd_divergence', 'train/optimality_std',
    'train/flow_bc_masked_elements', 'optim/nonfinite_skips_consecutive', 'val/reward_std', 'train/reward_max',
    'train/dpo_err_ref_l', 'train/behavior_logprob_delta_*']) {
    assert.ok(keys.includes(k), `${k} not extracted from the specs`);
  }
  assert.ok(keys.length > 120, `only ${keys.length} keys extracted`);
});

test('every key of both seed references is described: title, description, unit, aggregation', () => {
  for (const { keys, meaning } of specKeys()) {
    for (const key of keys.map(concrete)) {
      const info = describe(key);
      assert.ok(info, `${key} is not in the registry`);
      assert.ok(info.title && info.title !== key, `${key}: no human title`);
      assert.ok(info.description.length > 10, `${key}: no description`);
      assert.equal(typeof info.unit, 'string', `${key}: no unit`);
      assert.ok(info.aggregation, `${key}: no aggregation rule`);
      // In our own words: never the seed's meaning copied (checked where the seeds are present).
      if (meaning !== null) assert.notEqual(info.description.replaceAll('`', ''), meaning.replaceAll('`', ''), `${key}: description copied`);
    }
  }
});

test('timing keys: each operation as a total and per microbatch', () => {
  const totals = specKeys().flatMap((r) => r.keys).filter((k) => k.startsWith('timing_'));
  assert.equal(totals.length, 12);
  for (const key of totals) {
    const micro = key.endsWith('_total') ? key.replace(/_total$/, '_microbatch_mean') : `${key}_microbatch_mean`;
    const base = describe(key).title;
    assert.equal(describe(micro).title, `${base} (per microbatch)`, micro);
    assert.equal(describe(micro).aggregation, 'mean over microbatches');
    assert.equal(describe(key).unit, 's');
  }
  assert.equal(describe('timing_forward_total').title, 'Forward pass');
  assert.equal(describe('timing_step_total').title, 'Training step');
  assert.equal(describe('timing_unknown_total'), null);
  assert.equal(describe('timing_unknown_microbatch_mean'), null);
});

test('phases: val/ says so in its title; bare and train/ keys find each other', () => {
  assert.equal(describe('val/loss_avg').title, 'Loss (validation)');
  assert.equal(describe('val/dpo_accuracy').title, 'DPO accuracy (validation)');
  assert.equal(describe('val/flow_bc_masked_elements').title, 'Supervised action elements (validation)');
  assert.equal(describe('val/reward_avg').title, 'Reward mean (validation)');
  assert.equal(describe('clip_frac').title, 'Clip fraction');
  assert.match(describe('train/clip_frac').description, /n_mini == 1/);
  assert.equal(describe('train/timing_forward_total').title, 'Forward pass');
  // Same leaf, different seeds: Telescope's bare key and posttrain's train/ key keep their own rules.
  assert.equal(describe('grad_norm').aggregation, 'mean over minibatch groups');
  assert.equal(describe('train/grad_norm').aggregation, 'last chunk of the window');
  assert.equal(describe('train/kl_max').aggregation, 'max over ranks and chunks');
});

test('pattern entries fill in their variable part', () => {
  assert.equal(describe('train/initial_ratio_max').title, 'Initial importance ratio (max)');
  assert.equal(describe('train/policy_reference_logprob_delta_mean').title, 'Policy − reference logprob (mean)');
  assert.equal(describe('train/dpo_err_pol_w').title, 'DPO denoising error (policy, winner)');
  assert.equal(describe('train/dpo_err_other'), null);
});

test('unknown keys, inherited names and non-strings are not described', () => {
  for (const key of ['my/custom', 'constructor', 'toString', 'train/constructor', 'val/__proto__', 'train/', '', null, 3]) {
    assert.equal(describe(key), null, String(key));
  }
});

test('the tooltip says what, how and which key', () => {
  const text = tooltip('entropy', describe('entropy'));
  assert.equal(text, 'Policy entropy, averaged over the trained (masked) token positions\n'
    + 'unit: nats · aggregation: token mean\nkey: entropy');
});

test('hints are data: a known rule, a message, refs resolved under the key\u2019s own phase', () => {
  const hinted = RECORDS.filter((r) => r.hints);
  assert.ok(hinted.length >= 8);
  for (const r of hinted) {
    for (const hint of r.hints) {
      assert.ok(HINT_RULES.includes(hint.rule), `${r.key}: unknown rule ${hint.rule}`);
      assert.ok(hint.message.length > 20, `${r.key}: no message`);
    }
  }
  const [kl] = hintsFor('train/kl_max');
  assert.deepEqual(kl.refs, { mean: 'train/kl_mean', jump: 'train/grad_norm' });
  assert.equal(kl.key, 'train/kl_max');
  assert.deepEqual(hintsFor('kl_max')[0].refs, { mean: 'kl_mean', jump: 'grad_norm' });
  assert.deepEqual(hintsFor('val/grpo_informative_group_count')[0].refs, { total: 'val/grpo_group_count' });
  assert.equal(hintsFor('train/clip_frac')[0].rule, 'nonzero-when-config');
  assert.deepEqual(hintsFor('entropy'), []);
  assert.deepEqual(hintsFor('my/custom'), []);
});

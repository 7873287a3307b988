// The Metrics page's Timeline section: where the derived `timing_*` series (catalog kind
// `timeline`) and a trainer's own `timing_*` step keys go (static/js/core/catalog.js), how they
// are titled (static/js/core/registry.js) and told apart (static/js/charts/origin.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { familyKey } from '../../static/js/charts/compose.js';
import { originOf, ORIGINS } from '../../static/js/charts/origin.js';
import {
  chartGroup, compareRanks, defaultChartSettings, isTimelineKey, layout, Placer, sectionKey, TIMELINE_GROUPS,
} from '../../static/js/core/catalog.js';
import { describe, hintsFor } from '../../static/js/core/registry.js';

/** A catalog entry as the server places it (ingest/core/series_ids.py placement). */
const e = (kind, key, group, extra = {}) => ({
  id: `${kind}|${key}||`, kind, key, stat: null, env: null, section: 'Timeline', group, label: key, ...extra,
});
const derived = (key, group) => e('timeline', key, group);
const logged = (key, group) => e('step', key, group);

test('derived series go to the Timeline section with their groups, a run with only derived series too', () => {
  const entries = [
    derived('timing_avg_inference_time', 'Inference'),
    derived('timing_forward_microbatch_mean', 'Per microbatch'),
    derived('timing_idle_pct', 'Inference'),
    derived('timing_rank_spread', 'Ranks'),
    derived('timing_step_total', 'Full step'),
    derived('timing_train_step/forward_total', 'Full step'), // nested names stay timeline series
    derived('timing_weight_sync_trainer_total', 'Weight sync'),
  ];
  for (const x of entries) {
    assert.equal(sectionKey(x), 'fixed:Timeline', x.key);
    assert.ok(isTimelineKey(x), x.key);
    assert.equal(chartGroup(x), x.group, `${x.key} keeps its group`);
  }
  const [section, ...others] = layout(entries);
  assert.equal(others.length, 0);
  assert.equal(section.key, 'fixed:Timeline');
  assert.equal(section.title, 'Timeline');
  // Known groups in TIMELINE_GROUPS order, whatever order the catalog lists them in.
  assert.deepEqual(section.groups.map((g) => g.title), ['Full step', 'Per microbatch', 'Ranks', 'Weight sync', 'Inference']);
  assert.deepEqual(section.groups.at(-1).entries.map((x) => x.key), ['timing_avg_inference_time', 'timing_idle_pct']);
  assert.deepEqual(TIMELINE_GROUPS, ['Full step', 'Per microbatch', 'Ranks', 'Weight sync', 'Inference']);
});

test('an unknown Timeline group comes after the known ones; derived families keep no group', () => {
  const out = layout([derived('timing_x', 'Something new'), derived('timing_step_total', 'Full step')]);
  assert.deepEqual(out[0].groups.map((g) => g.title), ['Full step', 'Something new']);
  assert.equal(chartGroup({ kind: 'reward', key: 'reward', group: 'reward' }), null);
  assert.equal(chartGroup(e('step', 'loss/kl', 'loss')), 'loss');
  assert.ok(!isTimelineKey({ kind: 'step', key: 'timing/fwd', section: 'timing', group: null }));
});

test('the trainer\u2019s key and the derived series of one name: two charts side by side, trainer first', () => {
  const placer = new Placer();
  const first = placer.place(logged('timing_step_total', 'Full step'));
  const other = placer.place(logged('timing_step_active', 'Full step'));
  const twin = placer.place(derived('timing_step_total', 'Full step')); // arrives later
  assert.equal(first.sectionKey, twin.sectionKey);
  assert.equal(first.groupKey, twin.groupKey);
  const order = [['logged total', first.chartRank], ['logged active', other.chartRank], ['derived total', twin.chartRank]]
    .sort((a, b) => compareRanks(a[1], b[1])).map(([name]) => name);
  assert.deepEqual(order, ['logged total', 'derived total', 'logged active']);
  assert.notEqual(familyKey(logged('timing_step_total', 'Full step')), familyKey(derived('timing_step_total', 'Full step')),
    'two charts, not one');
});

test('derived timing charts ignore the first step like the trainer\u2019s', () => {
  assert.equal(defaultChartSettings(derived('timing_idle_pct', 'Inference')).ignoreFirst, true);
  assert.equal(defaultChartSettings(logged('timing_step_total', 'Full step')).ignoreFirst, true);
});

test('a badge tells a derived chart from a trainer\u2019s of the same title', () => {
  assert.equal(originOf(derived('timing_step_total', 'Full step')), ORIGINS.timeline);
  assert.equal(originOf(derived('timing_step_total', 'Full step'), true).text, 'derived');
  assert.equal(originOf(logged('timing_step_total', 'Full step')), null, 'alone, a trainer key needs no badge');
  assert.equal(originOf(logged('timing_step_total', 'Full step'), true).text, 'logged');
  assert.equal(originOf({ kind: 'reward', key: 'reward' }, true), null);
  assert.notEqual(ORIGINS.timeline.text, ORIGINS.step.text);
});

test('every derived series name is described, with the titles the trainer\u2019s keys get', () => {
  const names = [
    'timing_step_total', 'timing_step_active', 'timing_waiting_for_data', 'timing_forward_total',
    'timing_forward_microbatch_mean', 'timing_optimizer_step_total', 'timing_weight_broadcast_total',
    'timing_weight_broadcast_microbatch_mean', 'timing_microbatch_count', 'timing_weight_sync_trainer_total',
    'timing_weight_sync_inference_total', 'timing_rank_spread', 'timing_slowest_rank', 'timing_idle_pct',
    'timing_avg_inference_time', 'timing_avg_compute_reward_time',
    ...['normal', 'discarded', 'canceled', 'all'].map((s) => `timing_generation_${s}_pct`),
    ...['normal', 'discarded', 'all'].map((s) => `timing_compute_reward_${s}_pct`),
  ];
  const titles = new Set();
  for (const key of names) {
    const info = describe(key);
    assert.ok(info, `${key} is not described`);
    assert.ok(info.title && info.title !== key && info.description.length > 10 && info.aggregation, key);
    titles.add(info.title);
  }
  assert.equal(titles.size, names.length, 'titles tell the series apart');
  assert.equal(describe('timing_generation_all_pct').unit, '%');
  assert.equal(describe('timing_generation_discarded_pct').title, 'Generating (discarded)');
  assert.equal(describe('timing_compute_reward_canceled_pct'), null, 'canceled rewards are left out of every share');
  assert.equal(describe('timing_weight_sync_trainer_total').title, 'Weight sync (trainer)');
  assert.equal(describe('timing_weight_sync_trainer_microbatch_mean').title, 'Weight sync (trainer) (per microbatch)');
  // The hinted ones, with their thresholds as data.
  const hint = (key) => hintsFor(key)[0];
  assert.deepEqual([hint('timing_waiting_for_data').threshold, hint('timing_waiting_for_data').refs],
    [0.5, { of: 'timing_step_total' }]);
  assert.equal(hint('timing_idle_pct').threshold, 50);
  assert.equal(hint('timing_weight_sync_trainer_total').threshold, 0.25);
  assert.equal(hint('timing_weight_sync_inference_total').threshold, 0.25);
  assert.deepEqual(hint('timing_rank_spread').refs, { rank: 'timing_slowest_rank' });
});

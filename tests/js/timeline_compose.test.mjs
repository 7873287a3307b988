// The derived timing series in fewer, denser charts (static/js/charts/compose.js timelinePart):
// which keys share a chart, which one names it, how its lines are told apart; their titles in
// the registry, the Custom view's words and the Overview's headline.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  familyHelp, familyKey, familyTitle, partsOf, primaryOf, roleOf, selectMembers, TIMELINE_FAMILIES, timelinePart,
} from '../../static/js/charts/compose.js';
import { buildComposedFigure, partDash } from '../../static/js/charts/composed.js';
import { pickHeadlines } from '../../static/js/charts/headline.js';
import { describe } from '../../static/js/core/registry.js';
import { labelOfId } from '../../static/js/custom/layout.js';
import { metricLabel, seriesName } from '../../static/js/custom/tree.js';

/** A catalog entry as the server places it (ingest/core/series_ids.py placement). */
const e = (kind, key, group = 'Full step') => ({
  id: `${kind}|${encodeURIComponent(key)}||`, kind, key, stat: null, env: null, section: 'Timeline', group, label: key,
});
const derived = (key, group) => e('timeline', key, group);

const OPS = ['train_step', 'train_step/forward', 'train_step/backward', 'optimizer_step', 'weight_broadcast'];
/** The demo's derived series (ingest/write/demo_timeline.py): 28 keys. */
const DEMO = [
  'timing_step_total', 'timing_step_active', 'timing_waiting_for_data', 'timing_microbatch_count',
  'timing_rank_spread', 'timing_slowest_rank', 'timing_weight_sync_trainer_total', 'timing_weight_sync_inference_total',
  ...['normal', 'discarded', 'canceled', 'all'].map((s) => `timing_generation_${s}_pct`),
  ...['normal', 'discarded', 'all'].map((s) => `timing_compute_reward_${s}_pct`),
  'timing_idle_pct', 'timing_avg_inference_time', 'timing_avg_compute_reward_time',
  ...OPS.flatMap((op) => [`timing_${op}_total`, `timing_${op}_microbatch_mean`]),
];

function charts(keys) {
  const families = new Map();
  for (const key of keys) {
    const fk = familyKey(derived(key));
    if (!families.has(fk)) families.set(fk, []);
    families.get(fk).push(derived(key));
  }
  return [...families.values()].map((members) => ({ primary: primaryOf(members).key, keys: members.map((m) => m.key).sort() }));
}

test('the demo\u2019s 28 derived series make 14 charts: the families, one per op, and the keys alone', () => {
  assert.equal(DEMO.length, 28);
  const got = charts(DEMO);
  assert.equal(got.length, 14);
  // A fixed 9 (5 families, inference idle and the three Ranks/Per microbatch keys alone), plus one per op.
  assert.equal(got.length, TIMELINE_FAMILIES.length + 4 + OPS.length);
  const byPrimary = Object.fromEntries(got.map((c) => [c.primary, c.keys]));
  assert.deepEqual(byPrimary.timing_generation_all_pct,
    ['all', 'canceled', 'discarded', 'normal'].map((s) => `timing_generation_${s}_pct`));
  assert.deepEqual(byPrimary.timing_compute_reward_all_pct,
    ['all', 'discarded', 'normal'].map((s) => `timing_compute_reward_${s}_pct`));
  assert.deepEqual(byPrimary.timing_step_total, ['timing_step_active', 'timing_step_total', 'timing_waiting_for_data']);
  assert.deepEqual(byPrimary.timing_weight_sync_trainer_total,
    ['timing_weight_sync_inference_total', 'timing_weight_sync_trainer_total']);
  assert.deepEqual(byPrimary.timing_avg_inference_time, ['timing_avg_compute_reward_time', 'timing_avg_inference_time']);
  for (const op of OPS) {
    assert.deepEqual(byPrimary[`timing_${op}_total`], [`timing_${op}_microbatch_mean`, `timing_${op}_total`], op);
  }
  for (const alone of ['timing_idle_pct', 'timing_rank_spread', 'timing_slowest_rank', 'timing_microbatch_count']) {
    assert.deepEqual(byPrimary[alone], [alone], alone);
    assert.equal(timelinePart(alone), null, alone);
  }
  assert.equal(new Set(got.flatMap((c) => c.keys)).size, DEMO.length, 'every series in exactly one chart');
});

test('the primary names the chart whatever the catalog lists first', () => {
  const gen = ['canceled', 'normal', 'all', 'discarded'].map((s) => derived(`timing_generation_${s}_pct`, 'Inference'));
  for (let i = 0; i < gen.length; i++) {
    const order = gen.slice(i).concat(gen.slice(0, i));
    assert.equal(primaryOf(order).key, 'timing_generation_all_pct');
  }
  const op = [derived('timing_forward_microbatch_mean', 'Per microbatch'), derived('timing_forward_total')];
  assert.equal(primaryOf(op).key, 'timing_forward_total');
  assert.equal(primaryOf(op.slice(0, 1)).key, 'timing_forward_microbatch_mean', 'the best there is');
  assert.equal(primaryOf([derived('timing_waiting_for_data'), derived('timing_step_active'), derived('timing_step_total')]).key,
    'timing_step_total');
  // A chart's keys span the server's groups: its family never splits by them.
  assert.equal(familyKey(op[0]), familyKey(op[1]));
});

test('a trainer\u2019s own timing keys keep one chart each, apart from the derived family', () => {
  const logged = ['timing_step_total', 'timing_step_active', 'timing_forward_total', 'timing_forward_microbatch_mean']
    .map((k) => e('step', k));
  assert.equal(new Set(logged.map(familyKey)).size, logged.length);
  for (const x of logged) assert.notEqual(familyKey(x), familyKey(derived(x.key)));
  assert.equal(familyKey(derived('timing_idle_pct')) === familyKey(derived('timing_rank_spread')), false);
});

test('titles: a family\u2019s own, an op\u2019s the registry\u2019s, a key alone as a trainer\u2019s key of its name', () => {
  assert.equal(familyTitle(derived('timing_step_total')), 'Training step');
  assert.equal(familyTitle(derived('timing_generation_all_pct')), 'Generating (% of lanes)');
  assert.equal(familyTitle(derived('timing_forward_total')), 'Forward pass');
  assert.equal(familyTitle(derived('timing_forward_microbatch_mean')), 'Forward pass', 'whichever part names it');
  assert.equal(familyTitle(derived('timing_train_step/forward_total')), 'Forward pass (in train_step)');
  assert.equal(familyTitle(derived('timing_idle_pct')), 'Inference idle');
  assert.equal(familyTitle(derived('timing_rank_spread')), 'Rank spread (slowest / median)');
  assert.equal(familyTitle(derived('timing_mystery_op_total')), 'timing_mystery_op', 'an op the registry lacks');
  assert.equal(familyTitle(e('step', 'timing_step_total')), 'timing_step_total', 'a trainer\u2019s: its label (the chart asks the registry)');
  const help = familyHelp(derived('timing_step_active'));
  assert.equal(help.title, 'Training step');
  assert.match(help.tip, /^whole step: Wall time of one whole training step\nactive: .*\nwaiting for data: Time the trainer waited/);
  assert.match(help.tip, /unit: s\nkeys: timing_step_total, timing_step_active, timing_waiting_for_data$/);
  assert.equal(familyHelp(derived('timing_idle_pct')).title, 'Inference idle');
  assert.match(familyHelp(derived('timing_idle_pct')).tip, /key: timing_idle_pct$/);
  assert.equal(familyHelp({ kind: 'reward', key: 'reward', stat: 'mean' }), null);
  // Every family's parts are registered keys of one unit: one y axis means one thing.
  for (const f of TIMELINE_FAMILIES) {
    const units = new Set(f.parts.map(([key]) => describe(key)?.unit));
    assert.equal(units.size, 1, f.family);
    assert.ok(!units.has(undefined), f.family);
  }
});

const theme = { grid: '#ccc', fg: '#000', bg: '#fff', muted: '#888', font: 'sans' };
const page = { xaxis: 'step', ema: false, span: 10, maxStep: null, maxTime: null };
const chart = { band: true, envelope: true, env: '*', ignoreFirst: false, ignoreOutliers: false, logY: false, yMin: null, yMax: null };
const series = (value) => ({ step: value.map((_, i) => i), time: value.map((_, i) => 100 + i), value });

test('a family\u2019s figure: one line per series, the primary solid, the others dashed and named by their words', () => {
  const entries = [derived('timing_waiting_for_data'), derived('timing_step_total'), derived('timing_step_active')];
  assert.ok(entries.every((x) => roleOf(x) === 'line'));
  const chosen = selectMembers(entries, chart);
  assert.equal(chosen.length, 3, 'no band, envelope or env filter takes a part away');
  const values = { timing_step_total: [5, 5, 6], timing_step_active: [3, 3.5, 4], timing_waiting_for_data: [2, 1.5, 2] };
  const members = chosen.map((m) => ({ ...m, data: series(values[m.entry.key]) }));
  const primary = primaryOf(entries);
  const fig = buildComposedFigure({ primary, envs: [], theme, page, chart,
    runs: [{ id: 3, name: 'run', color: '#112233', t0: 100, firstStep: 0, range: null, members }] });
  const lines = fig.data.filter((t) => t.meta.role !== 'last');
  assert.deepEqual(lines.map((t) => [t.meta.role, t.meta.key, t.name, t.line.dash]), [
    ['raw', 'timing_step_total', 'run · whole step', 'solid'],
    ['part', 'timing_step_active', 'run · active', partDash(1)],
    ['part', 'timing_waiting_for_data', 'run · waiting for data', partDash(2)],
  ]);
  assert.ok(lines.every((t) => t.line.color === '#112233'), 'the run\u2019s colour: overlaid runs are told apart first');
  assert.equal(new Set(lines.map((t) => t.line.dash)).size, 3);
  assert.equal(new Set(lines.map((t) => t.uid)).size, 3, 'Plotly keeps each line\u2019s identity');
  assert.deepEqual(lines[0].y, [5, 5, 6]);
  const dots = fig.data.filter((t) => t.meta.role === 'last');
  assert.deepEqual(dots.map((t) => t.y), [[6]], 'a dot ends the primary line only');
  assert.equal(fig.prepared.length, 1);
  assert.equal(fig.points, 9);
  // The legend's keys, in the same order and dashes as the lines.
  assert.deepEqual(partsOf(entries).map((p) => [p.key, p.words, partDash(p.rank)]), [
    ['timing_step_total', 'whole step', 'solid'], ['timing_step_active', 'active', partDash(1)],
    ['timing_waiting_for_data', 'waiting for data', partDash(2)]]);
  assert.deepEqual(partsOf([derived('timing_idle_pct')]), [], 'a key alone has no parts to tell apart');
});

test('the registry titles TRL\u2019s profiling timers and the nested train_step spans', () => {
  for (const name of ['_prepare_inputs', 'transformers.generate', 'transformers.generate_batch', 'vLLM.generate',
    'sync_weights', '_move_model_to_vllm', '_calculate_rewards', '_get_per_token_logps_and_entropies', 'compute_loss']) {
    const info = describe(`profiling/${name}`);
    assert.ok(info, name);
    assert.equal(info.unit, 's');
    assert.equal(info.description, `Mean seconds per call of TRL\u2019s profiled block ${name}`);
    assert.ok(info.title.startsWith('TRL: ') && !info.title.includes(name), info.title);
  }
  assert.equal(describe('profiling/compute_loss').title, 'TRL: Loss computation');
  const fn = describe('profiling/accuracy_reward'); // a reward function: its own name
  assert.equal(fn.title, 'TRL: accuracy_reward');
  assert.match(fn.description, /^Mean seconds per call of TRL\u2019s profiled block accuracy_reward/);
  assert.equal(describe('profiling/odd name'), null);
  assert.equal(describe('timing_train_step/forward_total').title, 'Forward pass (in train_step)');
  assert.equal(describe('timing_train_step/backward_microbatch_mean').title, 'Backward pass (in train_step, per microbatch)');
  assert.equal(describe('timing_train_step_total').title, 'Forward and backward (train_step)');
  assert.equal(describe('timing_other/forward_total'), null, 'a span the registry does not know');
  assert.equal(describe('timing_train_step/unknown_total'), null);
  const titles = OPS.flatMap((op) => [`timing_${op}_total`, `timing_${op}_microbatch_mean`]).map((k) => describe(k)?.title);
  assert.ok(titles.every(Boolean));
  assert.equal(new Set(titles).size, titles.length);
});

test('the Custom view titles a derived series by the registry and says it is derived', () => {
  const d = derived('timing_step_total');
  assert.deepEqual(metricLabel(d), { title: 'Training step', detail: 'timing_step_total · derived' });
  assert.deepEqual(metricLabel(e('step', 'timing_step_total')), { title: 'Training step', detail: 'timing_step_total' });
  assert.equal(seriesName(d.id), 'Training step (derived)');
  assert.equal(seriesName('step|timing_step_total||'), 'Training step');
  assert.equal(seriesName('timeline|timing_x_y||'), 'timing_x_y (derived)', 'unknown: its key');
  assert.equal(seriesName(`timeline|${encodeURIComponent('timing_train_step/forward_total')}||`), 'Forward pass (in train_step) (derived)');
  assert.equal(seriesName('step|profiling%2Fcompute_loss||'), 'TRL: Loss computation');
  assert.equal(labelOfId('timeline|timing_idle_pct||'), 'timing_idle_pct');
  assert.equal(labelOfId('reward|reward|mean|math'), 'reward mean (math)');
});

test('the Overview\u2019s step time: the trainer\u2019s key, else the derived one; no other headline takes a derived series', () => {
  const pick = (entries) => pickHeadlines(entries).map((p) => [p.name, p.id, p.title, p.description.length > 0]);
  assert.deepEqual(pick([derived('timing_step_total'), derived('timing_loss_computation_total')]),
    [['step_time', 'timeline|timing_step_total||', 'Training step', true]]);
  assert.deepEqual(pick([derived('timing_step_total'), e('step', 'timing_step_total')]),
    [['step_time', 'step|timing_step_total||', 'Training step', true]]);
});

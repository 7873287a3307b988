// Composed charts: which entries share a chart, what each draws, the env filter.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ALL_TOGETHER, anyNonZero, envOptions, EVERY_ENV, familyKey, familyTitle, isQuality, offers, primaryOf,
  roleOf, selectMembers,
} from '../../static/js/charts/compose.js';
import { buildComposedFigure, envDash } from '../../static/js/charts/composed.js';

const e = (kind, key, stat, env = null, extra = {}) => ({
  id: `${kind}|${key}|${stat ?? ''}|${env ?? ''}`, kind, key, stat, env, section: kind, group: key, label: key, ...extra,
});

const REWARD = ['mean', 'std', 'min', 'max'].flatMap((s) => [null, 'a', 'b'].map((env) => e('reward', 'reward', s, env)));

test('a metric\'s statistics and environments share one chart; other stats and steps do not', () => {
  const keys = new Set(REWARD.map(familyKey));
  assert.equal(keys.size, 1);
  assert.notEqual(familyKey(e('reward', 'reward', 'count')), familyKey(e('reward', 'reward', 'mean')));
  assert.equal(familyKey(e('reward', 'reward', 'count', 'a')), familyKey(e('reward', 'reward', 'count')));
  assert.notEqual(familyKey(e('step', 'loss', null)), familyKey(e('step', 'entropy', null)));
  const groups = ['count', 'informative', 'tied', 'all_min', 'all_max'].map((s) => e('groups', 'groups', s));
  assert.equal(new Set(groups.map(familyKey)).size, 1);
  assert.equal(familyKey(e('ranges', 'reward', 'at_min_pct')), familyKey(e('ranges', 'reward', 'at_max_pct')));
});

test('data-quality counters are told apart and flagged only when non-zero', () => {
  for (const stat of ['null_count', 'gini_excluded', 'outside_count', 'canceled']) assert.ok(isQuality(e('reward', 'x', stat)));
  assert.ok(!isQuality(e('reward', 'x', 'count')));
  assert.ok(!isQuality(e('step', 'null_count', null)));
  assert.equal(anyNonZero([0, null, 0]), false);
  assert.equal(anyNonZero([0, 2]), true);
  assert.equal(anyNonZero(undefined), false);
});

test('the chart is named by the all-environment mean whatever arrives first', () => {
  const shuffled = [REWARD[5], REWARD[1], REWARD[0], REWARD[4]];
  assert.equal(primaryOf(shuffled).id, 'reward|reward|mean|');
  assert.equal(primaryOf([e('groups', 'groups', 'tied'), e('groups', 'groups', 'count')]).stat, 'count');
  assert.equal(familyTitle(REWARD[0]), 'reward');
  assert.equal(familyTitle(e('reward', 'reward', 'gini_mean')), 'reward gini_mean');
});

test('the env filter: every env overlaid, spread of the pooled series; one env with its own spread', () => {
  const all = selectMembers(REWARD, { env: EVERY_ENV, band: true, envelope: true });
  assert.deepEqual(all.filter((m) => m.role === 'line').map((m) => m.entry.env), [null, 'a', 'b']);
  assert.deepEqual(all.filter((m) => m.role !== 'line').map((m) => [m.role, m.entry.env]),
    [['std', null], ['min', null], ['max', null]]);
  const a = selectMembers(REWARD, { env: 'a', band: true, envelope: false });
  assert.deepEqual(a.map((m) => [m.role, m.entry.env]), [['line', 'a'], ['std', 'a']]);
  const pooled = selectMembers(REWARD, { env: ALL_TOGETHER, band: false, envelope: true });
  assert.deepEqual(pooled.map((m) => m.role), ['line', 'min', 'max']);
  assert.deepEqual(envOptions(REWARD).map((o) => o.value), [EVERY_ENV, ALL_TOGETHER, 'a', 'b']);
  assert.deepEqual(envOptions([e('step', 'loss', null)]), []);
  assert.deepEqual(offers(REWARD), { band: true, envelope: true });
  assert.deepEqual(offers([e('reward', 'reward', 'count')]), { band: false, envelope: false });
});

const theme = { grid: '#ccc', fg: '#000', bg: '#fff', muted: '#888', font: 'sans' };
const page = { xaxis: 'step', ema: false, span: 10, maxStep: null, maxTime: null };
const series = (value) => ({ step: value.map((_, i) => i), time: value.map((_, i) => 100 + i), value });

test('a composed figure: envelope and band under the lines, envs dashed, one prepared per run', () => {
  const members = [
    { entry: REWARD[0], role: 'line', data: series([1, 2, 3]) },
    { entry: REWARD[1], role: 'line', data: series([0, 1, 2]) },
    { entry: REWARD[3], role: 'std', data: series([0.5, 0.5, 0.5]) },
    { entry: REWARD[6], role: 'min', data: series([0, 0, 0]) },
    { entry: REWARD[9], role: 'max', data: series([5, 5, 5]) },
  ];
  const fig = buildComposedFigure({ primary: REWARD[0], envs: ['a', 'b'], theme, page, zoom: null,
    chart: { band: true, envelope: true, ignoreFirst: false, ignoreOutliers: false, logY: false, yMin: null, yMax: null },
    runs: [{ id: 7, name: 'r', color: '#112233', t0: 100, firstStep: 0, range: null, members }] });
  const roles = fig.data.map((t) => t.meta.role);
  assert.deepEqual(roles, ['envelope', 'band', 'raw', 'env', 'last']); // a dot ends the main line
  assert.deepEqual([fig.data.at(-1).x, fig.data.at(-1).y], [[2], [3]]);
  const env = fig.data.find((t) => t.meta.role === 'envelope');
  assert.deepEqual(env.y, [5, 5, 5, 0, 0, 0]);
  assert.equal(fig.data.find((t) => t.meta.role === 'env').line.dash, envDash('a', ['a', 'b']));
  assert.equal(fig.data.find((t) => t.meta.role === 'raw').line.dash, 'solid');
  assert.equal(fig.prepared.length, 1);
  assert.equal(fig.points, 6);
});

test('groups counts stack, the total stays a line', () => {
  const g = (stat, v) => ({ entry: e('groups', 'groups', stat), role: roleOf(e('groups', 'groups', stat)), data: series(v) });
  const fig = buildComposedFigure({ primary: e('groups', 'groups', 'count'), runs: [{ id: 1, name: 'r', color: '#112233',
    t0: 100, firstStep: 0, range: null,
    members: [g('count', [4, 4]), g('informative', [3, 1]), g('tied', [1, 3]), g('all_min', [1, 2])] }],
  chart: { band: true, envelope: true }, page, theme });
  const stacks = fig.data.filter((t) => t.meta.role === 'stack');
  assert.deepEqual(stacks.map((t) => t.meta.stat), ['informative', 'tied']);
  assert.ok(stacks.every((t) => t.stackgroup === 'r1'));
  // all_min is a subset of tied: a line over the stack, never stacked (no double count)
  assert.ok(fig.data.some((t) => t.meta.stat === 'all_min' && !t.stackgroup));
});

test('a composed chart autoscales over its lines, band and envelope; stacks from zero to their top', () => {
  const chart = { band: true, envelope: true, ignoreFirst: false, ignoreOutliers: false, logY: false, yMin: null, yMax: null };
  const members = [
    { entry: REWARD[0], role: 'line', data: series([1, 2, 3]) },
    { entry: REWARD[6], role: 'min', data: series([0, 0, 0]) },
    { entry: REWARD[9], role: 'max', data: series([10, 5, 5]) },
  ];
  const fig = buildComposedFigure({ primary: REWARD[0], envs: [], theme, page, chart,
    runs: [{ id: 7, name: 'r', color: '#112233', t0: 100, firstStep: 0, range: null, members }] });
  assert.deepEqual(fig.layout.yaxis.range, [-1, 11]); // the envelope's 0..10, padded by 10%
  const noEnvelope = buildComposedFigure({ primary: REWARD[0], envs: [], theme, page, chart: { ...chart, envelope: false },
    runs: [{ id: 7, name: 'r', color: '#112233', t0: 100, firstStep: 0, range: null, members: members.slice(0, 1) }] });
  assert.deepEqual(noEnvelope.layout.yaxis.range.map((v) => Math.round(v * 1e9) / 1e9), [0.8, 3.2]);
  // Groups: informative + tied stacked reach 4 and 5; zero is in, and the count line is the top.
  const g = (stat, v) => ({ entry: e('groups', 'groups', stat), role: roleOf(e('groups', 'groups', stat)), data: series(v) });
  const groups = buildComposedFigure({ primary: e('groups', 'groups', 'count'), theme, page, chart,
    runs: [{ id: 1, name: 'r', color: '#112233', t0: 100, firstStep: 0, range: null,
      members: [g('informative', [3, 1]), g('tied', [1, 4])] }] });
  assert.deepEqual(groups.layout.yaxis.range, [-0.5, 5.5]);
  assert.equal(groups.data.filter((t) => t.meta.role === 'last').length, 0); // no dot on a stack
});

test('a dot ends each run\'s main line only, not every environment\'s', () => {
  const chart = { band: false, envelope: false, ignoreFirst: false, ignoreOutliers: false, logY: false, yMin: null, yMax: null };
  const members = [{ entry: REWARD[1], role: 'line', data: series([0, 1, 2]) }, { entry: REWARD[0], role: 'line', data: series([1, 2, 4]) }];
  const runs = [7, 8].map((id) => ({ id, name: `r${id}`, color: '#112233', t0: 100, firstStep: 0, range: null, members }));
  const fig = buildComposedFigure({ primary: REWARD[0], envs: ['a', 'b'], theme, page, chart, runs });
  const dots = fig.data.filter((t) => t.meta.role === 'last');
  assert.deepEqual(dots.map((t) => [t.meta.run, t.meta.env, t.y[0]]), [[7, null, 4], [8, null, 4]]);
});

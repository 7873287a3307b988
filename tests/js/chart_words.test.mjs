// Charts in words (issue 31, items 1–3), the pure parts: the registry's titles of every derived
// family (core/registry.js describeSeries), the y axis' one number format, whole-number ticks and
// unit (charts/traces.js), and each environment of a run in its own colour (charts/composed.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { buildComposedFigure, envColor } from '../../static/js/charts/composed.js';
import { buildFigure, integerTicks, numberFormat, wholeValues } from '../../static/js/charts/traces.js';
import { buildPlotFigure } from '../../static/js/custom/figure.js';
import { describeSeries } from '../../static/js/core/registry.js';

const e = (kind, key, stat, env = null) => ({ kind, key, stat, env, id: `${kind}|${key}|${stat}|${env ?? ''}` });
const titleOf = (kind, key, stat) => describeSeries(e(kind, key, stat)).title;

// Every chart primary the server's families make (docs/statistics.md "Families").
const DERIVED = [
  ...['mean', 'count', 'gini_mean', 'gini_excluded', 'null_count'].flatMap((s) => [e('reward', 'reward', s),
    e('sample', 'reasoning_steps', s)]),
  e('advantage', 'advantage', 'mean'), e('groups', 'groups', 'count'),
  ...['prompt_tokens', 'completion_tokens', 'total_tokens'].flatMap((k) => [e('rollouts', k, 'mean'), e('discarded', k, 'mean')]),
  e('rollouts', 'off_policy_steps', 'mean'),
  ...['stop_reason_length_pct', 'group_length_gini_mean', 'group_length_max_median_ratio_mean'].map((k) => e('rollouts', k, k)),
  ...['count', 'canceled', 'max_async_pct', 'zero_advantage_pct'].map((s) => e('discarded', 'discarded', s)),
  ...['reward_zero_pct', 'reward_positive_pct', 'reward_mean'].map((s) => e('discarded', 'zero_advantage', s)),
  ...['at_min_pct', 'outside_count'].flatMap((s) => [e('ranges', 'reward', s), e('ranges', 'correct', s)]),
];

test('every derived family is titled in words, a user-named metric by its own name', () => {
  for (const entry of DERIVED) {
    const info = describeSeries(entry);
    const words = info.title.replace(/reasoning_steps|correct/g, '');
    assert.ok(!words.includes('_'), `${entry.id}: ${info.title}`);
    assert.ok(!/\b(count|canceled)$/.test(words), `${entry.id}: ${info.title}`);
    assert.ok(info.description.length > 20 && !info.description.includes('{'), `${entry.id}: ${info.description}`);
  }
  assert.equal(titleOf('sample', 'reasoning_steps', 'gini_mean'), 'reasoning_steps \u00b7 inequality within groups (Gini)');
  assert.equal(titleOf('reward', 'reward', 'mean'), 'Reward', 'the value family: the metric alone');
  assert.equal(titleOf('reward', 'reward', 'std'), 'Reward');
  assert.equal(titleOf('rollouts', 'stop_reason_length_pct', 'stop_reason_length_pct'), 'Stopped at length limit');
  assert.equal(titleOf('discarded', 'discarded', 'count'), 'Discarded samples');
  assert.equal(titleOf('ranges', 'correct', 'outside_count'), 'correct \u00b7 outside the declared range');
  assert.equal(titleOf('mystery', 'some_key', 'odd_pct'), 'some key \u00b7 odd (%)', 'unknown: plain words still');
  assert.equal(describeSeries(e('step', 'my/own', null)), null, 'an unknown trainer key keeps its key');
});

test('units and counts: the registry says which series tick in whole numbers', () => {
  const unit = (entry) => [describeSeries(entry).unit, describeSeries(entry).integer];
  assert.deepEqual(unit(e('groups', 'groups', 'count')), ['groups', true]);
  assert.deepEqual(unit(e('reward', 'reward', 'null_count')), ['samples', true]);
  assert.deepEqual(unit(e('discarded', 'discarded', 'count')), ['samples', true]);
  assert.deepEqual(unit(e('rollouts', 'completion_tokens', 'mean')), ['tokens', false], 'a mean of counts is not whole');
  assert.deepEqual(unit(e('rollouts', 'stop_reason_length_pct', 'stop_reason_length_pct')), ['%', false]);
  assert.deepEqual(unit(e('step', 'timing_step_total', null)), ['s', false]);
  assert.deepEqual(unit(e('step', 'train/valid_token_count', null)), ['tokens', true], 'a sum of tokens is');
  assert.deepEqual(unit(e('timeline', 'timing_microbatch_count', null)), ['microbatches', true]);
});

test('axis and hover share one notation: plain digits, SI for the very large and small, whole numbers', () => {
  assert.deepEqual(numberFormat([0, 4]), { tickformat: ',~g', hoverformat: ',.6~g' });
  assert.deepEqual(numberFormat([0, 1.2e-6]), { tickformat: '~s', hoverformat: '.4~s' });
  assert.deepEqual(numberFormat([0, 3e6]), { tickformat: '~s', hoverformat: '.4~s' });
  assert.deepEqual(numberFormat([-7, -5], { log: true }), { tickformat: '~s', hoverformat: '.4~s' });
  assert.deepEqual(numberFormat([0, 10], { integer: true }), { tickformat: ',d', hoverformat: ',.6~g' });
  assert.deepEqual(integerTicks([-1e-10, 1e-10]), { tickmode: 'linear', tick0: 0, dtick: 1 }, 'a flat counter at 0: "0"');
  assert.deepEqual(integerTicks([11.5, 16.5]), { tickmode: 'linear', tick0: 0, dtick: 1 });
  assert.deepEqual(integerTicks([0, 9]), { tickmode: 'linear', tick0: 0, dtick: 2 });
  assert.deepEqual(integerTicks([0, 500]), {}, 'a wide span: Plotly\u2019s own whole ticks');
  assert.equal(wholeValues([{ y: [0, 1, null, 0] }]), true);
  assert.equal(wholeValues([{ y: [0, 0.5] }]), false);
  assert.equal(wholeValues([{ y: [null] }]), false, 'nothing drawn says nothing');
});

const series = (v) => ({ step: v.map((_, i) => i), time: v.map((_, i) => i), value: v, bmin: null, bmax: null });
const theme = { bg: '#fff', fg: '#000', grid: '#eee', muted: '#888' };
const chart = { logY: false, yMin: null, yMax: null, band: true, envelope: true };
const page = { xaxis: 'step', ema: false };

test('a chart\u2019s y axis names its unit and ticks counts in whole numbers; its traces hover by the axis', () => {
  const run = { id: 1, name: 'r', color: '#4e79a7', data: series([0, 0, 0]), std: null, range: null, t0: 0, firstStep: 0 };
  const fig = buildFigure({ entry: e('reward', 'reward', 'null_count'), runs: [run], chart, page, theme,
    axis: { unit: 'samples', integer: true } });
  assert.equal(fig.layout.yaxis.title.text, 'samples');
  assert.equal(fig.layout.yaxis.tickformat, ',d');
  assert.equal(fig.layout.yaxis.dtick, 1);
  assert.ok(fig.data.filter((t) => t.hovertemplate).every((t) => t.hovertemplate === '%{y}'));
  const small = buildFigure({ entry: e('step', 'learning_rate', null), runs: [{ ...run, data: series([0, 1e-6, 1e-6]) }],
    chart, page, theme });
  assert.equal(small.layout.yaxis.tickformat, '~s');
  assert.equal(small.layout.yaxis.title, undefined, 'no unit known: no title');
  assert.equal(small.layout.yaxis.dtick, undefined);
  const whole = buildFigure({ entry: e('step', 'optim/step_skipped', null), runs: [{ ...run, data: series([0, 1, 0]) }],
    chart, page, theme });
  assert.equal(whole.layout.yaxis.tickformat, ',d', 'every value whole: whole ticks');
});

const members = (envs) => envs.map((env) => ({ entry: e('reward', 'reward', 'mean', env), role: 'line',
  data: series([1, 2, 3]) }));

test('a run alone draws each environment in its own colour, the pooled line in the run\u2019s', () => {
  const envs = ['a', 'b', 'c'];
  const run = { id: 1, name: 'r', color: '#4e79a7', t0: 0, firstStep: 0, range: null, members: members([null, ...envs]) };
  const fig = buildComposedFigure({ primary: e('reward', 'reward', 'mean'), envs, runs: [run], chart, page, theme });
  const lines = fig.data.filter((t) => ['raw', 'env'].includes(t.meta.role));
  const colours = lines.map((t) => t.line.color);
  assert.equal(colours[0], '#4e79a7');
  assert.equal(new Set(colours).size, 4, colours.join(' '));
  assert.deepEqual(colours.slice(1), envs.map((env) => envColor(env, envs, '#4e79a7')));
  assert.deepEqual(lines.map((t) => t.line.dash), ['solid', 'dot', 'dash', 'longdash'], 'and its dash');
  assert.ok(lines.every((t) => /^[\w-]+$/.test(t.uid)), 'uids are CSS-safe');
});

test('overlaid runs keep their colours, environments their dash', () => {
  const envs = ['a', 'b'];
  const runs = [1, 2].map((id) => ({ id, name: `r${id}`, color: id === 1 ? '#4e79a7' : '#e15759', t0: 0, firstStep: 0,
    range: null, members: members([null, ...envs]) }));
  const fig = buildComposedFigure({ primary: e('reward', 'reward', 'mean'), envs, runs, chart, page, theme });
  const lines = fig.data.filter((t) => ['raw', 'env'].includes(t.meta.role));
  assert.equal(lines.length, 6);
  for (const t of lines) assert.equal(t.line.color, t.meta.run === 1 ? '#4e79a7' : '#e15759');
  assert.deepEqual(lines.filter((t) => t.meta.run === 2).map((t) => t.line.dash), ['solid', 'dot', 'dash']);
});

test('a Custom plot\u2019s axis names the unit its series share, none when they differ', () => {
  const run = (n) => ({ id: 1, name: 'r', color: '#4e79a7', t0: 0, firstStep: 0,
    lines: Array.from({ length: n }, () => ({ data: series([1, 2, 3]), std: null, range: null })) });
  const s = (entry) => ({ id: entry.id, name: entry.key, axis: 'left', entry });
  const tokens = [e('rollouts', 'prompt_tokens', 'mean'), e('rollouts', 'completion_tokens', 'mean')];
  const same = buildPlotFigure({ series: tokens.map(s), runs: [run(2)], chart, page, theme });
  assert.equal(same.layout.yaxis.title.text, 'tokens');
  const mixed = buildPlotFigure({ series: [s(tokens[0]), s(e('step', 'timing_step_total', null))], runs: [run(2)],
    chart, page, theme });
  assert.equal(mixed.layout.yaxis.title, undefined);
});

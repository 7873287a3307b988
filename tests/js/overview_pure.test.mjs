// The pure parts of the run overview and run list: config leaves, search and diff
// (core/config.js), run search / filter / sort (runs/filter.js), progress and ETA (runs/progress.js) and
// the choice of headline charts (charts/headline.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { diffConfigs, filterConfig, flattenConfig, formatValue } from '../../static/js/core/config.js';
import { mergePoints, pickHeadlines } from '../../static/js/charts/headline.js';
import { parseQuery, runFilter, sortRuns } from '../../static/js/runs/filter.js';
import {
  etaNow, formatDuration, progressOf, progressText, rateText, recentStepSeconds, stepSeconds,
} from '../../static/js/runs/progress.js';

const CONFIG = { algorithm: 'grpo', lr: 1e-6, optim: { name: 'adamw', betas: [0.9, 0.95], eps: null },
  data: { envs: ['countdown', 'math'], shuffle: true }, empty: {} };

test('a config flattens to its leaves with readable paths and values, keys sorted', () => {
  assert.deepEqual(flattenConfig(CONFIG).map((l) => [l.path, l.text]), [
    ['algorithm', 'grpo'], ['data.envs[0]', 'countdown'], ['data.envs[1]', 'math'], ['data.shuffle', 'true'],
    ['empty', '{}'], ['lr', '0.000001'], ['optim.betas[0]', '0.9'], ['optim.betas[1]', '0.95'],
    ['optim.eps', 'null'], ['optim.name', 'adamw']]);
  assert.deepEqual(flattenConfig(null), []);
  assert.equal(formatValue('a "b"'), 'a "b"');
});

test('a config search keeps matching leaves and their parents, by path or value', () => {
  const { tree, count } = filterConfig(CONFIG, 'ADAM');
  assert.equal(count, 1);
  assert.deepEqual(tree.map((n) => n.key), ['optim']);
  assert.deepEqual(tree[0].children.map((n) => [n.path, n.text]), [['optim.name', 'adamw']]);
  const byPath = filterConfig(CONFIG, 'betas');
  assert.equal(byPath.count, 2);
  assert.equal(filterConfig(CONFIG, 'nothing-like-this').count, 0);
  assert.equal(filterConfig(CONFIG, '').tree.length, 5); // empty query: the whole tree
});

test('configs side by side: every key once, differences marked, absent keys differ', () => {
  const rows = diffConfigs([{ lr: 1e-6, seed: 1, optim: { name: 'adamw' } },
    { lr: 2e-6, seed: 1, optim: { name: 'adamw' }, extra: 'x' }, { lr: 1e-6, seed: 1, optim: { name: 'adamw' } }]);
  assert.deepEqual(rows.map((r) => [r.path, r.differs]), [['lr', true], ['optim.name', false], ['seed', false], ['extra', true]]);
  assert.deepEqual(rows.at(-1).values, [undefined, 'x', undefined]);
  assert.deepEqual(diffConfigs([null, null]), []);
});

const RUNS = [
  { id: 1, name: 'grpo-baseline', status: 'finished', last_step: 99, total_steps: 100, updated_at: '2026-01-01T10:00:00Z', started_at: '2026-01-01T08:00:00Z', eta_seconds: null },
  { id: 2, name: 'grpo-lr2', status: 'running', last_step: 10, total_steps: 100, updated_at: '2026-01-01T12:00:00Z', started_at: '2026-01-01T11:00:00Z', eta_seconds: 900 },
  { id: 3, name: 'dpo-run10', status: 'idle', last_step: 50, total_steps: null, updated_at: '2026-01-01T11:00:00Z', started_at: '2026-01-01T09:00:00Z', eta_seconds: null },
];
const LEAVES = { 1: flattenConfig({ lr: 1e-6, algo: 'grpo' }), 2: flattenConfig({ lr: 2e-6, algo: 'grpo' }),
  3: flattenConfig({ lr: 1e-6, algo: 'dpo', model: { name: 'qwen' } }) };

test('search: words all match, by name or config value; path=value compares numbers', () => {
  const ids = (query, status = '', leaves = LEAVES) => {
    const keep = runFilter({ query, status });
    return RUNS.filter((r) => keep(r, leaves[r.id] ?? null)).map((r) => r.id);
  };
  assert.deepEqual(ids(''), [1, 2, 3]);
  assert.deepEqual(ids('GRPO'), [1, 2]);
  assert.deepEqual(ids('qwen'), [3]); // a config value
  assert.deepEqual(ids('lr=1e-6'), [1, 3]); // 0.000001 as written in another form
  assert.deepEqual(ids('name=qwen'), [3]); // a path suffix at a key boundary
  assert.deepEqual(ids('e=qwen'), []); // ... not in the middle of a key
  assert.deepEqual(ids('grpo lr=2e-6'), [2]);
  assert.deepEqual(ids('', 'idle'), [3]);
  assert.deepEqual(ids('qwen', '', {}), []); // configs not loaded yet: names only
  assert.deepEqual(parseQuery('"two words" a=b'), [{ text: 'two words' }, { path: 'a', value: 'b' }]);
});

test('sort: each key in its natural direction, reversible, ties by id', () => {
  const order = (key, reverse = false) => sortRuns(RUNS, key, reverse).map((r) => r.id);
  assert.deepEqual(order('updated'), [2, 3, 1]);
  assert.deepEqual(order('updated', true), [1, 3, 2]);
  assert.deepEqual(order('name'), [3, 1, 2]);
  assert.deepEqual(order('status'), [2, 3, 1]);
  assert.deepEqual(order('progress'), [1, 2, 3]);
  assert.deepEqual(order('eta'), [2, 1, 3]);
  assert.deepEqual(order('step'), [1, 3, 2]);
});

test('progress counts steps done (last_step + 1) of total_steps', () => {
  assert.deepEqual(progressOf({ last_step: 99, total_steps: 100 }), { done: 100, total: 100, fraction: 1 });
  assert.deepEqual(progressOf({ last_step: null, total_steps: 100 }), { done: 0, total: 100, fraction: 0 });
  assert.equal(progressOf({ last_step: 5, total_steps: null }).fraction, null);
  assert.equal(progressText({ last_step: 119, total_steps: 500 }), '120 of 500 steps · 24%');
  assert.equal(progressText({ last_step: 1499, total_steps: null }), '1,500 steps');
  assert.equal(progressText({ last_step: null, total_steps: null }), 'no steps yet');
});

test('durations, the ETA counting down and the pace', () => {
  assert.deepEqual([45, 720, 3900, 3 * 86400 + 4 * 3600].map(formatDuration), ['45 s', '12 min', '1 h 05 min', '3 d 4 h']);
  assert.equal(formatDuration(null), '');
  const info = { status: 'running', eta_seconds: 100, last_step: 49, total_steps: 100 };
  assert.equal(etaNow(info, 1000, 31_000), 70);
  assert.equal(etaNow(info, 1000, 1_000_000), 0);
  assert.equal(etaNow({ ...info, status: 'finished' }, 0, 0), null);
  assert.equal(stepSeconds(info), 2); // 100 s for the 50 steps left
  assert.equal(stepSeconds({ ...info, step_seconds: 0.5 }), 0.5);
  assert.equal(stepSeconds({ status: 'running', eta_seconds: null, last_step: 3 }, 4), 4);
  assert.equal(recentStepSeconds([0, 1, 2, 4], [100, 110, 120, 140]), 10);
  assert.equal(recentStepSeconds([0], [1]), null);
  assert.equal(rateText(0.25), '4.0 steps/s');
  assert.equal(rateText(20), '0.05 steps/s (20 s per step)');
  assert.equal(rateText(null), '');
});

const entry = (kind, key, stat = null, extra = {}) => ({ id: `${kind}|${key}|${stat ?? ''}|${extra.env ?? ''}${extra.normalized ? '|n' : ''}`, kind, key, stat, env: null, ...extra });

test('headlines: reward mean, informative groups, loss, grad norm, step time, as the run has them', () => {
  const catalog = [entry('step', 'val/loss'), entry('step', 'loss/policy'), entry('step', 'loss/kl'), entry('step', 'grad_norm'),
    entry('reward', 'reward', 'mean', { normalized: true }), entry('reward', 'reward', 'mean', { env: 'countdown' }),
    entry('reward', 'reward', 'mean'), entry('groups', 'groups', 'informative'), entry('step', 'timing_step_total'),
    entry('step', 'optim/update_outcome', null, { categorical: true })];
  const picks = pickHeadlines(catalog);
  assert.deepEqual(picks.map((p) => [p.name, p.id]), [
    ['reward', 'reward|reward|mean|'], ['informative', 'groups|groups|informative|'], ['loss', 'step|loss/policy||'],
    ['grad_norm', 'step|grad_norm||'], ['step_time', 'step|timing_step_total||']]);
  assert.equal(picks.find((p) => p.name === 'grad_norm').title, 'Gradient norm'); // the registry's title
  assert.deepEqual(pickHeadlines([entry('step', 'train/loss'), entry('step', 'entropy')]).map((p) => p.key), ['train/loss']);
  assert.deepEqual(pickHeadlines([entry('step', 'entropy')]), []);
});

test('live points merge by step; a null withdraws one', () => {
  const m = mergePoints(new Map(), { step: [0, 1, 2], time: [10, 11, 12], value: [1, 2, 3] });
  mergePoints(m, { step: [1, 3], time: [11, 13], value: [null, 4] });
  assert.deepEqual([...m.entries()], [[0, [10, 1]], [2, [12, 3]], [3, [13, 4]]]);
});

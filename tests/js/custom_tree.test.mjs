// The Custom view's words (static/js/custom/tree.js): the metric list as a tree with counts
// and search, readable labels, a plot's default title from the metric registry.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { metricLabel, paletteTree, plotTitle, seriesName, statWords } from '../../static/js/custom/tree.js';
import { compileSearch } from '../../static/js/core/text.js';

const step = (key, section, group = null) => ({ id: `step|${encodeURIComponent(key)}||`, kind: 'step', key, stat: null,
  env: null, section, group, label: key.split('/').at(-1) });
const derived = (kind, key, stat, env, section) => ({ id: `${kind}|${key}|${stat}|${env ?? ''}`, kind, key, stat, env,
  section, group: key, label: stat });
const ENTRIES = [
  step('train/kl_mean', 'train'), step('entropy', 'General'), step('perf/gpu/util', 'perf', 'gpu'),
  derived('reward', 'reward', 'std', null, 'Reward'), derived('reward', 'reward', 'mean', 'math', 'Reward'),
  derived('reward', 'reward', 'mean', null, 'Reward'),
  { ...derived('reward', 'reward', 'mean', null, 'Reward'), id: 'reward|reward|mean||n', normalized: true },
  derived('groups', 'groups', 'informative', null, 'Groups'),
];

test('the tree: sections in the All view order, groups, metrics by statistic; counts', () => {
  const tree = paletteTree(ENTRIES);
  assert.deepEqual(tree.map((s) => [s.title, s.count]), [['General', 1], ['train', 1], ['perf', 1], ['Reward', 3], ['Groups', 1]]);
  const reward = tree[3].items[0];
  assert.equal(reward.type, 'group');
  assert.deepEqual(reward.entries.map((e) => [e.stat, e.env]), [['mean', null], ['mean', 'math'], ['std', null]]);
  assert.equal(tree[2].items[0].title, 'gpu'); // a trainer key's group
  assert.equal(tree[0].items[0].type, 'metric'); // no group: right under its section
});

test('search keeps matching metrics (by key, label or readable title) and counts them', () => {
  const tree = paletteTree(ENTRIES, compileSearch('math').test);
  assert.deepEqual(tree.map((s) => [s.title, s.count]), [['Reward', 1]]);
  assert.equal(tree[0].items[0].count, 1);
  // "KL to reference" is the registry's title of train/kl_mean, not in its key
  assert.deepEqual(paletteTree(ENTRIES, compileSearch('to reference').test).map((s) => s.title), ['train']);
  assert.deepEqual(paletteTree(ENTRIES, compileSearch('nothing like it').test), []);
});

test('readable labels: registry titles for trainer keys, statistics in words with their env', () => {
  assert.deepEqual(metricLabel(ENTRIES[0]), { title: 'KL to reference (mean)', detail: 'train/kl_mean' });
  assert.deepEqual(metricLabel(step('my/own_key', 'my')), { title: 'own_key', detail: 'my/own_key' });
  assert.deepEqual(metricLabel(ENTRIES[4]), { title: 'mean · math', detail: '' });
  assert.deepEqual(metricLabel(ENTRIES[3]), { title: 'std', detail: 'all envs' });
  assert.equal(statWords('gini_mean'), 'Gini mean');
  assert.equal(statWords('at_max_pct'), 'at max %');
  assert.equal(statWords('stop_reason_length_pct', 'stop_reason_length_pct'), 'Stopped at length limit');
});

test('a plot is titled by its own title, else by the registry, else by its keys', () => {
  const plot = (title, ...ids) => ({ title, series: ids.map((id) => ({ id, axis: 'auto' })) });
  assert.equal(plotTitle(plot('', 'step|grad_norm||')), 'Gradient norm');
  assert.equal(plotTitle(plot('', 'step|my%2Fkey||')), 'my/key');
  assert.equal(plotTitle(plot('Mine', 'step|grad_norm||')), 'Mine');
  assert.equal(plotTitle(plot('', 'step|train%2Fkl_mean||', 'step|train%2Fkl_max||')),
    'KL to reference (mean), KL to reference (max)');
  assert.equal(seriesName('reward|reward|mean|countdown'), 'Reward mean · countdown');
  // a derived family in the registry's words, as its All-view chart is titled
  assert.equal(seriesName('sample|reasoning_steps|gini_mean|'),
    'reasoning_steps · inequality within groups (Gini)');
  assert.equal(seriesName('discarded|discarded|max_async_pct|'), 'Discarded as too stale');
  assert.equal(seriesName('rollouts|stop_reason_length_pct|stop_reason_length_pct|'), 'Stopped at length limit');
});

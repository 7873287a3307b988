// Text helpers (static/js/core/text.js) and All-view placement (static/js/core/catalog.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { age, compileSearch, csvField, escapePlotly, safeFilename, toCSV } from '../../static/js/core/text.js';
import { defaultChartSettings, layout, sectionKey, siblingKey, wantsBand } from '../../static/js/core/catalog.js';

const e = (kind, key, section, group, label, stat = null, env = null) => ({
  id: `${kind}|${key}|${stat ?? ''}|${env ?? ''}`, kind, key, stat, env, section, group, label });

test('escapePlotly turns markup into plain text', () => {
  assert.equal(escapePlotly('<img src=x onerror=alert(1)>'), '&lt;img src=x onerror=alert(1)&gt;');
  assert.equal(escapePlotly('a & b'), 'a &amp; b');
});

test('search by substring, case-insensitive, over key and label', () => {
  const entries = [e('step', 'loss/policy', 'loss', null, 'policy'), e('step', 'entropy', 'General', null, 'entropy')];
  const f = compileSearch('LOSS');
  assert.deepEqual(entries.filter(f.test).map((x) => x.key), ['loss/policy']);
  assert.equal(compileSearch('').test(entries[1]), true);
});

test('search by regex, and an invalid regex reports an error and filters nothing', () => {
  const entries = [e('step', 'loss/policy', 'loss', null, 'policy'), e('step', 'entropy', 'General', null, 'entropy')];
  const f = compileSearch('^ent', true);
  assert.deepEqual(entries.filter(f.test).map((x) => x.key), ['entropy']);
  const bad = compileSearch('([', true);
  assert.ok(bad.error);
  assert.equal(entries.filter(bad.test).length, 2);
});

test('CSV fields are quoted and formula-safe', () => {
  assert.equal(csvField('a,b'), '"a,b"');
  assert.equal(csvField('say "hi"'), '"say ""hi"""');
  assert.equal(csvField('=cmd()'), "'=cmd()");
  assert.equal(csvField(NaN), '');
  assert.equal(toCSV(['a', 'b'], [[1, 'x']]), 'a,b\n1,x\n');
});

test('file names keep only safe characters', () => {
  assert.equal(safeFilename('<img src=x>/a b', 'png'), 'img_src_x_a_b.png');
  assert.equal(safeFilename('///', 'csv'), 'chart.csv');
});

test('age', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  assert.equal(age('2026-01-01T11:59:30Z', now), '30 s ago');
  assert.equal(age('2026-01-01T11:00:00Z', now), '1 h ago');
  assert.equal(age('nope', now), '');
});

test('sections: General, trainer sections by arrival, then the fixed order', () => {
  const entries = [
    e('reward', 'reward', 'Reward', 'reward', 'reward mean', 'mean'),
    e('step', 'timing_step_total', 'Timeline', 'Full step', 'timing_step_total'),
    e('step', 'perf/gpu/util', 'perf', 'gpu', 'util'),
    e('ranges', 'reward', 'Ranges', 'reward', 'reward at_min_pct', 'at_min_pct'),
    e('step', 'entropy', 'General', null, 'entropy'),
    e('step', 'loss/kl', 'loss', null, 'kl'),
    e('sample', 'correct', 'Sample metrics', 'correct', 'correct mean', 'mean'),
    e('step', 'Reward/custom', 'Reward', null, 'custom'),
  ];
  const out = layout(entries);
  assert.deepEqual(out.map((s) => s.key), ['general', 'user:perf', 'user:loss', 'user:Reward', 'fixed:Reward',
    'fixed:Sample metrics', 'fixed:Timeline', 'fixed:Ranges']);
});

test('groups split by environment, overall first; charts by statistic', () => {
  const entries = [
    e('reward', 'reward', 'Reward', 'reward', 'reward max [b]', 'max', 'b'),
    e('reward', 'reward', 'Reward', 'reward', 'reward count', 'count'),
    e('reward', 'reward', 'Reward', 'reward', 'reward std', 'std'),
    e('reward', 'reward', 'Reward', 'reward', 'reward mean [b]', 'mean', 'b'),
    e('reward', 'reward', 'Reward', 'reward', 'reward mean', 'mean'),
  ];
  const [sec] = layout(entries);
  assert.deepEqual(sec.groups.map((g) => g.title), ['reward', 'reward · b']);
  assert.deepEqual(sec.groups[0].entries.map((x) => x.stat), ['mean', 'std', 'count']);
  assert.deepEqual(sec.groups[1].entries.map((x) => x.stat), ['mean', 'max']);
});

test('timing charts ignore the first step by default; mean charts want a std band', () => {
  assert.equal(defaultChartSettings(e('step', 'timing_step_total', 'Timeline', 'Full step', 'x')).ignoreFirst, true);
  assert.equal(defaultChartSettings(e('step', 'timing/fwd/total', 'timing', 'fwd', 'total')).ignoreFirst, true);
  assert.equal(defaultChartSettings(e('step', 'entropy', 'General', null, 'entropy')).ignoreFirst, false);
  const mean = e('reward', 'reward', 'Reward', 'reward', 'm', 'mean', 'a');
  const std = e('reward', 'reward', 'Reward', 'reward', 's', 'std', 'a');
  assert.equal(wantsBand(mean), true);
  assert.equal(siblingKey(mean), siblingKey(std));
  assert.equal(wantsBand(e('step', 'x', 'General', null, 'x')), false);
  assert.equal(sectionKey(e('step', 'timing_x', 'Timeline', 'Full step', 'timing_x')), 'fixed:Timeline');
});

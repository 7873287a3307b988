// The distribution heatmap's pure parts (static/js/charts/heatmap.js): which charts offer one, the
// Plotly trace built from the server's payload, its labels and its colours in either theme.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  binLabel, buildHeatmapFigure, colorscale, DARK_SCALE, distributionOf, fmt, initialEnv, isDark,
  LIGHT_SCALE, stepLabel, summaryText,
} from '../../static/js/charts/heatmap.js';

const light = { fg: '#1d2330', muted: '#6b7280', grid: '#e7eaf0', bg: '#ffffff', font: 'sans-serif' };
const dark = { fg: '#e3e7ee', muted: '#8b95a5', grid: '#252d37', bg: '#171c23', font: 'sans-serif' };

// Three step buckets of two steps (the last one short), three bins over [0, 1.5].
const payload = (over = {}) => ({
  kind: 'reward', key: 'reward', env: null, bins: [0, 0.5, 1, 1.5], integer: false,
  steps: [0, 2, 4], step_end: [1, 3, 4], step_width: 2,
  counts: [[3, 0, 1], [0, 0, 0], [2, 5, 0]], total: 11, outside: 0,
  range: { min: 0, max: 1.5, source: 'observed' }, envs: ['a', 'b'], ...over,
});

test('the reward, sample metrics and completion lengths have a distribution; other charts none', () => {
  assert.deepEqual(distributionOf({ kind: 'reward', key: 'reward', stat: 'mean', env: null }), { kind: 'reward', key: 'reward' });
  assert.deepEqual(distributionOf({ kind: 'sample', key: 'correct', stat: 'max', env: 'a' }), { kind: 'sample', key: 'correct' });
  assert.deepEqual(distributionOf({ kind: 'rollouts', key: 'completion_tokens', stat: 'mean' }),
    { kind: 'rollouts', key: 'completion_tokens' });
  for (const entry of [
    { kind: 'step', key: 'loss', stat: null },
    { kind: 'step', key: 'reward', stat: null }, // a trainer key named reward is not the family
    { kind: 'rollouts', key: 'prompt_tokens', stat: 'mean' },
    { kind: 'rollouts', key: 'stop_reason_length_pct', stat: 'stop_reason_length_pct' },
    { kind: 'advantage', key: 'advantage', stat: 'mean' },
    { kind: 'reward', key: 'reward', stat: 'null_count' }, // a data-quality counter
    { kind: 'reward', key: 'reward', stat: 'mean', normalized: true },
  ]) assert.equal(distributionOf(entry), null, JSON.stringify(entry));
});

test('a panel opens on the chart\'s own environment, or on all of them', () => {
  assert.equal(initialEnv({ env: 'math' }, { env: '*' }), 'math');
  assert.equal(initialEnv({ env: null }, { env: 'countdown' }), 'countdown');
  assert.equal(initialEnv({ env: null }, { env: '*' }), null);
  assert.equal(initialEnv({ env: null }, { env: '@' }), null);
  assert.equal(initialEnv({ env: null }), null);
});

test('labels name steps, bins and numbers plainly', () => {
  assert.equal(stepLabel(5, 5), 'step 5');
  assert.equal(stepLabel(1000, 1999), 'steps 1,000\u20131,999');
  assert.equal(fmt(0.30000000000000004), '0.3');
  assert.equal(fmt(1024), '1,024');
  const edges = [0, 0.5, 1];
  assert.equal(binLabel(edges, 0, false), '[0, 0.5)');
  assert.equal(binLabel(edges, 1, false), '[0.5, 1]'); // the last bin holds its top edge
  assert.equal(binLabel([-0.5, 0.5, 1.5], 1, true), '1');
  assert.equal(binLabel([99.5, 149.5, 199.5], 0, true), '100\u2013149');
});

test('the trace puts bins on y, step buckets on x and every count in its cell', () => {
  const body = payload();
  const { data, total } = buildHeatmapFigure(body, light, { runId: 7, name: 'run <b>' });
  const [t] = data;
  assert.equal(t.type, 'heatmap');
  assert.deepEqual(t.x, [-0.5, 1.5, 3.5, 4.5]); // bucket edges: the last bucket is one step
  assert.deepEqual(t.y, [0, 0.5, 1, 1.5]);
  assert.deepEqual(t.z, [[3, null, 2], [null, null, 5], [1, null, null]]);
  const sum = t.z.flat().reduce((a, v) => a + (v ?? 0), 0);
  assert.equal(sum, body.total);
  assert.equal(total, 11);
  assert.equal(t.zmin, 0);
  assert.equal(t.zmax, 5);
  assert.equal(t.text[1][2], 'step 4<br>reward [0.5, 1)<br>5 samples');
  assert.equal(t.text[2][0], 'steps 0\u20131<br>reward [1, 1.5]<br>1 sample');
  assert.equal(t.name, 'run &lt;b&gt;');
  assert.deepEqual(t.meta, { role: 'distribution', run: 7, kind: 'reward', key: 'reward', env: null, total: 11 });
});

test('a metric name is escaped for Plotly in hover texts and the axis title', () => {
  const body = payload({ kind: 'sample', key: '<img src=x>', bins: [-0.5, 0.5], integer: true, counts: [[1], [0], [0]], total: 1 });
  const { data, layout } = buildHeatmapFigure(body, dark);
  assert.equal(data[0].text[0][0], 'steps 0\u20131<br>&lt;img src=x&gt; 0<br>1 sample');
  assert.equal(layout.yaxis.title.text, '&lt;img src=x&gt;');
});

test('the colour scale stands out from the card in the light and the dark theme', () => {
  assert.equal(isDark(light), false);
  assert.equal(isDark(dark), true);
  assert.equal(isDark({ bg: 'rgb(15, 19, 24)', fg: 'rgb(227, 231, 238)' }), true);
  assert.equal(colorscale(light), LIGHT_SCALE);
  assert.equal(colorscale(dark), DARK_SCALE);
  // The scale rises in contrast with the card: its top is further from the card than its bottom.
  const lum = (hex) => {
    const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255);
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  assert.ok(lum(LIGHT_SCALE.at(-1)[1]) < lum(LIGHT_SCALE[0][1]) && lum(LIGHT_SCALE[0][1]) < lum('#ffffff'));
  assert.ok(lum(DARK_SCALE.at(-1)[1]) > lum(DARK_SCALE[0][1]) && lum(DARK_SCALE[0][1]) > lum('#171c23'));
});

test('the summary says what was counted and how steps were bucketed', () => {
  assert.equal(summaryText(payload()), '11 kept samples with a finite value \u00b7 2 steps a column');
  assert.equal(summaryText(payload({ step_width: 1, total: 1 })), '1 kept sample with a finite value');
  assert.equal(summaryText(payload({ total: 0 })), 'No samples with a value yet.');
});

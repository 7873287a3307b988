// Saved chart settings and their badges (static/js/charts/prefs.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

// charts/prefs.js keeps its settings in localStorage: a Map stands in for it here.
const storage = new Map();
globalThis.localStorage = {
  getItem: (k) => (storage.has(k) ? storage.get(k) : null),
  setItem: (k, v) => storage.set(k, String(v)),
};

const { ChartPrefs, chartDefaults, settingBadges } = await import('../../static/js/charts/prefs.js');
const { ALL_TOGETHER, EVERY_ENV } = await import('../../static/js/charts/compose.js');

const reward = { id: 'reward|reward|mean|', kind: 'reward', key: 'reward', stat: 'mean', env: null };
const timing = { id: 'step|timing_step_total||', kind: 'step', key: 'timing_step_total', stat: null, env: null };

test('a composed chart\'s defaults add its legend\'s: envelope shown, every env', () => {
  assert.deepEqual(chartDefaults(reward), { ignoreOutliers: false, ignoreFirst: false, logY: false, yMin: null, yMax: null, band: true });
  assert.deepEqual(chartDefaults(reward, true), { ...chartDefaults(reward), envelope: true, env: EVERY_ENV });
  assert.equal(chartDefaults(timing).ignoreFirst, true);
});

test('the env filter, envelope and band of a composed chart survive a reload; only changes are kept', () => {
  storage.clear();
  const prefs = new ChartPrefs();
  assert.equal(prefs.has(reward), false);
  prefs.set(reward, { ...chartDefaults(reward, true), env: 'math', envelope: false, band: false }, true);
  assert.deepEqual(JSON.parse(storage.get('telescope.charts.v1')), { [reward.id]: { env: 'math', envelope: false, band: false } });
  const again = new ChartPrefs(); // a reload
  assert.equal(again.has(reward), true);
  assert.deepEqual(again.get(reward, true), { ...chartDefaults(reward, true), env: 'math', envelope: false, band: false });
  // Back to the defaults: nothing stored.
  again.set(reward, chartDefaults(reward, true), true);
  assert.equal(new ChartPrefs().has(reward), false);
});

test('a stored value of the wrong kind falls back to something valid', () => {
  storage.set('telescope.charts.v1', JSON.stringify({ [reward.id]: { env: 42, envelope: 'yes', yMax: 'x', logY: 1 } }));
  const got = new ChartPrefs().get(reward, true);
  assert.equal(got.env, EVERY_ENV);
  assert.equal(got.envelope, true);
  assert.equal(got.yMax, null);
  assert.equal(got.logY, true);
});

test('badges name every setting that differs from the defaults', () => {
  const d = chartDefaults(reward, true);
  assert.deepEqual(settingBadges(d, d, { band: true, envelope: true }), []);
  assert.deepEqual(settingBadges({ ...d, logY: true }, d), ['log y']);
  assert.deepEqual(settingBadges({ ...d, yMax: 5 }, d), ['y \u2264 5']);
  assert.deepEqual(settingBadges({ ...d, yMin: -0.5 }, d), ['y \u2265 -0.5']);
  assert.deepEqual(settingBadges({ ...d, yMin: 0, yMax: 1 }, d), ['0 \u2264 y \u2264 1']);
  assert.deepEqual(settingBadges({ ...d, ignoreOutliers: true, ignoreFirst: true }, d), ['outliers ignored', 'first step ignored']);
  assert.deepEqual(settingBadges({ ...d, band: false, envelope: false, env: 'math' }, d, { band: true, envelope: true }),
    ['no \u00b1 std', 'no min/max', 'env: math']);
  assert.deepEqual(settingBadges({ ...d, env: ALL_TOGETHER }, d), ['all envs together']);
  // A toggle the chart does not offer says nothing.
  assert.deepEqual(settingBadges({ ...d, band: false }, d, { band: false }), []);
});

test('a timing chart shows its first step only on request: that is the badge', () => {
  const d = chartDefaults(timing);
  assert.deepEqual(settingBadges(d, d), []);
  assert.deepEqual(settingBadges({ ...d, ignoreFirst: false }, d), ['first step shown']);
});

test('a stored Max time is hours, as the number input saved it; a negative one is no limit', async () => {
  const { loadPage } = await import('../../static/js/charts/prefs.js');
  const { formatDuration } = await import('../../static/js/core/duration.js');
  storage.set('telescope.page.v1', JSON.stringify({ maxTime: 1.5 }));
  assert.equal(loadPage().maxTime, 1.5);
  assert.equal(formatDuration(loadPage().maxTime * 3600), '1h30m'); // what the control shows
  storage.set('telescope.page.v1', JSON.stringify({ maxTime: -1 }));
  assert.equal(loadPage().maxTime, null);
});

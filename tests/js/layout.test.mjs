// The Custom view's layout operations (static/js/layout.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { addChart, labelOfId, MAX_CHARTS, moveChart, normalizeLayout, removeChart, setSettings, setWide } from '../../static/js/layout.js';

const ids = (charts) => charts.map((c) => c.id);
const three = () => ['a', 'b', 'c'].map((id) => ({ id, wide: false, settings: {} }));

test('normalizeLayout keeps good items in order and drops bad and repeated ones', () => {
  const got = normalizeLayout({ charts: [{ id: 'a', wide: true, settings: { logY: true, yMin: 0, bogus: 1, yMax: 'x' } },
    null, { id: 3 }, { id: '' }, { id: 'a' }, { id: 'b', wide: 'yes' }] });
  assert.deepEqual(got, { charts: [{ id: 'a', wide: true, settings: { logY: true, yMin: 0 } }, { id: 'b', wide: false, settings: {} }] });
  assert.deepEqual(normalizeLayout(null), { charts: [] });
  assert.deepEqual(normalizeLayout({ charts: 'nope' }), { charts: [] });
  const many = { charts: Array.from({ length: MAX_CHARTS + 5 }, (_, i) => ({ id: `k${i}` })) };
  assert.equal(normalizeLayout(many).charts.length, MAX_CHARTS);
});

test('addChart inserts before an index, appends by default, and moves an id already there', () => {
  assert.deepEqual(ids(addChart(three(), 'x')), ['a', 'b', 'c', 'x']);
  assert.deepEqual(ids(addChart(three(), 'x', 0)), ['x', 'a', 'b', 'c']);
  assert.deepEqual(ids(addChart(three(), 'x', 99)), ['a', 'b', 'c', 'x']);
  assert.deepEqual(ids(addChart(three(), 'c', 0)), ['c', 'a', 'b']);
  const full = Array.from({ length: MAX_CHARTS }, (_, i) => ({ id: `k${i}`, wide: false, settings: {} }));
  assert.equal(addChart(full, 'extra').length, MAX_CHARTS);
});

test('moveChart lands the chart before the one at the target index', () => {
  assert.deepEqual(ids(moveChart(three(), 'c', 0)), ['c', 'a', 'b']);
  assert.deepEqual(ids(moveChart(three(), 'a', 2)), ['b', 'a', 'c']); // before c
  assert.deepEqual(ids(moveChart(three(), 'a', 3)), ['b', 'c', 'a']); // to the end
  assert.deepEqual(ids(moveChart(three(), 'b', 1)), ['a', 'b', 'c']); // onto itself
  assert.deepEqual(ids(moveChart(three(), 'zz', 0)), ['a', 'b', 'c']);
});

test('remove, wide and settings return new lists and leave the input alone', () => {
  const before = three();
  assert.deepEqual(ids(removeChart(before, 'b')), ['a', 'c']);
  assert.equal(setWide(before, 'b', true)[1].wide, true);
  const defaults = { ignoreOutliers: false, ignoreFirst: true, logY: false, band: true, yMin: null, yMax: null };
  const set = setSettings(before, 'a', { ...defaults, logY: true, ignoreFirst: false, yMax: 3 }, defaults);
  assert.deepEqual(set[0].settings, { ignoreFirst: false, logY: true, yMax: 3 });
  assert.deepEqual(before, three());
});

test('labelOfId reads series ids', () => {
  assert.equal(labelOfId('step|loss%2Fpolicy||'), 'loss/policy');
  assert.equal(labelOfId('reward|reward|mean|countdown'), 'reward mean (countdown)');
  assert.equal(labelOfId('odd'), 'odd');
});

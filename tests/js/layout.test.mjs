// The Custom view's layout format (static/js/custom/layout.js): version 2, migration of version 1
// layouts (what the page saved before sections existed), checks and limits.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  countNodes, labelOfId, LIMITS, migrateLayout, nextId, normalizeLayout, plotsOf, VERSION,
} from '../../static/js/custom/layout.js';

// A layout as the version before sections saved it (telescope_ui/layouts.py, version 1).
const V1 = { charts: [
  { id: 'step|entropy||', wide: true, settings: { logY: true, yMax: 2.5 } },
  { id: 'reward|reward|mean|countdown', wide: false, settings: {} },
] };

const plot = (id, sids, extra = {}) => ({ type: 'plot', id, title: '', wide: false, settings: {},
  series: sids.map((s) => ({ id: s, axis: 'auto' })), ...extra });

test('a version 1 layout migrates to one section of one-series plots, order and settings kept', () => {
  const got = normalizeLayout(V1);
  assert.deepEqual(got, { version: VERSION, sections: [{ id: 's1', title: 'Charts', collapsed: false, items: [
    plot('p1', ['step|entropy||'], { wide: true, settings: { logY: true, yMax: 2.5 } }),
    plot('p2', ['reward|reward|mean|countdown']),
  ] }] });
  assert.deepEqual(migrateLayout({ charts: [] }), { version: VERSION, sections: [] });
  assert.deepEqual(normalizeLayout(null), { version: VERSION, sections: [] });
  // What the server answers is version 2 already: unchanged.
  assert.deepEqual(normalizeLayout(got), got);
});

test('normalizeLayout drops what does not fit and keeps the rest in order', () => {
  const got = normalizeLayout({ version: 2, sections: [
    { id: 's1', title: ' Main\u0007 ', collapsed: 'yes', items: [
      plot('p1', ['a', 'a', 'b'], { settings: { logY: true, bogus: 1, yMin: 'x' }, series: [
        { id: 'a', axis: 'right' }, { id: 'a', axis: 'left' }, { id: 'b', axis: 'up' }, { id: 5 }] }),
      { type: 'plot', id: 'p2', series: [] }, // nothing to draw
      null,
      { type: 'group', id: 'g1', title: 'G', plots: [plot('p3', ['c']), { type: 'group', id: 'g2', plots: [] }] },
    ] },
    'not a section',
  ] });
  assert.deepEqual(got.sections, [{ id: 's1', title: 'Main', collapsed: false, items: [
    { type: 'plot', id: 'p1', title: '', wide: false, settings: { logY: true },
      series: [{ id: 'a', axis: 'right' }, { id: 'b', axis: 'auto' }] },
    { type: 'group', id: 'g1', title: 'G', plots: [plot('p3', ['c'])] },
  ] }]);
});

test('repeated or malformed node ids get fresh ones, never a clash', () => {
  const got = normalizeLayout({ version: 2, sections: [
    { id: 's1', items: [plot('p1', ['a']), plot('p1', ['b']), plot('bad id!', ['c'])] },
    { id: 'p2', items: [] },
  ] });
  const ids = [...got.sections.map((s) => s.id), ...plotsOf(got).map((p) => p.plot.id)];
  assert.equal(new Set(ids).size, ids.length);
  assert.deepEqual(plotsOf(got).map((p) => p.plot.series[0].id), ['a', 'b', 'c']);
  assert.equal(got.sections[1].id, 'p2'); // a valid id is kept, whatever its letter
});

test('limits: sections, plots (across sections and groups) and series per plot', () => {
  const many = (n, make) => Array.from({ length: n }, (_, i) => make(i));
  const wide = normalizeLayout({ version: 2, sections: many(LIMITS.sections + 3, (i) => ({ id: `s${i}`, items: [] })) });
  assert.equal(wide.sections.length, LIMITS.sections);
  const full = normalizeLayout({ version: 2, sections: [
    { id: 's1', items: many(200, (i) => plot(`a${i}`, ['x'])) },
    { id: 's2', items: [{ type: 'group', id: 'g', plots: many(200, (i) => plot(`b${i}`, ['x'])) }] },
  ] });
  assert.equal(countNodes(full).plots, LIMITS.plots);
  const series = normalizeLayout({ version: 2, sections: [{ id: 's', items: [plot('p', many(20, (i) => `k${i}`))] }] });
  assert.equal(series.sections[0].items[0].series.length, LIMITS.series);
});

test('nextId picks the first free number of a prefix', () => {
  const l = normalizeLayout({ version: 2, sections: [{ id: 's1', items: [plot('p1', ['a']), plot('p3', ['b'])] }] });
  assert.equal(nextId(l, 'p'), 'p2');
  assert.equal(nextId(l, 'p', new Set(['p2'])), 'p4');
  assert.equal(nextId(l, 's'), 's2');
});

test('labelOfId reads series ids', () => {
  assert.equal(labelOfId('step|loss%2Fpolicy||'), 'loss/policy');
  assert.equal(labelOfId('reward|reward|mean|countdown'), 'reward mean (countdown)');
  assert.equal(labelOfId('odd'), 'odd');
});

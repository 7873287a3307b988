// Edits of a Custom view layout (static/js/custom/ops.js): insert, move within and across
// containers, the keyboard's steps, drops from the metric list, series of a plot.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  addSeries, dropInto, findNode, insertNode, moveNode, NEW_SECTION, newGroup, newPlot, newSection, removeNode,
  removeSeries, ROOT, setAxis, setPlotSettings, shiftNode, updateNode,
} from '../../static/js/custom/ops.js';
import { LIMITS, normalizeLayout } from '../../static/js/custom/layout.js';

const plot = (id, sid = id) => ({ type: 'plot', id, title: '', wide: false, settings: {}, series: [{ id: sid, axis: 'auto' }] });

// s1: a, G(b, c), d    s2: e    s3: (empty)
function board() {
  return normalizeLayout({ version: 2, sections: [
    { id: 's1', title: 'One', items: [plot('a'), { type: 'group', id: 'G', title: 'G', plots: [plot('b'), plot('c')] }, plot('d')] },
    { id: 's2', title: 'Two', items: [plot('e')] },
    { id: 's3', title: 'Three', items: [] },
  ] });
}

/** The page order as text: `s1[a G(b c) d] s2[e] s3[]`. */
function shape(l) {
  return l.sections.map((s) => `${s.id}[${s.items.map((it) => (it.type === 'group'
    ? `${it.id}(${it.plots.map((p) => p.id).join(' ')})` : it.id)).join(' ')}]`).join(' ');
}

test('findNode says where a node sits', () => {
  const l = board();
  assert.deepEqual(({ ...findNode(l, 'c'), node: undefined, section: findNode(l, 'c').section.id }),
    { node: undefined, container: 'G', index: 1, section: 's1' });
  assert.equal(findNode(l, 's2').container, ROOT);
  assert.equal(findNode(l, 'nope'), null);
});

test('moveNode: within a container, the node ends at the index asked', () => {
  assert.equal(shape(moveNode(board(), 'a', 's1', 2)), 's1[G(b c) d a] s2[e] s3[]');
  assert.equal(shape(moveNode(board(), 'd', 's1', 0)), 's1[d a G(b c)] s2[e] s3[]');
  assert.equal(shape(moveNode(board(), 'c', 'G', 0)), 's1[a G(c b) d] s2[e] s3[]');
  assert.equal(shape(moveNode(board(), 's3', ROOT, 0)), 's3[] s1[a G(b c) d] s2[e]');
  const l = board();
  assert.equal(moveNode(l, 'a', 's1', 0), l); // where it is already: the same layout
});

test('moveNode: across containers, into and out of groups, into an empty section', () => {
  assert.equal(shape(moveNode(board(), 'a', 'G', 1)), 's1[G(b a c) d] s2[e] s3[]');
  assert.equal(shape(moveNode(board(), 'c', 's2', 0)), 's1[a G(b) d] s2[c e] s3[]');
  assert.equal(shape(moveNode(board(), 'b', 's1', 3)), 's1[a G(c) d b] s2[e] s3[]');
  assert.equal(shape(moveNode(board(), 'G', 's3', 0)), 's1[a d] s2[e] s3[G(b c)]');
  assert.equal(shape(moveNode(board(), 'e', 's3', 99)), 's1[a G(b c) d] s2[] s3[e]');
});

test('moveNode refuses what does not nest: groups in groups, sections anywhere but the root', () => {
  const l = insertNode(board(), 's2', 1, { type: 'group', id: 'H', title: '', plots: [] });
  assert.equal(moveNode(l, 'H', 'G', 0), l);
  assert.equal(moveNode(l, 'G', 'G', 0), l);
  assert.equal(moveNode(l, 's2', 's1', 0), l);
  assert.equal(moveNode(l, 'a', ROOT, 0), l);
  assert.equal(moveNode(l, 'a', 'nowhere', 0), l);
});

test('insertNode and removeNode; limits refuse an insert', () => {
  const l = board();
  assert.equal(shape(insertNode(l, 's3', 0, plot('x'))), 's1[a G(b c) d] s2[e] s3[x]');
  assert.equal(shape(insertNode(l, 's1', 1, newGroup(l, 'N', ['p', 'q']))), 's1[a g1(p1 p2) G(b c) d] s2[e] s3[]');
  assert.equal(shape(removeNode(l, 'G')), 's1[a d] s2[e] s3[]');
  assert.equal(shape(removeNode(l, 'b')), 's1[a G(c) d] s2[e] s3[]');
  let full = normalizeLayout({ version: 2, sections: [{ id: 's1', items: Array.from({ length: LIMITS.plots }, (_, i) => plot(`k${i}`)) }] });
  assert.equal(insertNode(full, 's1', 0, plot('one-more')), full);
  full = normalizeLayout({ version: 2, sections: Array.from({ length: LIMITS.sections }, (_, i) => ({ id: `s${i}`, items: [] })) });
  assert.equal(insertNode(full, ROOT, 0, newSection(full, 'x')), full);
});

test('shiftNode: the keyboard steps a plot through groups and sections', () => {
  const steps = (id, by, n) => {
    const seen = [];
    let l = board();
    for (let i = 0; i < n; i++) {
      l = shiftNode(l, id, by);
      seen.push(shape(l));
    }
    return seen;
  };
  assert.deepEqual(steps('a', 1, 6), [
    's1[G(a b c) d] s2[e] s3[]', // into the group it meets
    's1[G(b a c) d] s2[e] s3[]',
    's1[G(b c a) d] s2[e] s3[]',
    's1[G(b c) a d] s2[e] s3[]', // out of the group at its end
    's1[G(b c) d a] s2[e] s3[]',
    's1[G(b c) d] s2[a e] s3[]', // on into the next section
  ]);
  assert.deepEqual(steps('e', -1, 3), [
    's1[a G(b c) d e] s2[] s3[]', // back to the end of the previous section
    's1[a G(b c) e d] s2[] s3[]',
    's1[a G(b c e) d] s2[] s3[]', // into the group from its end
  ]);
  const l = board();
  assert.equal(shiftNode(l, 'a', -1), l); // first of all: nowhere to go
  assert.equal(shiftNode(l, 's1', -1), l);
  assert.equal(shiftNode(l, 's3', 1), l);
});

test('shiftNode: groups step over plots and on to the next section; sections among sections', () => {
  assert.equal(shape(shiftNode(board(), 'G', -1)), 's1[G(b c) a d] s2[e] s3[]');
  assert.equal(shape(shiftNode(shiftNode(board(), 'G', 1), 'G', 1)), 's1[a d] s2[G(b c) e] s3[]');
  assert.equal(shape(shiftNode(board(), 's1', 1)), 's2[e] s1[a G(b c) d] s3[]');
});

test('dropInto: a metric becomes a plot, a list group a group (or its plots in a group), a board node moves', () => {
  const l = board();
  const m = dropInto(l, { metric: 'step|kl||', settings: { logY: true } }, 's2', 1);
  assert.equal(shape(m), 's1[a G(b c) d] s2[e p1] s3[]');
  assert.deepEqual(findNode(m, 'p1').node.settings, { logY: true });
  assert.equal(shape(dropInto(l, { ids: ['x', 'y'], title: 'reward' }, 's3', 0)), 's1[a G(b c) d] s2[e] s3[g1(p1 p2)]');
  assert.equal(findNode(dropInto(l, { ids: ['x'], title: 'reward' }, 's3', 0), 'g1').node.title, 'reward');
  assert.equal(shape(dropInto(l, { ids: ['x', 'y'], title: 'reward' }, 'G', 1)), 's1[a G(b p1 p2 c) d] s2[e] s3[]');
  assert.equal(shape(dropInto(l, { node: 'd' }, 'G', 0)), 's1[a G(d b c)] s2[e] s3[]');
  assert.equal(dropInto(l, { node: 'G' }, 'G', 0), l);
});

test('dropInto a new section: made at the end, titled after the list section, only when something lands', () => {
  const l = board();
  const m = dropInto(l, { metric: 'step|kl||', section: 'General' }, NEW_SECTION, 0);
  assert.equal(shape(m), 's1[a G(b c) d] s2[e] s3[] s4[p1]');
  assert.equal(m.sections[3].title, 'General');
  assert.equal(shape(dropInto(l, { node: 'G' }, NEW_SECTION, 0)), 's1[a d] s2[e] s3[] s4[G(b c)]');
  assert.equal(dropInto(l, { node: 's2' }, NEW_SECTION, 0), l); // a section in a section: nothing
});

test('a plot holds several series, each once, up to the limit; the last one stays', () => {
  let l = board();
  l = addSeries(l, 'a', 'step|kl_max||', 'right');
  l = addSeries(l, 'a', 'step|kl_max||'); // twice: no
  assert.deepEqual(findNode(l, 'a').node.series, [{ id: 'a', axis: 'auto' }, { id: 'step|kl_max||', axis: 'right' }]);
  l = addSeries(l, 'b', 'a'); // the same series in another plot: yes
  assert.deepEqual(findNode(l, 'b').node.series.map((s) => s.id), ['b', 'a']);
  l = setAxis(l, 'a', 'a', 'left');
  assert.equal(findNode(l, 'a').node.series[0].axis, 'left');
  assert.equal(setAxis(l, 'a', 'a', 'up'), l);
  l = removeSeries(l, 'a', 'a');
  assert.deepEqual(findNode(l, 'a').node.series.map((s) => s.id), ['step|kl_max||']);
  assert.equal(removeSeries(l, 'a', 'step|kl_max||'), l);
  let many = board();
  for (let i = 0; i < 20; i++) many = addSeries(many, 'd', `k${i}`);
  assert.equal(findNode(many, 'd').node.series.length, LIMITS.series);
});

test('titles, widths, collapse and settings: a new layout only when something changes', () => {
  const l = board();
  const t = updateNode(l, 'G', { title: '  KL\n' });
  assert.equal(findNode(t, 'G').node.title, 'KL');
  assert.equal(updateNode(t, 'G', { title: 'KL' }), t);
  assert.equal(findNode(updateNode(l, 's2', { collapsed: true }), 's2').node.collapsed, true);
  const defaults = { ignoreOutliers: false, ignoreFirst: false, logY: false, band: true, yMin: null, yMax: null };
  const s = setPlotSettings(l, 'c', { ...defaults, logY: true, yMax: 3 }, defaults);
  assert.deepEqual(findNode(s, 'c').node.settings, { logY: true, yMax: 3 });
  assert.equal(setPlotSettings(s, 'c', { ...defaults, logY: true, yMax: 3 }, defaults), s);
  assert.equal(shape(l), shape(board())); // inputs untouched
  assert.equal(newPlot(l, ['x']).id, 'p1');
});

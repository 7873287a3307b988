// The sample viewer's pure parts (static/js/samples/pure.js) and the chart-click link to it
// (static/js/charts/samplelink.js): colours by range and invert, groups, best vs worst, search
// highlighting, the API query, and the step a click on a chart lands on.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  bestAndWorst, countMatches, fmt, groupsOf, highlightParts, hueOf, keyOf, normalized, samplesQuery,
} from '../../static/js/samples/pure.js';
import { linksSamples, samplesUrl, stepOfClick } from '../../static/js/charts/samplelink.js';

test('a value is placed in its range, clamped, reversed when inverted', () => {
  const r = { min: 0, max: 2, invert: false };
  assert.equal(normalized(0, r), 0);
  assert.equal(normalized(1.5, r), 0.75);
  assert.equal(normalized(5, r), 1);
  assert.equal(normalized(-1, r), 0);
  assert.equal(normalized(1.5, { ...r, invert: true }), 0.25);
  assert.equal(normalized(3, { min: 3, max: 3, invert: false }), 0.5); // degenerate
  assert.equal(normalized(null, r), null);
  assert.equal(normalized(1, { min: null, max: 2 }), null); // no range known yet
  assert.equal(normalized(1, null), null);
  assert.deepEqual([0, 0.5, 1].map(hueOf), [0, 60, 120]); // red, yellow, green
});

test('numbers are shown short, nulls as a dash', () => {
  assert.equal(fmt(null), '—');
  assert.equal(fmt(1234), '1,234');
  assert.equal(fmt(0.123456), '0.1235');
  assert.equal(fmt(Number.NaN), '—');
});

const s = (group_id, sample_id, reward) => ({ group_id, sample_id, reward });

test('samples in API order make one group per run of a group id', () => {
  const groups = groupsOf([s('a', 1, 1), s('a', 2, 0), s(7, 3, 1), s('7', 4, 0.5)]);
  assert.deepEqual(groups.map((g) => [g.id, g.samples.length]), [['a', 2], ['7', 2]]);
  assert.equal(keyOf(s('g', 'x', 0)), 'g\u241fx');
});

test('best and worst of a group: highest and lowest finite reward', () => {
  const pair = bestAndWorst([s('g', 1, 0.5), s('g', 2, null), s('g', 3, 0.9), s('g', 4, 0.1)]);
  assert.deepEqual([pair.best.sample_id, pair.worst.sample_id], [3, 4]);
  assert.equal(bestAndWorst([s('g', 1, 1)]), null);
  const tied = bestAndWorst([s('g', 1, 1), s('g', 2, 1)]);
  assert.deepEqual([tied.best.sample_id, tied.worst.sample_id], [1, 2]);
});

test('search marks case-insensitive matches and treats the query as text', () => {
  assert.deepEqual(highlightParts('a Needle, a needle', 'needle'), [
    { text: 'a ', match: false }, { text: 'Needle', match: true }, { text: ', a ', match: false },
    { text: 'needle', match: true }]);
  assert.deepEqual(highlightParts('(x+1)*2 = (x+1)', '(x+1)').filter((p) => p.match).length, 2);
  assert.deepEqual(highlightParts('plain', ''), [{ text: 'plain', match: false }]);
  assert.deepEqual(highlightParts('', 'q'), [{ text: '', match: false }]);
  assert.equal(countMatches('ÉCOLE école', 'école'), 2);
  assert.equal(countMatches(null, 'x'), 0);
});

test('the API query carries the step, the filters in use, paging and text', () => {
  const q = new URLSearchParams(samplesQuery(4, { env: 'math', kept: '', min_reward: 0 },
    { offset: 10, limit: 20, text: true }));
  assert.deepEqual(Object.fromEntries(q), { step: '4', env: 'math', min_reward: '0', offset: '10',
    limit: '20', text: '1' });
  assert.equal(new URLSearchParams(samplesQuery(null, {})).has('step'), false);
});

test('reward and sample-metric charts link to the viewer', () => {
  assert.equal(linksSamples({ entry: { kind: 'reward' } }), true);
  assert.equal(linksSamples({ entry: { kind: 'sample' } }), true);
  assert.equal(linksSamples({ entry: { kind: 'step' } }), false);
  assert.equal(samplesUrl(3, 12), '/runs/3/samples?step=12');
  assert.equal(samplesUrl(3), '/runs/3/samples');
});

test('a click gives the run and step of the point under it', () => {
  const raw = { meta: { run: 2, role: 'raw' } };
  const band = { meta: { run: 2, role: 'band' } };
  assert.deepEqual(stepOfClick([{ data: band, x: 4 }, { data: raw, x: 5 }], null, { xaxis: 'step' }),
    { run: 2, step: 5 });
  assert.equal(stepOfClick([{ data: band, x: 4 }], null, { xaxis: 'step' }), null);
  assert.equal(stepOfClick([], null, {}), null);
  // On a time axis, the run's drawn point nearest the click: steps 10, 20, 30 at 0, 60, 120 s.
  const fig = { unit: { unit: 'min', seconds: 60 },
    prepared: [{ run: { id: 2 }, t0: 1000, step: [10, 20, 30], time: [1000, 1060, 1120] }] };
  const at = stepOfClick([{ data: raw, x: 1.1 }], fig, { xaxis: 'time' });
  assert.deepEqual(at, { run: 2, step: 20 });
});

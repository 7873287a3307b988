// The Normalize toggle's pure rules (static/js/charts/normalized.js): which charts switch, twin
// look-up per run, and the range badge.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  badgeFor, chartBadge, formatBound, normalizes, rangeText, TwinIndex,
} from '../../static/js/charts/normalized.js';

const e = (over = {}) => ({ id: 'x', kind: 'reward', key: 'reward', stat: 'mean', env: null, ...over });

test('only raw reward and sample-metric charts normalize', () => {
  assert.ok(normalizes(e()));
  assert.ok(normalizes(e({ kind: 'sample', key: 'correct' })));
  for (const kind of ['step', 'advantage', 'groups', 'rollouts', 'discarded', 'ranges']) {
    assert.equal(normalizes(e({ kind })), false, kind);
  }
  assert.equal(normalizes(e({ normalized: true })), false);
  assert.equal(normalizes(e({ kind: 'step', key: 'optim/outcome', stat: null, categorical: true })), false);
});

test('a twin is found by kind, key, stat and env in the run\'s own catalog', () => {
  const idx = new TwinIndex();
  const entries = [
    e({ id: 'r-mean' }), e({ id: 'n-mean', normalized: true }),
    e({ id: 'r-std', stat: 'std' }), e({ id: 'n-std', stat: 'std', normalized: true }),
    e({ id: 'r-count', stat: 'count' }),
    e({ id: 'r-cd', env: 'countdown' }), e({ id: 'n-cd', env: 'countdown', normalized: true }),
    e({ id: 's-mean', kind: 'sample', key: 'reward' }), // same key, other kind: no twin of its own
    e({ id: 'loss', kind: 'step', key: 'loss', stat: null }),
  ];
  for (const x of entries) idx.add(x);
  assert.equal(idx.twinOf(entries[0]), 'n-mean');
  assert.equal(idx.twinOf(entries[0], 'std'), 'n-std');
  assert.equal(idx.twinOf(entries[4]), null); // count has no twin
  assert.equal(idx.twinOf(entries[5]), 'n-cd');
  assert.equal(idx.twinOf(entries[7]), null);
  assert.equal(idx.rawOf(entries[1]), 'r-mean');
  assert.equal(idx.rawOf(entries[3]), 'r-std');
  assert.equal(idx.rawOf(entries[0]), null);
  assert.equal(idx.rawOf(undefined), null);
});

test('bounds print with a true minus sign and at most 4 significant digits', () => {
  assert.equal(formatBound(2), '2');
  assert.equal(formatBound(-0.3), '\u22120.3');
  assert.equal(formatBound(1 / 3), '0.3333');
  assert.equal(formatBound(null), '?');
});

test('one environment: where its range came from', () => {
  assert.equal(rangeText({ source: 'declared', min: 0, max: 2 }), 'declared 0\u20132');
  assert.equal(rangeText({ source: 'observed', min: -0.3, max: 1.7 }), 'observed \u22120.3\u20131.7');
  assert.equal(rangeText({ source: 'declared', min: 0, max: 20, invert: true }), 'declared 0\u201320 inverted');
  assert.equal(rangeText({ source: 'degenerate', min: 1, max: 1 }), 'degenerate');
});

test('the badge of a per-environment series, and a degenerate one flagged', () => {
  assert.equal(badgeFor({ min: 0, max: 2, source: 'declared' }), null); // raw: no badge
  const b = badgeFor({ normalized: true, env: 'countdown', min: 0, max: 2, source: 'declared', invert: false });
  assert.equal(b.text, 'declared 0\u20132');
  assert.equal(b.degenerate, false);
  assert.match(b.title, /countdown: declared 0–2/);
  const d = badgeFor({ normalized: true, env: 'math', min: 1, max: 1, source: 'degenerate', invert: false });
  assert.equal(d.text, 'degenerate');
  assert.equal(d.degenerate, true);
  assert.match(d.title, /every value was 1, so all map to 0\.5/);
});

test('the badge of the all-environments series lists each environment', () => {
  const envs = [
    { env: 'countdown', min: 0, max: 2, source: 'declared', invert: false },
    { env: 'math', min: 0, max: 1, source: 'observed', invert: false },
  ];
  const all = badgeFor({ normalized: true, min: 0, max: 1, source: 'mixed', envs });
  assert.equal(all.text, 'per env: countdown declared 0\u20132 \u00b7 math observed 0\u20131');
  assert.equal(all.degenerate, false);
  const one = badgeFor({ normalized: true, min: 0, max: 1, source: 'declared', envs: envs.slice(0, 1) });
  assert.equal(one.text, 'declared 0\u20132');
  const bad = badgeFor({ normalized: true, min: 0, max: 1, source: 'mixed',
    envs: [envs[0], { env: 'x', min: 3, max: 3, source: 'degenerate' }] });
  assert.equal(bad.degenerate, true);
  assert.equal(badgeFor({ normalized: true, min: 0, max: 1, source: 'declared', envs: [] }).text, 'normalized');
});

test('a chart\'s badge: one text when the runs agree, each run named when they differ', () => {
  const decl = { normalized: true, env: 'c', min: 0, max: 2, source: 'declared' };
  const obs = { normalized: true, env: 'c', min: 0, max: 5, source: 'observed' };
  assert.equal(chartBadge([{ name: 'a', range: null }]), null);
  assert.equal(chartBadge([{ name: 'a', range: decl }, { name: 'b', range: decl }]).text, 'declared 0\u20132');
  const two = chartBadge([{ name: 'a', range: decl }, { name: 'b', range: obs }, { name: 'c', range: null }]);
  assert.equal(two.text, 'a: declared 0\u20132 | b: observed 0\u20135');
  assert.match(two.title, /^a: Normalized/);
});

// The aggregation backlog chip of the run bar and the overview (runs/state.js): shown for a real backlog only, in
// neutral words.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BACKLOG, backlogShown, backlogText } from '../../static/js/runs/state.js';

test('a live run a step or two behind shows no backlog, however long', () => {
  for (const pending of [0, 1, 2, BACKLOG.steps]) {
    assert.equal(backlogShown(pending, 0, 60_000), false, String(pending));
  }
});

test('more than a few steps show only once they have lasted a few seconds', () => {
  const n = BACKLOG.steps + 1;
  assert.equal(backlogShown(n, 1000, 1000), false);
  assert.equal(backlogShown(n, 1000, 1000 + BACKLOG.ms - 1), false);
  assert.equal(backlogShown(n, 1000, 1000 + BACKLOG.ms), true);
  assert.equal(backlogShown(n, null, 1e9), false);
});

test('a large backlog (a range change) shows at once', () => {
  assert.equal(backlogShown(BACKLOG.large, 5000, 5000), true);
});

test('the words are neutral', () => {
  assert.equal(backlogText(1204), 'catching up · 1,204 steps to aggregate');
  assert.equal(backlogText(1), 'catching up · 1 step to aggregate');
  assert.equal(backlogText(0), '');
  assert.ok(!/left|behind|warn|error/i.test(backlogText(7)));
});

// A run's state on the pages: progress counts steps (a Hugging Face run's steps
// 1..24 are 24 of 24, as steps 0..23 are), every status the server derives has its badge and
// the run list filters and sorts by it, statuses that drift by the clock are re-read, a
// deleted run's words, and the live connection's words (never a run status).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { sortRuns, STATUSES as LISTED } from '../../static/js/runs/filter.js';
import { progressOf, progressText, stepSeconds, stepsDone } from '../../static/js/runs/progress.js';
import { BADGE_CLASS, STATUSES, connectionText, deletedText, deletion, statusMayDrift } from '../../static/js/runs/state.js';

test('progress counts steps done, from the server when it says', () => {
  const hf = { first_step: 1, last_step: 24, steps_done: 24, total_steps: 24 };
  assert.deepEqual(progressOf(hf), { done: 24, total: 24, fraction: 1 });
  assert.equal(progressText(hf), '24 of 24 steps · 100%');
  const fromZero = { first_step: 0, last_step: 23, steps_done: 24, total_steps: 24 };
  assert.equal(progressText(fromZero), '24 of 24 steps · 100%');
  // The server's count wins over what the step numbers suggest.
  assert.equal(stepsDone({ first_step: 0, last_step: 9, steps_done: 7 }), 7);
  assert.equal(progressText({ first_step: 1, last_step: 8, steps_done: 8, total_steps: 8 }), '8 of 8 steps · 100%');
});

test('without steps_done (an older server), the rule of ingest/progress.py', () => {
  assert.equal(stepsDone({ first_step: 1, last_step: 24 }), 24);
  assert.equal(stepsDone({ first_step: 0, last_step: 23 }), 24);
  assert.equal(stepsDone({ last_step: 23 }), 24);
  assert.equal(stepsDone({ first_step: null, last_step: null, steps_done: null }), 0);
  assert.equal(progressText({ first_step: null, last_step: null, steps_done: null, total_steps: 24 }), 'no steps yet of 24');
});

test('the pace from the ETA divides by the steps left, counted from steps done', () => {
  const info = { status: 'running', eta_seconds: 40, first_step: 1, last_step: 80, steps_done: 80, total_steps: 100 };
  assert.equal(stepSeconds(info), 2); // 40 s for 20 steps left (not 19)
});

test('every status has its badge; crashed sorts and filters on the run list', () => {
  assert.deepEqual(STATUSES, ['running', 'idle', 'crashed', 'finished', 'failed']);
  assert.equal(LISTED, STATUSES); // one list
  for (const s of [...STATUSES, 'deleted']) assert.ok(BADGE_CLASS[s], s);
  assert.equal(BADGE_CLASS.crashed, 'crashed');
  const runs = [{ id: 1, status: 'finished' }, { id: 2, status: 'crashed' }, { id: 3, status: 'running' }];
  assert.deepEqual(sortRuns(runs, 'status').map((r) => r.id), [3, 2, 1]);
});

test('a status that can change by the clock alone is re-read; an ended one is not', () => {
  assert.deepEqual(STATUSES.filter(statusMayDrift), ['running', 'idle', 'crashed']);
  assert.equal(statusMayDrift('deleted'), false);
  assert.equal(statusMayDrift(undefined), false);
});

test('a deleted run: its info says so, and its banner says what and when', () => {
  const at = Date.parse('2026-01-01T12:00:00Z');
  const info = { id: 3, deleted: true, name: 'grpo-live', project: 'demo', deleted_at: '2026-01-01T12:00:00+00:00' };
  assert.deepEqual(deletion(info), { name: 'grpo-live', project: 'demo', deletedAt: info.deleted_at });
  assert.equal(deletion({ id: 3, status: 'running' }), null);
  assert.equal(deletion(null), null);
  assert.equal(deletedText(info, at + 5000), 'This run was deleted just now: “grpo-live” and all its data are gone.');
  assert.equal(deletedText(info, at + 125_000), 'This run was deleted 2 min ago: “grpo-live” and all its data are gone.');
  assert.equal(deletedText({ id: 3, deleted: true }), 'This run was deleted.');
});

test('the live connection speaks of the connection, never of the run', () => {
  const words = ['live', 'reconnecting', 'stopped'].map((s) => connectionText(s).text);
  assert.deepEqual(words, ['● connected', 'reconnecting…', '']);
  for (const w of words) for (const s of [...STATUSES, 'live']) assert.ok(!w.toLowerCase().includes(s), `${w} / ${s}`);
});

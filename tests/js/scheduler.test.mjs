// The draw scheduler (static/js/core/scheduler.js): a chart never drawn is drawn in the first
// frame it is asked for, whatever the page's age; a drawn one waits its interval.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Scheduler } from '../../static/js/core/scheduler.js';

/** requestAnimationFrame collected, run by hand: one call runs one frame. */
function frames() {
  const queued = [];
  globalThis.requestAnimationFrame = (fn) => queued.push(fn);
  return () => queued.splice(0).forEach((fn) => fn());
}

function chart(order, over = {}) {
  const c = { order, near: true, inView: true, lastDraw: 0, draws: 0, ready: () => true, ...over };
  c.draw = () => { c.draws += 1; c.lastDraw = performance.now(); };
  return c;
}

test('a chart never drawn is drawn in the first frame, even on a page younger than the interval', () => {
  const frame = frames();
  // An interval longer than the process has lived: lastDraw 0 counted as a draw at time 0
  // would hold the chart back (a warm load's first screen waited ~100 ms for it).
  const scheduler = new Scheduler({ minInterval: performance.now() + 60_000 });
  const fresh = chart(1);
  scheduler.request(fresh);
  frame();
  assert.equal(fresh.draws, 1);
});

test('a drawn chart waits for its interval before it is drawn again', () => {
  const frame = frames();
  const scheduler = new Scheduler({ minInterval: 60_000 });
  const drawn = chart(1);
  scheduler.request(drawn);
  frame();
  scheduler.request(drawn);
  frame();
  assert.equal(drawn.draws, 1);
  assert.ok(scheduler.queue.has(drawn), 'still queued for its next turn');
  clearTimeout(scheduler.timer);
});

test('the queue settles once nothing in view is left to draw', () => {
  const frame = frames();
  const scheduler = new Scheduler();
  let settled = 0;
  scheduler.onSettled = () => { settled += 1; };
  const a = chart(1);
  const b = chart(2, { inView: false });
  scheduler.request(a);
  scheduler.request(b);
  frame();
  assert.deepEqual([a.draws, b.draws, settled], [1, 1, 1]);
});

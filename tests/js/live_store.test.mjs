// Live protocol client (static/js/core/live.js) and the run store (static/js/charts/store.js): sequence
// checking, resync, reconnect, and snapshot + deltas = current.
import { test } from 'node:test';
import assert from 'node:assert/strict';

class FakeSocket {
  static OPEN = 1;
  static all = [];
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.all.push(this);
  }
  send(text) { this.sent.push(JSON.parse(text)); }
  close() { this.readyState = 3; this.onclose?.(); }
  open() { this.readyState = 1; this.onopen?.(); }
  receive(msg) { this.onmessage?.({ data: JSON.stringify(msg) }); }
}
globalThis.WebSocket = FakeSocket;
globalThis.location = { protocol: 'http:', host: 'example.test' };

const { LiveClient } = await import('../../static/js/core/live.js');
const { RunStore } = await import('../../static/js/charts/store.js');

function client(seqs) {
  const applied = [];
  const resets = [];
  const c = new LiveClient({
    seq: (run) => seqs[run],
    delta: (msg) => { applied.push(msg); seqs[msg.run] = msg.seq; },
    reset: (run) => resets.push(run),
  }).start();
  const ws = FakeSocket.all.at(-1);
  return { c, ws, applied, resets };
}

test('subscribes from the snapshot seq on open', () => {
  const { c, ws } = client({ 7: 12 });
  c.subscribe(7);
  assert.deepEqual(ws.sent, []); // not open yet
  ws.open();
  assert.deepEqual(ws.sent, [{ type: 'subscribe', run: 7, after_seq: 12 }]);
  assert.equal(ws.url, 'ws://example.test/ws/live/');
});

test('applies a delta that follows, asks a resync after a gap, ignores stale ones', () => {
  const { c, ws, applied } = client({ 1: 5 });
  ws.open();
  c.subscribe(1);
  ws.receive({ type: 'delta', run: 1, from_seq: 5, seq: 6, points: {}, series: [] });
  assert.equal(applied.length, 1);
  ws.receive({ type: 'delta', run: 1, from_seq: 8, seq: 9, points: {}, series: [] });
  assert.equal(applied.length, 1);
  assert.deepEqual(ws.sent.at(-1), { type: 'resync', run: 1, after_seq: 6 });
  const asked = ws.sent.length;
  ws.receive({ type: 'delta', run: 1, from_seq: 9, seq: 10, points: {}, series: [] });
  assert.equal(ws.sent.length, asked); // one resync per gap
  ws.receive({ type: 'delta', run: 1, from_seq: 6, seq: 10, points: {}, series: [] });
  assert.equal(applied.length, 2); // the replay
  ws.receive({ type: 'delta', run: 1, from_seq: 2, seq: 4, points: {}, series: [] });
  assert.equal(applied.length, 2);
  ws.receive({ type: 'delta', run: 2, from_seq: 0, seq: 1, points: {}, series: [] });
  assert.equal(applied.length, 2); // not subscribed
});

test('a reset reloads; a reconnect resubscribes from the last applied seq', async () => {
  const seqs = { 3: 10 };
  const { c, ws, resets } = client(seqs);
  ws.open();
  c.subscribe(3);
  ws.receive({ type: 'reset', run: 3 });
  assert.deepEqual(resets, [3]);
  seqs[3] = 42;
  ws.close();
  await new Promise((r) => { setTimeout(r, 800); });
  const again = FakeSocket.all.at(-1);
  assert.notEqual(again, ws);
  again.open();
  assert.deepEqual(again.sent, [{ type: 'subscribe', run: 3, after_seq: 42 }]);
  c.stop();
});

const payload = (steps, values) => ({ step: steps, time: steps.map((s) => 100 + s), value: values,
  downsampled: false, range: { min: Math.min(...values), max: Math.max(...values), source: 'observed', invert: false } });

test('snapshot + later deltas = current, whatever order the snapshot and deltas arrive in', () => {
  const store = new RunStore({ id: 1, name: 'r' });
  store.addEntries([{ id: 'a' }, { id: 'b' }]);
  store.seq = 10;
  // 'a' was loaded before delta 11; 'b' is fetched later but its snapshot is as of seq 10.
  store.loaded('a', payload([0, 1], [1, 2]), 10);
  const d11 = { run: 1, from_seq: 10, seq: 11, series: [], points: {
    a: { step: [2], time: [102], value: [3] }, b: { step: [2], time: [102], value: [30] } } };
  const r = store.applyDelta(d11);
  assert.deepEqual([...r.changed], ['a']);
  store.loaded('b', payload([0, 1], [10, 20]), 10);
  assert.deepEqual(store.series.get('b').data.value, [10, 20, 30]);
  assert.deepEqual(store.series.get('a').data.value, [1, 2, 3]);
  // A snapshot newer than a delta ignores the delta's (already included) points.
  const d12 = { run: 1, from_seq: 11, seq: 12, series: [], points: { b: { step: [1], time: [101], value: [null] } } };
  store.loaded('c', payload([0], [5]), 12);
  store.applyDelta({ ...d12, points: { ...d12.points, c: { step: [0], time: [100], value: [null] } } });
  assert.deepEqual(store.series.get('b').data.step, [0, 2]);
  assert.deepEqual(store.series.get('c').data.value, [5]);
  assert.equal(store.seq, 12);
});

test('new series and unknown ids in a delta are reported; observed ranges widen', () => {
  const store = new RunStore({ id: 1, name: 'r' });
  store.addEntries([{ id: 'a' }]);
  store.loaded('a', payload([0], [1]), 0);
  const r = store.applyDelta({ run: 1, from_seq: 0, seq: 1, series: [{ id: 'n' }],
    points: { a: { step: [1], time: [1], value: [9] }, n: { step: [1], time: [1], value: [2] },
      x: { step: [1], time: [1], value: [2] } } });
  assert.deepEqual(r.added.map((e) => e.id), ['n']);
  assert.deepEqual(r.unknown, ['x']);
  assert.equal(store.series.get('a').range.max, 9);
});

test('the run\'s first step and its time anchor the time axis', () => {
  const store = new RunStore({ id: 1, name: 'r' });
  store.loaded('a', payload([5, 6], [1, 1]), 0);
  assert.deepEqual([store.firstStep, store.t0], [5, 105]);
  store.loaded('b', payload([2, 3], [1, 1]), 0);
  assert.deepEqual([store.firstStep, store.t0], [2, 102]);
});

test('a run finds its own normalized twins; their live points leave the range to the server', () => {
  const store = new RunStore({ id: 1, name: 'r' });
  const mean = { id: 'raw', kind: 'reward', key: 'reward', stat: 'mean', env: null };
  store.addEntries([mean, { ...mean, id: 'twin', normalized: true }]);
  assert.equal(store.twinOf(mean), 'twin');
  assert.equal(store.rawIdOf('twin'), 'raw');
  assert.equal(store.rawIdOf('raw'), null);
  const range = { normalized: true, env: 'c', min: 0, max: 2, source: 'observed', invert: false };
  store.loaded('twin', { ...payload([0], [0.5]), range }, 0);
  assert.equal(store.rangeDue('twin'), false);
  store.applyDelta({ run: 1, from_seq: 0, seq: 1, series: [],
    points: { twin: { step: [1], time: [1], value: [0.9] } } });
  const rec = store.series.get('twin');
  assert.deepEqual([rec.range.min, rec.range.max], [0, 2]); // raw bounds, not 0.5..0.9
  assert.equal(rec.rangeStale, true);
  assert.equal(store.rangeDue('twin', rec.loadedAt + 1000), false);
  assert.equal(store.rangeDue('twin', rec.loadedAt + 5000), true);
});

test('a categorical series keeps every string point, live, past the run\'s max points', () => {
  const store = new RunStore({ id: 1, name: 'r' });
  store.maxPoints = 2;
  store.addEntries([{ id: 'cat', kind: 'step', key: 'optim/outcome', categorical: true }]);
  store.loaded('cat', { step: [0, 1], time: [0, 1], value: ['applied', 'skipped'], downsampled: false,
    bucket_min: [0, 1], bucket_max: [0, 1], range: {} }, 0);
  const steps = [2, 3, 4, 5, 6];
  store.applyDelta({ run: 1, from_seq: 0, seq: 1, series: [],
    points: { cat: { step: steps, time: steps, value: steps.map((s) => (s % 2 ? 'nan_grad' : 'applied')) } } });
  const data = store.series.get('cat').data;
  assert.deepEqual(data.step, [0, 1, 2, 3, 4, 5, 6]);
  assert.deepEqual(data.value, ['applied', 'skipped', 'applied', 'nan_grad', 'applied', 'nan_grad', 'applied']);
  assert.equal(data.bmin, null);
});

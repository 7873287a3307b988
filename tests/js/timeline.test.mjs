// The Timeline's pure parts (static/js/timeline/): the window in the URL and from the run's
// extent, relayout events read back, the rows of the lanes, spans into NaN-separated WebGL
// segments and instants into markers, nesting depths, the span under the pointer, and a span's
// fields and sample link.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  DEFAULT_SPAN_S, defaultWindow, formatTime, parseWindow, relayoutWindow, sameWindow, spanText,
  validExtent, windowSearch,
} from '../../static/js/timeline/window.js';
import { assignRows, laneOf } from '../../static/js/timeline/lanes.js';
import {
  STATUS_COLORS, categoryOf, colorOf, depths, drawnCounts, layers, lineWidth,
} from '../../static/js/timeline/segments.js';
import { RowIndex, rowAt } from '../../static/js/timeline/pick.js';
import { clockText, eventAt, sampleUrl, spanFields } from '../../static/js/timeline/details.js';
import { ganttLayout, ganttTraces, plotHeight } from '../../static/js/timeline/gantt.js';
import { mix, rectangles, rgba } from '../../static/js/timeline/canvas.js';

/** Columnar events as the API sends them, from a list of partial records. */
function columns(records) {
  const keys = ['name', 'start', 'end', 'source', 'step', 'rank', 'server', 'slot', 'status',
    'tokens', 'sample_id', 'group_id'];
  const out = Object.fromEntries(keys.map((k) => [k, []]));
  for (const r of records) {
    for (const k of keys) out[k].push(r[k] === undefined ? (k === 'source' ? 'trainer' : null) : r[k]);
  }
  return out;
}

// ------------------------------------------------------------------ window

test('a window is read from the URL only when both bounds are numbers, end after start', () => {
  assert.deepEqual(parseWindow('?start=100.5&end=160'), { start: 100.5, end: 160 });
  assert.equal(parseWindow(''), null);
  assert.equal(parseWindow('?start=100'), null);
  assert.equal(parseWindow('?start=100&end='), null);
  assert.equal(parseWindow('?start=abc&end=160'), null);
  assert.equal(parseWindow('?start=160&end=100'), null);
  assert.equal(parseWindow('?start=160&end=160'), null);
});

test('the window is written into the URL beside other parameters, and removed for null', () => {
  const s = windowSearch('?foo=1', { start: 1700000000.1234567, end: 1700000060 });
  const q = new URLSearchParams(s);
  assert.equal(q.get('foo'), '1');
  assert.equal(q.get('start'), '1700000000.123457'); // microseconds at most
  assert.equal(q.get('end'), '1700000060');
  assert.deepEqual(parseWindow(s), { start: 1700000000.123457, end: 1700000060 });
  assert.equal(windowSearch(s, null), '?foo=1');
  assert.equal(windowSearch('?start=1&end=2', null), '');
  assert.equal(formatTime(12.5), '12.5');
});

test('the default window is the whole of a short run and the newest span of a long one', () => {
  const short = defaultWindow([1000, 1100]);
  assert.ok(short.start < 1000 && short.start > 990, short.start);
  assert.ok(short.end > 1100 && short.end < 1110, short.end); // the last instant is inside [start, end)
  const long = defaultWindow([0, 10000]);
  assert.ok(Math.abs(long.start - (10000 - DEFAULT_SPAN_S)) < DEFAULT_SPAN_S * 0.05, long.start);
  assert.ok(long.end > 10000);
  const single = defaultWindow([5, 5]); // one instant: still a window around it
  assert.ok(single.start < 5 && single.end > 5);
  assert.equal(defaultWindow(null), null);
  assert.equal(defaultWindow([null, null]), null);
});

test('an extent is used only when it holds two finite times in order', () => {
  assert.deepEqual(validExtent([1, 2]), [1, 2]);
  assert.equal(validExtent([null, null]), null);
  assert.equal(validExtent([2, 1]), null);
  assert.equal(validExtent(undefined), null);
  assert.equal(validExtent([1]), null);
});

test('a relayout is read back into a window on the absolute clock, or a reset, or nothing', () => {
  const origin = 1000;
  assert.deepEqual(relayoutWindow({ 'xaxis.range[0]': 10, 'xaxis.range[1]': 20 }, origin),
    { window: { start: 1010, end: 1020 } });
  assert.deepEqual(relayoutWindow({ 'xaxis.range': [30, 5] }, origin), { window: { start: 1005, end: 1030 } });
  assert.deepEqual(relayoutWindow({ 'xaxis.autorange': true }, origin), { reset: true });
  assert.equal(relayoutWindow({ autosize: true }, origin), null);
  assert.equal(relayoutWindow({ 'yaxis.range[0]': 1, 'yaxis.range[1]': 2 }, origin), null);
  assert.equal(relayoutWindow({ 'xaxis.range[0]': 'x', 'xaxis.range[1]': 2 }, origin), null);
  assert.ok(sameWindow({ start: 1, end: 2 }, { start: 1.0000001, end: 2 }));
  assert.ok(!sameWindow({ start: 1, end: 2 }, { start: 1.1, end: 2 }));
});

test('a window length reads as people say it', () => {
  assert.equal(spanText(0.0000015), '1.5 µs');
  assert.equal(spanText(0.0123), '12.3 ms');
  assert.equal(spanText(12.34), '12.3 s');
  assert.equal(spanText(250), '4 min 10 s');
  assert.equal(spanText(119.6), '2 min');
  assert.equal(spanText(7500), '2 h 5 min');
  assert.equal(spanText(-1), '');
});

// ------------------------------------------------------------------ lanes

test('lanes are labelled by trainer rank, server and slot, and source', () => {
  assert.equal(laneOf('trainer', 3, null, null).label, 'trainer rank 3');
  assert.equal(laneOf(null, 0, null, null).label, 'trainer rank 0'); // the default source
  assert.equal(laneOf('trainer', null, null, null).label, 'trainer');
  assert.equal(laneOf('inference', null, 1, 7).label, 'server 1 · slot 7');
  assert.equal(laneOf('inference', null, 'node-a', null).label, 'server node-a');
  assert.equal(laneOf('vllm', null, 0, 2).label, 'vllm server 0 · slot 2');
  assert.equal(laneOf('orchestrator', null, null, null).label, 'orchestrator');
  assert.equal(laneOf('reward', 2, null, null).label, 'reward'); // one row per other source
});

test('rows: inference servers and slots first, trainer ranks, then other sources, numbers in order', () => {
  const ev = columns([
    { source: 'orchestrator' }, { rank: 10 }, { rank: 2 }, { source: 'inference', server: 10, slot: 0 },
    { source: 'inference', server: 2, slot: 11 }, { source: 'inference', server: 2, slot: 3 },
    { source: 'reward' }, { rank: 2 }, { source: 'inference', server: 2, slot: null },
  ]);
  const { rows, row } = assignRows(ev, []);
  assert.deepEqual(rows.map((r) => r.label), [
    'server 2', 'server 2 · slot 3', 'server 2 · slot 11', 'server 10 · slot 0',
    'trainer rank 2', 'trainer rank 10', 'orchestrator', 'reward']);
  assert.deepEqual([...row], [6, 5, 4, 3, 2, 1, 7, 4, 0]);
});

test("the API's lanes keep their rows even when the window has none of their events", () => {
  const ev = columns([{ rank: 1 }]);
  const lanes = [{ source: 'trainer', rank: 0, server: null, slot: null },
    { source: 'trainer', rank: 1, server: null, slot: null },
    { source: 'inference', rank: null, server: 0, slot: 0 }];
  const { rows, row } = assignRows(ev, lanes);
  assert.deepEqual(rows.map((r) => r.label), ['server 0 · slot 0', 'trainer rank 0', 'trainer rank 1']);
  assert.deepEqual([...row], [2]);
});

// ------------------------------------------------------------------ segments

test('generations are coloured by status (null is normal), other spans by name, stably', () => {
  assert.equal(categoryOf('generation', null), 'generation · normal');
  assert.equal(categoryOf('generation', 'normal'), 'generation · normal');
  assert.equal(categoryOf('generation', 'canceled'), 'generation · canceled');
  assert.equal(categoryOf('forward', 'canceled'), 'forward');
  assert.equal(colorOf('generation · discarded'), STATUS_COLORS.discarded);
  assert.equal(colorOf('generation · eval'), STATUS_COLORS.eval);
  assert.equal(colorOf('forward'), colorOf('forward'));
  assert.match(colorOf('train_step/backward'), /^#[0-9a-f]{6}$/);
});

test('each span is one segment (start, end, NaN) on its row; instants are single markers', () => {
  const ev = columns([
    { name: 'generation', start: 100, end: 104, source: 'inference', server: 0, slot: 0, status: 'discarded' },
    { name: 'generation', start: 104, end: 109, source: 'inference', server: 0, slot: 0 },
    { name: 'generation', start: 101, end: 102, source: 'inference', server: 0, slot: 1 },
    { name: 'forward', start: 103, end: 105, rank: 0 },
    { name: 'save_batch', start: 106, end: null, source: 'orchestrator' },
  ]);
  const { rows, row } = assignRows(ev, []);
  const list = layers(ev, row, 100);
  const by = Object.fromEntries(list.map((l) => [`${l.instant ? 'i' : 's'}:${l.category}`, l]));
  const normal = by['s:generation · normal'];
  assert.deepEqual([...normal.x], [4, 9, NaN, 1, 2, NaN]);
  assert.deepEqual([...normal.y], [0, 0, NaN, 1, 1, NaN]);
  assert.deepEqual([...normal.index], [1, 2]);
  assert.deepEqual([...by['s:generation · discarded'].x], [0, 4, NaN]);
  assert.deepEqual([...by['s:forward'].y], [2, 2, NaN]);
  const instant = by['i:save_batch'];
  assert.deepEqual([...instant.x], [6]);
  assert.deepEqual([...instant.y], [rows.length - 1]);
  assert.deepEqual(drawnCounts(list), { spans: 4, instants: 1 });
  // Draw order: generation statuses in their order, names after, instants last.
  assert.deepEqual(list.map((l) => l.category),
    ['generation · normal', 'generation · discarded', 'forward', 'save_batch']);
});

test('a span shorter than a pixel of the window is drawn a pixel long', () => {
  const ev = columns([{ name: 'forward', start: 10, end: 10.000001, rank: 0 }]);
  const { row } = assignRows(ev, []);
  const [l] = layers(ev, row, 0, 0.5);
  assert.deepEqual([...l.x], [10, 10.5, NaN]);
});

test('nested spans get the depth of the spans of their row that hold them', () => {
  const ev = columns([
    { name: 'train_step', start: 0, end: 10, rank: 0 },
    { name: 'train_step/forward', start: 1, end: 4, rank: 0 },
    { name: 'train_step/forward/attn', start: 2, end: 3, rank: 0 },
    { name: 'train_step/backward', start: 4, end: 9, rank: 0 },
    { name: 'train_step', start: 0, end: 10, rank: 1 }, // another row: not nested
    { name: 'overlap', start: 8, end: 12, rank: 0 }, // overlaps, not inside: not nested
    { name: 'mark', start: 5, end: null, rank: 0 },
  ]);
  const { row } = assignRows(ev, []);
  assert.deepEqual([...depths(ev.start, ev.end, row, 2)], [0, 1, 2, 1, 0, 0, 0]);
  const list = layers(ev, row, 0);
  const widths = list.filter((l) => !l.instant).map((l) => [l.category, l.depth]);
  assert.deepEqual(widths.filter(([, d]) => d === 0).map(([c]) => c).sort(), ['overlap', 'train_step']);
  assert.ok(lineWidth(0, 24) > lineWidth(1, 24) && lineWidth(1, 24) > lineWidth(2, 24));
});

test('100,000 spans become a few traces of typed arrays', () => {
  const n = 100000;
  const recs = [];
  for (let i = 0; i < n; i++) {
    recs.push({ name: 'generation', start: i, end: i + 0.9, source: 'inference', server: i % 4,
      slot: i % 8, status: ['normal', 'discarded', 'canceled', 'eval'][i % 4] });
  }
  const ev = columns(recs);
  const { rows, row } = assignRows(ev, []);
  const list = layers(ev, row, 0);
  assert.equal(list.length, 4);
  assert.equal(rows.length, 8); // (server, slot) pairs: slot i%8 fixes server i%4
  assert.deepEqual(drawnCounts(list), { spans: n, instants: 0 });
  for (const l of list) assert.ok(l.x instanceof Float64Array && l.x.length === 3 * l.index.length);
  // Plotly gets one empty legend entry per colour; the spans are the canvas's.
  const traces = ganttTraces(list);
  assert.equal(traces.length, 4);
  assert.ok(traces.every((t) => t.type === 'scatter' && t.x.length === 1 && t.x[0] === null));
  const view = { left: 0, top: 0, width: 1000, height: 8 * 24, x0: 0, x1: n, rows: 8 };
  const drawn = rectangles(list, view);
  assert.equal(drawn.reduce((a, g) => a + g.count, 0), n);
});

test('the canvas draws each span as a rectangle on its row, clipped, a pixel at least', () => {
  const ev = columns([
    { name: 'forward', start: 10, end: 20, rank: 0 },
    { name: 'forward', start: 30, end: 30.0001, rank: 1 }, // far below a pixel
    { name: 'forward', start: 90, end: 150, rank: 0 }, // past the right edge: clipped
    { name: 'forward', start: 200, end: 210, rank: 0 }, // off the view: left out
    { name: 'train_step', start: 0, end: 25, rank: 0 },
    { name: 'mark', start: 5, end: null, rank: 0 }, // an instant: Plotly's marker, not here
  ]);
  const { row } = assignRows(ev, []);
  const list = layers(ev, row, 0);
  const view = { left: 0, top: 0, width: 100, height: 48, x0: 0, x1: 100, rows: 2 };
  const groups = rectangles(list, view);
  assert.deepEqual([...new Set(groups.map((g) => g.category))].sort(), ['forward', 'train_step']);
  const rects = (category) => groups.filter((g) => g.category === category)
    .flatMap((g) => Array.from({ length: g.count }, (_, k) => Array.from(g.rects.slice(4 * k, 4 * k + 4))))
    .sort((a, b) => a[0] - b[0]);
  const inner = lineWidth(1, 24); // the first forward is inside train_step: thinner
  const outer = lineWidth(0, 24);
  assert.deepEqual(rects('forward'), [
    [10, 12 - inner / 2, 20, 12 + inner / 2],
    [30, 36 - outer / 2, 31, 36 + outer / 2], // rank 1's row, a pixel wide
    [90, 12 - outer / 2, 100, 12 + outer / 2], // clipped at the right edge
  ]);
  assert.deepEqual(rects('train_step'), [[0, 12 - outer / 2, 25, 12 + outer / 2]]);
  // A category hidden in the legend is not drawn.
  assert.deepEqual(rectangles(list, view, new Set(['forward'])).map((g) => g.category), ['train_step']);
  assert.equal(mix('#000000', '#ffffff', 0.5), '#808080');
  assert.deepEqual(rgba('#ff0000'), [1, 0, 0, 1]);
});

// ------------------------------------------------------------------ picking

test('the span under a time is the innermost one of its row; instants within reach win', () => {
  const ev = columns([
    { name: 'train_step', start: 0, end: 10, rank: 0 },
    { name: 'train_step/forward', start: 1, end: 4, rank: 0 },
    { name: 'mark', start: 6, end: null, rank: 0 },
    { name: 'other rank', start: 0, end: 10, rank: 1 },
    { name: 'tiny', start: 20, end: 20.001, rank: 0 },
  ]);
  const { rows, row } = assignRows(ev, []);
  const idx = new RowIndex(ev.start, ev.end, row, rows.length);
  assert.equal(idx.at(0, 2), 1); // inside forward, inside train_step: forward
  assert.equal(idx.at(0, 5), 0);
  assert.equal(idx.at(0, 6.05, 0.1), 2); // the instant, within reach
  assert.equal(idx.at(0, 6.5, 0.1), 0);
  assert.equal(idx.at(1, 2), 3);
  assert.equal(idx.at(0, 15), -1);
  assert.equal(idx.at(0, 20.05, 0.1), 4); // too short to hit exactly: within reach
  assert.equal(idx.at(0, 2, 0, (i) => i !== 1), 0); // forward hidden in the legend
  assert.equal(rowAt(0.3, 2), 0);
  assert.equal(rowAt(1.49, 2), 1);
  assert.equal(rowAt(2.2, 2), -1);
  assert.equal(rowAt(-0.7, 2), -1);
});

// ------------------------------------------------------------------ details

test("a span's fields list what it has, and its sample links to the viewer at its step", () => {
  const ev = columns([{ name: 'generation', start: 1700000000.5, end: 1700000002, source: 'inference',
    server: 0, slot: 3, step: 7, tokens: 128, sample_id: 's-1', group_id: 'g' }]);
  const e = eventAt(ev, 0);
  const fields = Object.fromEntries(spanFields(e, 1700000000));
  assert.equal(fields.Name, 'generation');
  assert.equal(fields.Source, 'inference');
  assert.equal(fields.Server, '0');
  assert.equal(fields.Slot, '3');
  assert.equal(fields.Step, '7');
  assert.equal(fields.Status, 'normal');
  assert.equal(fields.Tokens, '128');
  assert.equal(fields.Duration, '1.5 s');
  assert.match(fields.Start, /\(\+0\.500 s\)$/);
  assert.ok(!('Rank' in fields));
  assert.equal(sampleUrl(4, e), '/runs/4/samples?step=7');
  assert.equal(sampleUrl(4, { ...e, step: null }), '/runs/4/samples');
  assert.equal(sampleUrl(4, { ...e, sample_id: null }), null);
  const instant = Object.fromEntries(spanFields({ ...e, name: 'save_batch', end: null, status: null }, 0));
  assert.equal(instant.Duration, 'instant');
  assert.ok(!('Status' in instant));
  assert.match(clockText(0), /^19(69|70)-/);
});

// ------------------------------------------------------------------ figure

test('the figure has a row per lane top to bottom, the window on x and no y zoom', () => {
  const rows = [laneOf('inference', null, 0, 0), laneOf('trainer', 0, null, null), laneOf('trainer', 1, null, null)];
  const layout = ganttLayout(rows, { start: 1010, end: 1070 }, 1000, {});
  assert.deepEqual(layout.xaxis.range, [10, 70]);
  assert.deepEqual(layout.yaxis.range, [2.5, -0.5]);
  assert.equal(layout.yaxis.fixedrange, true);
  assert.deepEqual(layout.yaxis.ticktext, ['server 0 · slot 0', 'trainer rank 0', 'trainer rank 1']);
  assert.equal(layout.height, plotHeight(3));
  assert.equal(layout.hovermode, false);
  const named = ganttTraces([{ category: '<b>x</b>', color: '#000', depth: 0, instant: true,
    x: new Float64Array(1), y: new Float64Array(1), index: new Int32Array(1) }]);
  assert.equal(named[0].name, '&lt;b&gt;x&lt;/b&gt;'); // a span name is text, not markup
  assert.equal(named[0].mode, 'markers');
});

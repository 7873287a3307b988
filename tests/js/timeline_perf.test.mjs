// The Performance page's pure parts (static/js/timeline/perf.js): the bucket size in the URL,
// the bucket charts' traces with the filling bucket drawn apart, the note about it, and the
// gauges' lines, labels and sections.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  BUCKET_CHARTS, DEFAULT_BUCKET, bucketLabel, bucketSearch, bucketTraces, gaugeLabel, gaugeSections,
  gaugeTraces, parseBucket, partialNote, perfLayout, plotTime,
} from '../../static/js/timeline/perf.js';

const chart = (id) => BUCKET_CHARTS.find((c) => c.id === id);

test('the bucket size is read from the URL when offered, and written back without the default', () => {
  assert.equal(parseBucket('?bucket=10'), 10);
  assert.equal(parseBucket('?bucket=300'), 300);
  assert.equal(parseBucket('?bucket=7'), DEFAULT_BUCKET);
  assert.equal(parseBucket(''), DEFAULT_BUCKET);
  assert.equal(bucketSearch('?x=1', 30), '?x=1&bucket=30');
  assert.equal(bucketSearch('?bucket=30', DEFAULT_BUCKET), '');
  assert.equal(bucketLabel(300), '5 min');
  assert.equal(bucketLabel(10), '10 s');
});

test('every bucket series of the API is drawn by one chart, the percentages on 0–100', () => {
  const drawn = BUCKET_CHARTS.flatMap((c) => c.series.map(([name]) => name)).sort();
  assert.deepEqual(drawn, ['generations', 'generations_canceled', 'inference_utilization_pct',
    'tokens_per_second', 'trainer_idle_pct', 'trainer_working_pct', 'weight_sync_pct']);
  assert.deepEqual(chart('time-pct').range, [0, 100]);
  const layout = perfLayout({}, chart('time-pct'));
  assert.deepEqual(layout.yaxis.range, [0, 100]);
  assert.equal(layout.yaxis.autorange, false);
  assert.equal(perfLayout({}, chart('tokens')).yaxis.rangemode, 'tozero');
});

const BODY = {
  bucket: 60, time: [600, 660, 720], partial: [false, false, true],
  series: { generations: [3, 4, 1], generations_canceled: [0, 1, 0], tokens_per_second: [10, 12, 2],
    inference_utilization_pct: [90, 100, 20], weight_sync_pct: [0, 5, null],
    trainer_working_pct: [50, 60, 10], trainer_idle_pct: [50, 40, 90] },
};

test('the complete buckets are one line; the filling one a dotted segment with a hollow end', () => {
  const traces = bucketTraces(BODY, chart('generations'));
  const whole = traces.filter((t) => !t.meta.partial);
  const open = traces.filter((t) => t.meta.partial);
  assert.deepEqual(whole.map((t) => t.meta.series), ['generations', 'generations_canceled']);
  assert.deepEqual(whole[0].y, [3, 4]);
  assert.deepEqual(whole[0].x, [plotTime(630), plotTime(690)]); // the middle of each bucket
  assert.deepEqual(open[0].y, [4, 1]); // from the last complete bucket to the filling one
  assert.equal(open[0].line.dash, 'dot');
  assert.equal(open[0].marker.symbol, 'circle-open');
  assert.deepEqual(open[0].marker.size, [0, 9]); // only the filling bucket gets a marker
  assert.equal(open[0].showlegend, false);
  const nulls = bucketTraces(BODY, chart('time-pct')).find((t) => t.meta.series === 'weight_sync_pct' && t.meta.partial);
  assert.deepEqual(nulls.y, [5, null]);
});

test('without a filling bucket there is no dotted segment and no note', () => {
  const done = { ...BODY, partial: [false, false, false] };
  assert.ok(bucketTraces(done, chart('tokens')).every((t) => !t.meta.partial));
  assert.deepEqual(bucketTraces(done, chart('tokens'))[0].y, [10, 12, 2]);
  assert.equal(partialNote(done), '');
  assert.match(partialNote(BODY), /still filling/);
});

test('a single, filling bucket is drawn alone, hollow', () => {
  const one = { bucket: 10, time: [100], partial: [true], series: { tokens_per_second: [4] } };
  const traces = bucketTraces(one, chart('tokens'));
  assert.deepEqual(traces.map((t) => [t.meta.partial, t.y]), [[false, []], [true, [4]]]);
});

test('gauges: a line per host and device, labelled by what they have, in sections by prefix', () => {
  assert.equal(gaugeLabel({ host: 'node-1', device: 0 }), 'node-1 · device 0');
  assert.equal(gaugeLabel({ host: 'node-1', device: null }), 'node-1');
  assert.equal(gaugeLabel({ host: null, device: 3 }), 'device 3');
  assert.equal(gaugeLabel({ host: null, device: null }), 'value');
  const traces = gaugeTraces([{ host: 'a', device: 0, time: [100, 110], value: [1, null] },
    { host: '<b>', device: 1, time: [100], value: [2] }]);
  assert.deepEqual(traces.map((t) => t.name), ['a · device 0', '&lt;b&gt; · device 1']);
  assert.deepEqual(traces[0].y, [1, null]);
  assert.deepEqual(traces[0].x, [plotTime(100), plotTime(110)]);
  assert.deepEqual(gaugeSections(['vllm/queue', 'gpu/util_pct', 'load', 'cpu/util_pct', 'gpu/mem']),
    [{ section: 'cpu', names: ['cpu/util_pct'] }, { section: 'gpu', names: ['gpu/mem', 'gpu/util_pct'] },
      { section: 'vllm', names: ['vllm/queue'] }, { section: 'other', names: ['load'] }]);
});

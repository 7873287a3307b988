// @ts-check
// The Performance page's pure parts: the bucket size in the URL, the charts of the seven
// bucket series (a table: which series, titles, units, ranges), their traces with the partial
// bucket drawn apart (hollow marker, dotted segment), and the gauges: one chart per name, one
// line per host and device, grouped by the name's prefix (gpu/, cpu/, vllm/). Tested with
// `node --test tests/js/`.

import { escapePlotly } from '../core/text.js';
import { clockText } from './details.js';

/** The bucket sizes offered (seconds), and the one without `?bucket=` (the API's default). */
export const BUCKETS = [10, 30, 60, 300];
export const DEFAULT_BUCKET = 60;

/** `?bucket=` when it is one of BUCKETS, else the default. */
export function parseBucket(search) {
  const b = Number(new URLSearchParams(search).get('bucket'));
  return BUCKETS.includes(b) ? b : DEFAULT_BUCKET;
}

/** `search` with the bucket written into it (the default one left out). */
export function bucketSearch(search, bucket) {
  const q = new URLSearchParams(search);
  if (bucket === DEFAULT_BUCKET) q.delete('bucket');
  else q.set('bucket', String(bucket));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function bucketLabel(b) {
  return b % 60 === 0 ? `${b / 60} min` : `${b} s`;
}

/**
 * The bucket charts: each names the series it draws ([API name, legend label, colour]), its
 * y unit and, for percentages, the 0–100 range.
 * @typedef {{id: string, title: string, unit: string, range: [number, number] | null,
 *   series: [string, string, string][]}} BucketChart
 * @type {BucketChart[]}
 */
export const BUCKET_CHARTS = [
  { id: 'time-pct', title: 'Where the time goes (% of each bucket)', unit: '%', range: [0, 100],
    series: [['inference_utilization_pct', 'Inference utilization', '#2e9d5b'],
      ['weight_sync_pct', 'Weight sync', '#8b5cf6'],
      ['trainer_working_pct', 'Trainer working', '#3b6fd8'],
      ['trainer_idle_pct', 'Trainer idle', '#e08a1e']] },
  { id: 'generations', title: 'Generations finished per bucket', unit: '', range: null,
    series: [['generations', 'Generations', '#2e9d5b'], ['generations_canceled', 'Canceled', '#9aa1ab']] },
  { id: 'tokens', title: 'Tokens per second', unit: 'tokens/s', range: null,
    series: [['tokens_per_second', 'Tokens/s', '#0f9fb3']] },
];

/** A unix time as Plotly reads a date without a zone: local time, to the millisecond. */
export const plotTime = (t) => clockText(t);

/**
 * The traces of one bucket chart. Each series: the complete buckets as one line, and when the
 * newest bucket is still filling (`partial`), a dotted segment from the last complete bucket to
 * it with a hollow marker, so the dip of a half-filled bucket does not read as a slump. Points
 * sit in the middle of their bucket.
 * @param {{bucket: number, time: number[], partial: boolean[], series: Record<string, (number | null)[]>}} body
 * @param {BucketChart} chart
 */
export function bucketTraces(body, chart) {
  const half = body.bucket / 2;
  const x = body.time.map((t) => plotTime(t + half));
  const partial = body.partial;
  const out = [];
  for (const [name, label, color] of chart.series) {
    const y = body.series[name] ?? [];
    const whole = { x: [], y: [] };
    const open = { x: [], y: [] };
    for (let i = 0; i < x.length; i++) {
      if (!partial[i]) {
        whole.x.push(x[i]);
        whole.y.push(y[i] ?? null);
      }
    }
    const last = partial.lastIndexOf(true);
    if (last >= 0) {
      const prev = last - 1;
      if (prev >= 0 && !partial[prev]) {
        open.x.push(x[prev]);
        open.y.push(y[prev] ?? null);
      }
      open.x.push(x[last]);
      open.y.push(y[last] ?? null);
    }
    const meta = { series: name, partial: false };
    out.push({ type: 'scatter', mode: 'lines+markers', x: whole.x, y: whole.y, name: escapePlotly(label),
      legendgroup: name, line: { color, width: 2 }, marker: { color, size: 5 }, meta,
      hovertemplate: `%{y:.4~g}${chart.unit ? ` ${chart.unit}` : ''}<extra>${escapePlotly(label)}</extra>` });
    if (open.x.length) {
      const sizes = open.x.map((_, i) => (i === open.x.length - 1 ? 9 : 0));
      out.push({ type: 'scatter', mode: 'lines+markers', x: open.x, y: open.y, legendgroup: name,
        name: escapePlotly(`${label} (filling)`), showlegend: false, meta: { series: name, partial: true },
        line: { color, width: 2, dash: 'dot' },
        marker: { color, size: sizes, symbol: 'circle-open', line: { width: 2, color } },
        hovertemplate: `%{y:.4~g}${chart.unit ? ` ${chart.unit}` : ''} (bucket still filling)<extra>${escapePlotly(label)}</extra>` });
    }
  }
  return out;
}

/** The note under the charts when the newest bucket is still filling, else ''. */
export function partialNote(body) {
  const last = body.partial.lastIndexOf(true);
  if (last < 0) return '';
  return `The newest bucket (from ${clockText(body.time[last]).slice(11, 19)}) is still filling: `
    + 'drawn hollow, joined by a dotted line.';
}

/** A gauge line's name: its host and device, as many as it has. */
export function gaugeLabel(series) {
  const known = (v) => v !== null && v !== undefined && v !== '';
  const parts = [];
  if (known(series.host)) parts.push(String(series.host));
  if (known(series.device)) parts.push(`device ${series.device}`);
  return parts.length ? parts.join(' · ') : 'value';
}

/**
 * The gauges' names in sections by prefix (`gpu/util_pct` under `gpu`), sections and names
 * in text order; a name without `/` goes under "other".
 * @param {string[]} names
 * @returns {{section: string, names: string[]}[]}
 */
export function gaugeSections(names) {
  const by = new Map();
  for (const name of [...names].sort()) {
    const cut = name.indexOf('/');
    const section = cut > 0 ? name.slice(0, cut) : 'other';
    if (!by.has(section)) by.set(section, []);
    by.get(section).push(name);
  }
  return [...by.keys()].sort((a, b) => Number(a === 'other') - Number(b === 'other') || (a < b ? -1 : 1))
    .map((section) => ({ section, names: by.get(section) }));
}

/**
 * The traces of one gauge: a line per host and device, in their order.
 * @param {{host: any, device: any, time: number[], value: (number | null)[]}[]} series
 */
export function gaugeTraces(series) {
  return series.map((s) => ({
    type: 'scatter', mode: 'lines', x: s.time.map(plotTime), y: s.value, name: escapePlotly(gaugeLabel(s)),
    line: { width: 1.6 }, meta: { host: s.host ?? null, device: s.device ?? null },
    hovertemplate: `%{y:.4~g}<extra>${escapePlotly(gaugeLabel(s))}</extra>`,
  }));
}

/** A chart's layout: a date axis in local time, y from 0 (0–100 for the percentages). */
export function perfLayout(theme, { range = null, unit = '' } = {}) {
  return {
    height: 270, margin: { t: 8, b: 36, l: 50, r: 10 },
    paper_bgcolor: theme.bg || '#ffffff', plot_bgcolor: theme.bg || '#ffffff',
    font: { family: theme.font, color: theme.fg, size: 11.5 },
    showlegend: true, legend: { orientation: 'h', x: 0, y: -0.18, yanchor: 'top' },
    hovermode: 'x unified',
    xaxis: { type: 'date', gridcolor: theme.grid, linecolor: theme.grid, automargin: true },
    yaxis: { gridcolor: theme.grid, zeroline: false, automargin: true, ticksuffix: unit === '%' ? '%' : '',
      ...(range ? { range, autorange: false } : { rangemode: 'tozero' }) },
  };
}

/** When GPU utilisation counts as low, and the run as busy (%), over how many buckets. */
export const GPU_HINT = { gauge: 'gpu/util_pct', low: 30, busy: 50, buckets: 3 };

/**
 * The health hint "GPU utilisation low while the run is busy", or null: over the last
 * `GPU_HINT.buckets` whole buckets in which the trainer worked or inference generated at least
 * `busy` %, the mean of every `gpu/util_pct` point (all hosts and devices) stayed under `low` %.
 * Returns the evidence: the buckets' start, the GPUs' mean and the run's busy share.
 * @param {{bucket: number, time: number[], partial: boolean[], series: Record<string, (number|null)[]>}} perf
 * @param {Record<string, {time: number[], value: (number|null)[]}[]>} gauges
 */
export function gpuIdleHint(perf, gauges, rule = GPU_HINT) {
  const lines = gauges[rule.gauge] || [];
  if (!lines.length || !perf.time.length) return null;
  const busyAt = (i) => Math.max(perf.series.trainer_working_pct?.[i] ?? 0,
    perf.series.inference_utilization_pct?.[i] ?? 0);
  const found = [];
  for (let i = perf.time.length - 1; i >= 0 && found.length < rule.buckets; i--) {
    if (perf.partial[i] || busyAt(i) < rule.busy) continue;
    const lo = perf.time[i];
    const hi = lo + perf.bucket;
    let sum = 0;
    let n = 0;
    for (const line of lines) {
      line.time.forEach((t, k) => {
        const v = line.value[k];
        if (t >= lo && t < hi && typeof v === 'number' && Number.isFinite(v)) { sum += v; n += 1; }
      });
    }
    if (!n) return null; // a busy bucket without GPU readings: no evidence either way
    found.push({ time: lo, gpu: sum / n, busy: busyAt(i) });
  }
  if (found.length < rule.buckets || found.some((b) => b.gpu >= rule.low)) return null;
  const mean = (key) => found.reduce((a, b) => a + b[key], 0) / found.length;
  const from = found[found.length - 1].time;
  return {
    from, gpu: mean('gpu'), busy: mean('busy'), buckets: found.length,
    message: `GPU utilisation low while the run is busy: ${mean('gpu').toFixed(0)}% on average `
      + `over the last ${found.length} busy buckets (from ${clockText(from).slice(11, 19)}), while `
      + `the trainer worked or inference generated ${mean('busy').toFixed(0)}% of the time`,
  };
}

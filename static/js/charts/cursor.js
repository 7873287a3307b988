// @ts-check
// The synced cursor: while Ctrl (or ⌘ on macOS) is held and the pointer hovers a chart, every
// other visible, rendered chart shows its hover at the same x — the same step, or the same time
// since each run's first step (each chart counts time in its own unit), whichever axis the
// page uses. Releasing the key (or leaving the chart) clears them. The other charts' hovers are
// Plotly.Fx.hover calls, which emit no hover event of their own, so nothing echoes back.

const KEYS = new Set(['Control', 'Meta']);

let source = null; // {chart, kind, x}: the chart hovered last and where (x shared: see shared())
const synced = new Set(); // charts showing a synced hover now
let listening = false;

const held = (ev) => Boolean(ev && (ev.ctrlKey || ev.metaKey));

/** The axis a chart's x is: a state strip counts steps whatever the page shows. */
function axisOf(chart) {
  return chart.categorical ? 'step' : chart.page.settings.xaxis === 'time' ? 'time' : 'step';
}

/** A chart's x as the charts share it: steps, or seconds on the time axis. */
function shared(chart, x) {
  return axisOf(chart) === 'time' ? x * (chart.unit?.seconds ?? 1) : x;
}

function local(chart, x) {
  return axisOf(chart) === 'time' ? x / (chart.unit?.seconds ?? 1) : x;
}

/** Charts that can show the cursor: rendered, shown, in view, on the same kind of axis. */
function targets(from) {
  const out = [];
  /** @type {NodeListOf<ChartElement>} */
  const cards = document.querySelectorAll('.chart.rendered');
  for (const el of cards) {
    const c = el.chart;
    if (c && c !== from.chart && !el.hidden && c.inView && c.rendered && axisOf(c) === from.kind) out.push(c);
  }
  return out;
}

function unhover(c) {
  if (c.rendered && c.plot._fullLayout) window.Plotly.Fx.unhover(c.plot);
  synced.delete(c);
}

function syncFrom(from) {
  const Plotly = window.Plotly;
  if (!Plotly || from.x === null || from.x === undefined) return;
  const now = targets(from);
  for (const c of synced) if (!now.includes(c)) unhover(c);
  for (const c of now) {
    const xval = local(c, from.x);
    try {
      Plotly.Fx.hover(c.plot, c.categorical ? { xval, yval: 0 } : { xval }, 'xy');
      synced.add(c);
    } catch {
      // a chart mid-redraw: it simply shows no cursor this time
    }
  }
}

/** Clear every synced hover (not the one under the pointer). */
export function clearCursor() {
  for (const c of [...synced]) unhover(c);
}

function listenKeys() {
  if (listening) return;
  listening = true;
  addEventListener('keydown', (ev) => {
    if (KEYS.has(ev.key) && !ev.repeat && source) syncFrom(source); // pressed over a hovered chart
  });
  addEventListener('keyup', (ev) => {
    if (KEYS.has(ev.key)) clearCursor();
  });
  addEventListener('blur', clearCursor);
}

/** Follow a chart's hovers (call after each Plotly.newPlot: a purge drops Plotly's listeners). */
export function attachCursor(chart) {
  listenKeys();
  chart.plot.on('plotly_hover', (ev) => {
    const x = ev.points?.[0]?.x ?? ev.xvals?.[0];
    source = { chart, kind: axisOf(chart), x: x === undefined ? null : shared(chart, x) };
    if (held(ev.event)) syncFrom(source);
    else clearCursor();
  });
  chart.plot.on('plotly_unhover', () => {
    if (source?.chart === chart) source = null;
    clearCursor();
  });
}

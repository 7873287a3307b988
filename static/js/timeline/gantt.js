// @ts-check
// The Timeline's Plotly figure: one row per lane (y = row number, top to bottom), x = seconds
// since the origin, the layers of timeline/segments.js as `scattergl` traces (WebGL lines for
// spans, markers for instants), one legend entry per colour. Zoom and pan move x only; the
// page's own hover and click find spans (timeline/pick.js), so Plotly's hover is off. Pure:
// tested with `node --test tests/js/`.

import { escapePlotly } from '../core/text.js';
import { clockText } from './details.js';
import { lineWidth } from './segments.js';

/** A row's height in pixels, and the plot's margins around the rows. */
export const ROW_PX = 24;
const TOP_PX = 70; // the legend above the rows
const BOTTOM_PX = 56; // the x axis and its title

/** The plot's height for `rows` rows (at least a few rows' worth, for an empty window). */
export function plotHeight(rows) {
  return TOP_PX + BOTTOM_PX + Math.max(rows, 3) * ROW_PX;
}

/**
 * The traces of `layers` (timeline/segments.js): each carries `meta.layer`, its position in
 * `layers`, so the page maps a trace back to its events.
 * @param {import('./segments.js').Layer[]} list
 */
export function ganttTraces(list) {
  const shown = new Set();
  return list.map((l, k) => {
    const first = !shown.has(l.category);
    shown.add(l.category);
    const common = {
      type: 'scattergl', x: l.x, y: l.y, name: escapePlotly(l.category), legendgroup: l.category,
      showlegend: first, hoverinfo: 'skip', meta: { layer: k, category: l.category },
    };
    if (l.instant) {
      return { ...common, mode: 'markers',
        marker: { symbol: 'diamond', size: 11, color: l.color, line: { width: 1, color: '#ffffff' } } };
    }
    return { ...common, mode: 'lines', connectgaps: false,
      line: { color: l.color, width: lineWidth(l.depth, ROW_PX) } };
  });
}

/**
 * The figure's layout: rows labelled on y (fixed: zoom is along time only), the window on x.
 * @param {import('./lanes.js').Row[]} rows
 * @param {import('./window.js').TimeWindow} win
 * @param {number} origin
 * @param {{fg?: string, muted?: string, grid?: string, bg?: string, font?: string}} [theme]
 */
export function ganttLayout(rows, win, origin, theme = {}) {
  const n = rows.length;
  return {
    height: plotHeight(n),
    margin: { t: TOP_PX - 20, b: BOTTOM_PX, l: 10, r: 16, pad: 4 },
    paper_bgcolor: theme.bg || '#ffffff',
    plot_bgcolor: theme.bg || '#ffffff',
    font: { family: theme.font, color: theme.fg, size: 12 },
    showlegend: true,
    legend: { orientation: 'h', x: 0, xanchor: 'left', y: 1, yanchor: 'bottom', itemsizing: 'constant' },
    hovermode: false,
    dragmode: 'zoom',
    xaxis: {
      range: [win.start - origin, win.end - origin], ticksuffix: ' s', zeroline: false,
      showgrid: true, gridcolor: theme.grid, linecolor: theme.grid, automargin: true,
      title: { text: `seconds since ${escapePlotly(clockText(origin))}`, font: { color: theme.muted, size: 12 } },
    },
    yaxis: {
      range: [Math.max(n, 1) - 0.5, -0.5], fixedrange: true, zeroline: false, showgrid: false,
      tickmode: 'array', tickvals: rows.map((_, i) => i), ticktext: rows.map((r) => escapePlotly(r.label)),
      automargin: true, ticks: '', tickfont: { size: 12 },
    },
    // Row bands: every other row shaded, so a long row is easy to follow across the plot.
    shapes: rows.flatMap((_, i) => (i % 2 ? [{
      type: 'rect', xref: 'paper', x0: 0, x1: 1, y0: i - 0.5, y1: i + 0.5, layer: 'below',
      line: { width: 0 }, fillcolor: theme.grid || '#eef0f4', opacity: 0.5,
    }] : [])),
  };
}

/** Plotly's config: time zoom with the wheel, no selection tools, no logo. */
export const GANTT_CONFIG = {
  responsive: true, displaylogo: false, scrollZoom: true,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toImage'],
};

// @ts-check
// The Timeline's Plotly figure: one row per lane (y = row number, top to bottom), x = seconds
// since the origin, one legend entry per colour, the instants as markers. The spans are drawn
// under it by timeline/canvas.js (the plot's backgrounds are transparent), the legend entries
// of their colours are empty traces that only show and toggle them. Zoom and pan move x only;
// the page's own hover and click find spans (timeline/pick.js), so Plotly's hover is off.
// Pure: tested with `node --test tests/js/`.

import { escapePlotly } from '../core/text.js';
import { clockText } from './details.js';

/** A row's height in pixels, and the plot's margins around the rows. */
export const ROW_PX = 24;
const TOP_PX = 70; // the legend above the rows
const BOTTOM_PX = 56; // the x axis and its title

/** The plot's height for `rows` rows (at least a few rows' worth, for an empty window). */
export function plotHeight(rows) {
  return TOP_PX + BOTTOM_PX + Math.max(rows, 3) * ROW_PX;
}

/**
 * The traces of `layers` (timeline/segments.js): for spans an empty line trace per category,
 * the legend entry (the canvas draws them); for instants their markers (SVG: few, and Plotly
 * keeps them on the axes while zooming). Each carries `meta.layer`, its position in `layers`,
 * and `meta.category`.
 * @param {import('./segments.js').Layer[]} list
 */
export function ganttTraces(list) {
  const shown = new Set();
  const out = [];
  list.forEach((l, k) => {
    const first = !shown.has(l.category);
    shown.add(l.category);
    const common = { type: 'scatter', name: escapePlotly(l.category), legendgroup: l.category,
      hoverinfo: 'skip', meta: { layer: k, category: l.category, instant: l.instant } };
    if (l.instant) {
      out.push({ ...common, mode: 'markers', x: l.x, y: l.y, showlegend: first, cliponaxis: true,
        marker: { symbol: 'diamond', size: 11, color: l.color, line: { width: 1, color: '#ffffff' } } });
    } else if (first) {
      out.push({ ...common, mode: 'lines', x: [null], y: [null], showlegend: true,
        line: { color: l.color, width: 8 } });
    }
  });
  return out;
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
    // Transparent: the spans' canvas is under the plot (the page's box gives the background).
    paper_bgcolor: 'rgba(0,0,0,0)',
    plot_bgcolor: 'rgba(0,0,0,0)',
    font: { family: theme.font, color: theme.fg, size: 12 },
    showlegend: true,
    legend: { orientation: 'h', x: 0, xanchor: 'left', y: 1, yanchor: 'bottom', itemsizing: 'constant' },
    hovermode: false,
    dragmode: 'zoom',
    modebar: { bgcolor: 'rgba(0,0,0,0)', color: theme.muted, activecolor: theme.fg },
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
  };
}

/** Plotly's config: time zoom with the wheel, no selection tools, no logo. */
export const GANTT_CONFIG = {
  responsive: true, displaylogo: false, scrollZoom: true,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toImage'],
};

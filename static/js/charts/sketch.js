// @ts-check
// A quick canvas drawing of a chart's figure, shown while plotly.min.js (4.6 MB, seconds to
// evaluate on a cold cache) is still loading; the Plotly chart replaces it when ready.

import { extent, padRange } from './transforms.js';

const MARGIN = { l: 44, r: 10, t: 6, b: 24 };

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

function xRange(fig) {
  const r = fig.layout.xaxis.range;
  if (r) return r;
  return extent(...fig.data.map((t) => t.x)) || [0, 1];
}

/** A state strip's cells (a heatmap of one row, x edges): filled rectangles. */
function cells(ctx, t, sx, sy) {
  const [y0, y1] = [sy(t.y[0]), sy(t.y[1])];
  const z = t.z[0];
  for (let i = 0; i < z.length; i++) {
    if (z[i] === null) continue;
    ctx.fillStyle = t.meta.colors[z[i]];
    ctx.fillRect(sx(t.x[i]), Math.min(y0, y1), sx(t.x[i + 1]) - sx(t.x[i]), Math.abs(y1 - y0));
  }
}

function yRange(fig) {
  const r = fig.layout.yaxis.range;
  if (r && fig.layout.yaxis.type !== 'log') return r;
  const e = extent(...fig.data.map((t) => t.y), fig.layout.shapes.map((s) => s.y0));
  return e ? padRange(e) : [0, 1]; // the charts' own autoscale rule (charts/transforms.js)
}

/** A markers-only trace (the last-point dot): filled circles. */
function dots(ctx, t, sx, sy) {
  ctx.fillStyle = t.marker.color;
  for (let i = 0; i < t.x.length; i++) {
    if (t.y[i] === null || !Number.isFinite(t.y[i])) continue;
    ctx.beginPath();
    ctx.arc(sx(t.x[i]), sy(t.y[i]), (t.marker.size ?? 6) / 2, 0, 2 * Math.PI);
    ctx.fill();
  }
}

/** Draw `fig` ({data, layout} from buildFigure) into `canvas`, sized to its box. */
export function sketch(canvas, fig, theme) {
  const box = canvas.parentElement.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(box.width * dpr));
  canvas.height = Math.max(1, Math.round(box.height * dpr));
  canvas.style.width = `${box.width}px`;
  canvas.style.height = `${box.height}px`;
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  const w = box.width - MARGIN.l - MARGIN.r;
  const h = box.height - MARGIN.t - MARGIN.b;
  const [x0, x1] = xRange(fig);
  const [y0, y1] = yRange(fig);
  const sx = (x) => MARGIN.l + ((x - x0) / (x1 - x0 || 1)) * w;
  const sy = (y) => MARGIN.t + h - ((y - y0) / (y1 - y0 || 1)) * h;
  ctx.font = `10px ${theme.font}`;
  ctx.fillStyle = theme.fg;
  ctx.strokeStyle = theme.grid;
  ctx.lineWidth = 1;
  for (const y of [y0 + (y1 - y0) * 0.1, y0 + (y1 - y0) * 0.5, y0 + (y1 - y0) * 0.9]) {
    ctx.beginPath();
    ctx.moveTo(MARGIN.l, sy(y));
    ctx.lineTo(MARGIN.l + w, sy(y));
    ctx.stroke();
    ctx.textAlign = 'right';
    ctx.fillText(fmt(y), MARGIN.l - 4, sy(y) + 3);
  }
  ctx.textAlign = 'center';
  ctx.fillText(fmt(x0), MARGIN.l, MARGIN.t + h + 14);
  ctx.fillText(fmt(x1), MARGIN.l + w, MARGIN.t + h + 14);
  ctx.save();
  ctx.beginPath();
  ctx.rect(MARGIN.l, MARGIN.t, w, h);
  ctx.clip();
  for (const t of fig.data) {
    const n = t.x.length;
    if (!n) continue;
    if (t.type === 'heatmap') {
      cells(ctx, t, sx, sy);
      continue;
    }
    if (t.mode === 'markers') {
      dots(ctx, t, sx, sy);
      continue;
    }
    ctx.beginPath();
    let pen = false;
    for (let i = 0; i < n; i++) {
      const y = t.y[i];
      if (y === null || !Number.isFinite(y)) {
        pen = false;
        continue;
      }
      if (pen) ctx.lineTo(sx(t.x[i]), sy(y));
      else ctx.moveTo(sx(t.x[i]), sy(y));
      pen = true;
    }
    ctx.globalAlpha = t.opacity ?? 1;
    if (t.fill) {
      ctx.fillStyle = t.fillcolor;
      ctx.fill();
    } else {
      ctx.strokeStyle = t.line.color;
      ctx.lineWidth = t.line.width;
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  }
  ctx.restore();
}

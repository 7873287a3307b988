// @ts-check
// The Timeline's spans drawn on a canvas under the Plotly plot (which draws the axes, the row
// labels, the legend and the instants): WebGL when the browser has it, else a 2D canvas. Each
// span is a rectangle on its row (one draw call per colour layer of timeline/segments.js,
// thinner for nested spans, at least a pixel wide), every other row shaded. Geometry is
// computed in float64 on the CPU for each view, so a window of a microsecond deep inside an
// hour is as exact as a window of the whole hour.
//
// Not Plotly's `scattergl`: plotly.min.js compiles some of its WebGL commands at run time
// (regl's code generation, `Function`), which the page's Content-Security-Policy refuses
// (no 'unsafe-eval'), and it did so on redraws of large windows. A shader here is GLSL handed
// to the GPU driver, not script.

import { lineWidth } from './segments.js';

/**
 * The plot area and what it shows: CSS px of the area within the canvas's parent, the x axis
 * range (seconds since the origin) and the number of rows.
 * @typedef {{left: number, top: number, width: number, height: number, x0: number, x1: number,
 *   rows: number}} View
 */

const VERTEX = `
attribute vec2 a_pos;
uniform vec2 u_size;
void main() {
  vec2 clip = a_pos / u_size * 2.0 - 1.0;
  gl_Position = vec4(clip.x, -clip.y, 0.0, 1.0);
}`;
const FRAGMENT = `
precision mediump float;
uniform vec4 u_color;
void main() { gl_FragColor = u_color; }`;

/** '#rrggbb' → [r, g, b, a] in 0…1. */
export function rgba(color, alpha = 1) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color || '');
  if (!m) return [0.5, 0.5, 0.5, alpha];
  return [parseInt(m[1], 16) / 255, parseInt(m[2], 16) / 255, parseInt(m[3], 16) / 255, alpha];
}

/** The colour between '#rrggbb' `a` and `b` (t = 0: a, 1: b), as '#rrggbb'. */
export function mix(a, b, t = 0.5) {
  const [x, y] = [rgba(a), rgba(b)];
  const hex = (i) => Math.round(255 * (x[i] + (y[i] - x[i]) * t)).toString(16).padStart(2, '0');
  return `#${hex(0)}${hex(1)}${hex(2)}`;
}

/**
 * The rectangles of the visible layers in a view, in CSS px of the plot area: per layer its
 * colour and [x0, y0, x1, y1] × n (spans off the view left out, clipped to it, at least a
 * pixel wide). Pure: node tests.
 * @param {import('./segments.js').Layer[]} list
 * @param {View} view
 * @param {Set<string>} hidden  categories hidden in the legend
 * @returns {{color: string, category: string, rects: Float64Array, count: number}[]}
 */
export function rectangles(list, view, hidden = new Set()) {
  const { width, height, x0, x1, rows } = view;
  const perSecond = width / (x1 - x0);
  const rowPx = height / Math.max(rows, 1);
  const out = [];
  for (const l of list) {
    if (l.instant || hidden.has(l.category)) continue;
    const thick = Math.min(rowPx, lineWidth(l.depth, rowPx));
    const rects = new Float64Array(l.index.length * 4);
    let n = 0;
    for (let k = 0; k < l.index.length; k++) {
      let a = (l.x[3 * k] - x0) * perSecond;
      let b = (l.x[3 * k + 1] - x0) * perSecond;
      if (b < 0 || a > width) continue;
      a = Math.max(a, 0);
      b = Math.min(Math.max(b, a + 1), width);
      const mid = (l.y[3 * k] + 0.5) * rowPx;
      rects[4 * n] = a;
      rects[4 * n + 1] = mid - thick / 2;
      rects[4 * n + 2] = b;
      rects[4 * n + 3] = mid + thick / 2;
      n++;
    }
    out.push({ color: l.color, category: l.category, rects, count: n });
  }
  return out;
}

export class SpanCanvas {
  /** @param {HTMLElement} parent  the positioned box the canvas sits in, under the plot */
  constructor(parent) {
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'span-canvas';
    this.canvas.setAttribute('aria-hidden', 'true');
    parent.prepend(this.canvas);
    this.list = [];
    this.hidden = new Set();
    this.band = '#f3f4f7'; // opaque: every colour drawn here is (no blending to get wrong)
    /** What the last draw put on screen: spans per category (tests, benchmarks). */
    this.stats = { spans: 0, byCategory: {} };
    this.gl = this.setUpGl();
    this.ctx = this.gl ? null : this.canvas.getContext('2d');
    this.kind = this.gl ? 'webgl' : '2d';
  }

  /** @param {import('./segments.js').Layer[]} list */
  setData(list) {
    this.list = list;
  }

  setUpGl() {
    const gl = /** @type {WebGLRenderingContext | null} */ (this.canvas.getContext('webgl',
      { antialias: false, preserveDrawingBuffer: true }));
    if (!gl) return null;
    const shader = (type, source) => {
      const s = gl.createShader(type);
      gl.shaderSource(s, source);
      gl.compileShader(s);
      return gl.getShaderParameter(s, gl.COMPILE_STATUS) ? s : null;
    };
    const vs = shader(gl.VERTEX_SHADER, VERTEX);
    const fs = shader(gl.FRAGMENT_SHADER, FRAGMENT);
    if (!vs || !fs) return null;
    const program = gl.createProgram();
    gl.attachShader(program, vs);
    gl.attachShader(program, fs);
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) return null;
    this.program = program;
    this.buffer = gl.createBuffer();
    this.loc = { pos: gl.getAttribLocation(program, 'a_pos'), size: gl.getUniformLocation(program, 'u_size'),
      color: gl.getUniformLocation(program, 'u_color') };
    return gl;
  }

  /** Draw the spans for `view` (see View). */
  draw(view) {
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    const w = Math.max(1, Math.round(view.width * dpr));
    const h = Math.max(1, Math.round(view.height * dpr));
    if (c.width !== w || c.height !== h) {
      c.width = w;
      c.height = h;
    }
    Object.assign(c.style, { left: `${view.left}px`, top: `${view.top}px`, width: `${view.width}px`,
      height: `${view.height}px` });
    const groups = rectangles(this.list, view, this.hidden);
    const bands = this.bands(view);
    if (this.gl) this.drawGl(groups, bands, view, dpr);
    else this.draw2d(groups, bands, dpr);
    const byCategory = {};
    let spans = 0;
    for (const g of groups) {
      byCategory[g.category] = (byCategory[g.category] || 0) + g.count;
      spans += g.count;
    }
    this.stats = { spans, byCategory };
  }

  /** Every other row's band, as rectangles in CSS px. */
  bands(view) {
    const rowPx = view.height / Math.max(view.rows, 1);
    const rects = [];
    for (let r = 1; r < view.rows; r += 2) rects.push(0, r * rowPx, view.width, (r + 1) * rowPx);
    return { color: this.band, category: '', rects: Float64Array.from(rects), count: rects.length / 4 };
  }

  draw2d(groups, bands, dpr) {
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    for (const g of [bands, ...groups]) {
      ctx.fillStyle = g.color;
      const r = g.rects;
      for (let k = 0; k < g.count; k++) ctx.fillRect(r[4 * k], r[4 * k + 1], r[4 * k + 2] - r[4 * k], r[4 * k + 3] - r[4 * k + 1]);
    }
  }

  drawGl(groups, bands, view, dpr) {
    const gl = this.gl;
    const all = [bands, ...groups];
    let total = 0;
    for (const g of all) total += g.count;
    const data = new Float32Array(total * 12);
    let at = 0;
    const ranges = [];
    for (const g of all) {
      const first = at / 2;
      const r = g.rects;
      for (let k = 0; k < g.count; k++) {
        const a = r[4 * k] * dpr;
        const b = r[4 * k + 1] * dpr;
        const c = r[4 * k + 2] * dpr;
        const d = r[4 * k + 3] * dpr;
        // Two triangles: (a, b) (c, b) (a, d) and (a, d) (c, b) (c, d).
        data[at] = a; data[at + 1] = b; data[at + 2] = c; data[at + 3] = b;
        data[at + 4] = a; data[at + 5] = d; data[at + 6] = a; data[at + 7] = d;
        data[at + 8] = c; data[at + 9] = b; data[at + 10] = c; data[at + 11] = d;
        at += 12;
      }
      ranges.push({ first, count: g.count * 6, color: rgba(g.color) });
    }
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.clearColor(0, 0, 0, 0);
    gl.clear(gl.COLOR_BUFFER_BIT);
    gl.useProgram(this.program);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.buffer);
    gl.bufferData(gl.ARRAY_BUFFER, data, gl.DYNAMIC_DRAW);
    gl.enableVertexAttribArray(this.loc.pos);
    gl.vertexAttribPointer(this.loc.pos, 2, gl.FLOAT, false, 0, 0);
    gl.uniform2f(this.loc.size, view.width * dpr, view.height * dpr);
    for (const { first, count, color } of ranges) {
      if (!count) continue;
      gl.uniform4f(this.loc.color, color[0], color[1], color[2], color[3]);
      gl.drawArrays(gl.TRIANGLES, first, count);
    }
  }
}

// @ts-check
// When charts draw: only near the viewport, at most a few redraws per second each however fast
// data arrives, visible charts first, and no more work per animation frame than a budget.
// Far from the viewport a chart releases its Plotly resources.

export const MIN_INTERVAL_MS = 250; // ≤ 4 redraws per second per chart in view
const OFFSCREEN_INTERVAL_MS = 2000; // near but not in view: kept roughly current, cheaply
const FRAME_BUDGET_MS = 24;
// A chart in view never drawn yet (the first screen, a chart scrolled to from far) is drawn past
// the budget, up to this much work in the frame: drawn a chart a frame, a first screen took a
// page layout and paint per chart (each ~50 ms on a busy machine) between its charts.
const FIRST_DRAW_BUDGET_MS = 300;
const NEAR_MARGIN = '600px 0px';
const FAR_MARGIN = '2400px 0px';

export class Scheduler {
  constructor({ minInterval = MIN_INTERVAL_MS, budget = FRAME_BUDGET_MS } = {}) {
    this.minInterval = minInterval;
    this.budget = budget;
    this.queue = new Set();
    this.raf = 0;
    this.timer = 0;
    /** @type {(() => void) | null} called when the queue has nothing in view left to draw */
    this.onSettled = null;
  }

  request(chart) {
    this.queue.add(chart);
    this.kick();
  }

  kick() {
    if (!this.raf) this.raf = requestAnimationFrame(() => this.run());
  }

  run() {
    this.raf = 0;
    clearTimeout(this.timer);
    this.timer = 0;
    const start = performance.now();
    let wait = Infinity;
    let busy = false;
    // In view first, and of those the ones not drawn yet (a first screen before redraws).
    const fresh = (c) => (c.lastDraw === 0 ? 1 : 0);
    const items = [...this.queue].sort((a, b) => (b.inView - a.inView) || (fresh(b) - fresh(a)) || (a.order - b.order));
    for (const chart of items) {
      if (!chart.near) {
        this.queue.delete(chart); // drawn when it comes near again
        continue;
      }
      if (!chart.ready()) continue; // its data request resolves and asks again
      const interval = chart.inView ? this.minInterval : OFFSCREEN_INTERVAL_MS;
      // Never drawn (lastDraw 0): due at once. Counted from 0, a page younger than the interval
      // (a warm load's first frame comes ~100 ms after navigation) held its first screen back.
      const due = chart.lastDraw === 0 ? 0 : chart.lastDraw + interval - performance.now();
      if (due > 0) {
        wait = Math.min(wait, due);
        continue;
      }
      const spent = performance.now() - start;
      if (spent > this.budget && !(chart.inView && chart.lastDraw === 0 && spent < FIRST_DRAW_BUDGET_MS)) {
        busy = true;
        break;
      }
      this.queue.delete(chart);
      try {
        chart.draw();
      } catch (err) {
        console.error('chart draw failed', chart.id, err);
      }
    }
    if (busy) this.kick();
    else if (wait < Infinity) this.timer = setTimeout(() => this.kick(), wait);
    if (!busy && this.onSettled && ![...this.queue].some((c) => c.inView && c.near)) this.onSettled();
  }
}

/**
 * Watches chart cards: `near` (within NEAR_MARGIN) makes a chart load and draw, leaving
 * FAR_MARGIN purges it, `inView` orders the queue. Cards must have `.chart` = their Chart.
 */
export class Visibility {
  constructor() {
    const each = (fn) => (entries) => entries.forEach((e) => e.target.chart && fn(e.target.chart, e.isIntersecting));
    // A chart coming into view with nothing drawn (no sketch is drawn out of view: charts/
    // chart.js draw) draws now.
    this.view = new IntersectionObserver(each((c, on) => {
      c.inView = on;
      if (on && c.near && !c.rendered && !c.canvas) c.invalidate();
    }));
    // Only a change: a chart primed near (primeInView) is not asked to load and draw again by
    // the observer's first report (it was drawn twice, 250 ms apart, on every first screen).
    this.near = new IntersectionObserver(each((c, on) => c.near !== on && c.setNear(on)), { rootMargin: NEAR_MARGIN });
    this.far = new IntersectionObserver(each((c, on) => { if (!on) c.purge(); }), { rootMargin: FAR_MARGIN });
  }

  observe(chart) {
    for (const o of [this.view, this.near, this.far]) o.observe(chart.el);
  }

  /**
   * Mark the charts of `charts` in the viewport as in view and near from the layout as it is
   * now, rather than at the observers' first report (a frame later, once the page is painted):
   * a page asks for its first screen's data before it builds the rest, and for that alone (the
   * charts near but out of view follow at the observers' report). The reports still come, and
   * correct any chart the rest of the page has moved since.
   */
  primeInView(charts) {
    const height = innerHeight;
    for (const chart of charts) {
      const r = chart.el.getBoundingClientRect();
      if (!r.height || r.bottom <= 0 || r.top >= height) continue; // out of view, or hidden
      chart.inView = true;
      chart.setNear(true);
    }
  }

  unobserve(chart) {
    for (const o of [this.view, this.near, this.far]) o.unobserve(chart.el);
  }
}

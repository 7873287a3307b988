// @ts-check
// The Timeline page (/runs/<id>/timeline?start=&end=): fetches the window's events, draws
// them (timeline/gantt.js), refetches on zoom and pan and writes the window into the URL
// (a copied URL opens the same view), shows a clicked span (timeline/details.js), exports the
// window as a Chrome trace, and follows a running run (timeline/follow.js). Without a window
// in the URL it shows the run's newest events and moves along with them.

import { h, loadPlotly, snippet, themeColors } from '../core/dom.js';
import { getEvents, traceUrl } from './api.js';
import { SpanCanvas, mix } from './canvas.js';
import { clockText, eventAt, renderDetails } from './details.js';
import { Debounced, RunWatch } from './follow.js';
import { GANTT_CONFIG, ganttLayout, ganttTraces } from './gantt.js';
import { assignRows } from './lanes.js';
import { RowIndex, rowAt } from './pick.js';
import { drawnCounts, layers } from './segments.js';
import {
  defaultWindow, parseWindow, relayoutWindow, sameWindow, spanText, validExtent, windowSearch,
} from './window.js';

const MOVE_MS = 150; // a zoom or pan refetches once the wheel or drag rests this long
const CLICK_PX = 5; // a press that moved less than this is a click, not a drag
const PICK_PX = 4; // how near (px) an instant or a short span must be to be hit
// A window no event reaches (the year 2096): asking for it tells the run's extent only.
const PROBE = { start: 4e9, end: 4e9 + 1 };
const WHOLE = new Intl.NumberFormat('en-US');

const byId = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

export class TimelinePage {
  /** @param {HTMLElement} root  `#timeline` (templates/timeline.html) */
  constructor(root) {
    this.root = root;
    this.runId = Number(root.dataset.runId);
    this.plot = /** @type {PlotlyElement} */ (byId('gantt'));
    this.panel = byId('span-details');
    this.tip = byId('span-tip');
    this.outline = byId('span-outline');
    this.spans = new SpanCanvas(/** @type {HTMLElement} */ (this.plot.parentElement));
    /** @type {import('./window.js').TimeWindow | null} the window asked for; null: the newest */
    this.asked = parseWindow(location.search);
    /** @type {import('./window.js').TimeWindow | null} the window drawn */
    this.win = null;
    /** @type {import('./window.js').Extent} */
    this.extent = null;
    // The extent the page came with: the first load needs no look-up of it.
    this.liveExtent = validExtent(JSON.parse(byId('run-extent').textContent));
    /** @type {number | null} the x axis's zero (unix s): the run's first event, fixed once known */
    this.origin = null;
    this.shown = null; // what is drawn: {events, rows, row, list, index?, layerOf}
    this.selected = -1;
    this.loads = 0;
    this.draws = 0;
    this.drawMs = null;
    this.timings = null;
    this.reacting = false;
    this.controller = null;
    this.plotly = loadPlotly(/** @type {HTMLLinkElement} */ (byId('plotly-src')).href);
    this.refetch = new Debounced(() => this.load());
    this.moveTimer = null;
    renderDetails(this.panel, null, 0, this.runId);
    this.wire();
    const info = JSON.parse(byId('run-info').textContent);
    this.watch = new RunWatch(info, Number(root.dataset.seq) || 0, {
      onEvents: (msg) => this.onEvents(msg),
    });
    this.ready = this.load();
  }

  // ---------------------------------------------------------------- loading

  /** A live `events` message: the run has new events (its extent now `msg.extent`). */
  onEvents(msg) {
    this.liveExtent = validExtent(msg.extent) ?? this.liveExtent;
    // A window in the past only changes with late events; one at the newest edge moves on.
    this.refetch.poke();
  }

  /** The window to fetch: the one asked for, else the run's newest (its extent looked up). */
  async target(signal) {
    if (this.asked) return this.asked;
    if (this.liveExtent) {
      this.extent = this.liveExtent;
      this.liveExtent = null;
    } else {
      // A window with no events (far ahead) costs the server nothing; the extent comes along.
      const probe = await getEvents(this.runId, PROBE, { limit: 1, signal });
      this.extent = validExtent(probe.extent);
    }
    return defaultWindow(this.extent);
  }

  /** Fetch and draw the window; a later load supersedes one still in flight. */
  async load() {
    const ticket = ++this.loads;
    this.controller?.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.root.dataset.loading = 'true';
    try {
      const win = await this.target(controller.signal);
      if (ticket !== this.loads) return;
      if (!win) {
        this.showEmpty(true);
        return;
      }
      const asked = performance.now();
      const body = await getEvents(this.runId, win, { signal: controller.signal });
      if (ticket !== this.loads) return;
      // Where a load's time goes (ms, performance.now()): for bench/timeline_page.py.
      this.timings = { asked, received: performance.now() };
      this.extent = validExtent(body.extent) ?? this.extent;
      if (!this.extent && !body.events.name.length) {
        this.showEmpty(true);
        return;
      }
      this.showEmpty(false);
      if (this.origin === null) this.origin = this.extent?.[0] ?? win.start;
      await this.draw(body, win);
      byId('load-error').textContent = '';
    } catch (err) {
      if (err?.name === 'AbortError' || ticket !== this.loads) return;
      console.warn(err);
      byId('load-error').textContent = `Could not load the events: ${err.message}`;
    } finally {
      if (ticket === this.loads) delete this.root.dataset.loading;
    }
  }

  /** The run has no events: say how to send some (and keep listening for the first). */
  showEmpty(empty) {
    const box = byId('empty');
    if (empty && box.hidden) {
      box.replaceChildren(
        h('h2', {}, 'This run has sent no events yet'),
        h('p', {}, 'The timeline draws spans (forward, backward, generation, weight_sync, …) '
          + 'sent as `events` messages — see docs/protocol.md, events. For example:'),
        snippet([
          'with client.span("generation", source="inference", server=0, slot=3,',
          '                 step=policy_step, sample_id=sid) as sp:',
          '    out = engine.generate(prompt); sp.tokens = len(out.token_ids)',
          'client.log_events(name="forward", start=t0, end=t1, source="trainer", rank=rank, step=step)',
        ].join('\n')),
        h('p', { class: 'muted' }, 'They appear here as they arrive; no reload needed.'));
    }
    box.hidden = !empty;
    this.root.hidden = empty;
    byId('timeline-controls').hidden = empty;
    this.root.dataset.empty = String(empty);
    if (empty) this.root.dataset.drawn = String(++this.draws);
  }

  // ---------------------------------------------------------------- drawing

  /** Draw a fetched window (`body`: the API's answer for `win`). */
  async draw(body, win) {
    const events = body.events;
    const { rows, row } = assignRows(events, body.lanes);
    const width = this.plot.clientWidth || 1200;
    const list = layers(events, row, this.origin, (win.end - win.start) / width);
    const layerOf = new Int32Array(events.name.length);
    list.forEach((l, k) => { for (const i of l.index) layerOf[i] = k; });
    const keep = this.shown && this.selected >= 0 ? eventAt(this.shown.events, this.selected) : null;
    this.shown = { events, rows, row, list, layerOf, index: null };
    this.win = win;
    this.selected = keep ? this.find(keep) : -1;
    const built = performance.now();
    const Plotly = await this.plotly;
    const t0 = performance.now();
    const hidden = this.hiddenCategories();
    const data = ganttTraces(list).map((t) => (hidden.has(t.meta.category) ? { ...t, visible: 'legendonly' } : t));
    const theme = themeColors();
    this.figure = { data, layout: ganttLayout(rows, win, this.origin, theme) };
    this.spans.setData(list);
    this.spans.band = mix(theme.grid || '#e7eaf0', theme.bg || '#ffffff', 0.45);
    this.reacting = true; // its afterplot would paint the spans before the last of them
    try {
      await Plotly.react(this.plot, this.figure.data, this.figure.layout, GANTT_CONFIG);
    } finally {
      this.reacting = false;
    }
    this.listen();
    this.paint();
    this.drawMs = performance.now() - t0;
    if (this.timings) Object.assign(this.timings, { built, plotly: t0, drawn: performance.now() });
    this.showSelected();
    const counts = drawnCounts(list);
    this.describe(body, win, rows.length, counts);
    Object.assign(this.root.dataset, { spans: String(counts.spans), instants: String(counts.instants),
      rows: String(rows.length), start: String(win.start), end: String(win.end) });
    this.root.dataset.drawn = String(++this.draws);
  }

  /** The controls' texts: the window, what it holds, the truncation notice, the export link. */
  describe(body, win, rows, counts) {
    byId('window-text').textContent = `${clockText(win.start)} – ${clockText(win.end)} (${spanText(win.end - win.start)})`;
    byId('counts').textContent = counts.spans + counts.instants
      ? `${WHOLE.format(counts.spans)} spans · ${WHOLE.format(counts.instants)} instants · ${rows} lanes`
      : 'No events in this window';
    const notice = byId('truncated');
    notice.hidden = !body.truncated;
    notice.textContent = body.truncated
      ? `This window holds more events than one request returns; ${WHOLE.format(body.events.name.length)} `
        + 'are drawn. Zoom in to see every event.'
      : '';
    const exp = /** @type {HTMLAnchorElement} */ (byId('export-trace'));
    exp.href = traceUrl(this.runId, win);
    exp.download = `run-${this.runId}-trace.json`;
    const following = byId('follow-newest');
    following.setAttribute('aria-pressed', String(this.asked === null));
  }

  /** The index of an event equal to `e` among those drawn (a refetch keeps the selection). */
  find(e) {
    const ev = this.shown.events;
    for (let i = 0; i < ev.name.length; i++) {
      if (ev.start[i] === e.start && ev.name[i] === e.name && ev.end[i] === e.end
          && (ev.rank[i] ?? null) === e.rank && (ev.slot[i] ?? null) === e.slot
          && (ev.server[i] ?? null) === e.server) return i;
    }
    return -1;
  }

  // ---------------------------------------------------------------- zoom, pan, keys

  wire() {
    byId('whole-run').addEventListener('click', () => {
      if (!this.extent) return;
      const [first, last] = this.extent;
      const pad = Math.max(1e-3, (last - first) * 0.02);
      this.goTo({ start: first - pad, end: last + pad });
    });
    byId('follow-newest').addEventListener('click', () => this.goTo(null));
    document.addEventListener('keydown', (ev) => this.key(ev));
  }

  /** Show `win` (null: the run's newest, following it), in the URL too. */
  goTo(win) {
    this.asked = win;
    history.replaceState(null, '', `${location.pathname}${windowSearch(location.search, win)}${location.hash}`);
    clearTimeout(this.moveTimer);
    this.moveTimer = setTimeout(() => this.load(), MOVE_MS);
  }

  /** Perfetto's keys: w / s zoom in and out around the middle, a / d pan. */
  key(ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || !this.win) return;
    if (ev.target.closest?.('input, select, textarea')) return;
    const { start, end } = this.win;
    const span = end - start;
    const mid = (start + end) / 2;
    const moves = {
      w: () => ({ start: mid - span / 4, end: mid + span / 4 }),
      s: () => ({ start: mid - span, end: mid + span }),
      a: () => ({ start: start - span / 5, end: end - span / 5 }),
      d: () => ({ start: start + span / 5, end: end + span / 5 }),
    };
    const move = moves[ev.key];
    if (!move) return;
    ev.preventDefault();
    this.goTo(move());
  }

  /** Plotly's events and the pointer's, attached once the plot exists. */
  listen() {
    if (this.listening) return;
    this.listening = true;
    this.plot.on('plotly_relayout', (ev) => this.onRelayout(ev));
    // While a pan drags, the spans follow it; after any redraw (a zoom, a resize), they are
    // drawn again for the axes as they are; a legend click shows or hides a colour.
    this.plot.on('plotly_relayouting', (ev) => {
      this.outline.hidden = true;
      const moved = relayoutWindow(ev, 0);
      if (moved && 'window' in moved) this.paint([moved.window.start, moved.window.end]);
    });
    this.plot.on('plotly_afterplot', () => this.reacting || this.paint());
    this.plot.on('plotly_restyle', () => this.paint());
    this.plot.addEventListener('pointerdown', (ev) => { this.press = { x: ev.clientX, y: ev.clientY }; }, true);
    document.addEventListener('pointerup', (ev) => {
      const press = this.press;
      this.press = null;
      if (press && Math.hypot(ev.clientX - press.x, ev.clientY - press.y) < CLICK_PX) {
        this.select(this.eventAtPoint(ev.clientX, ev.clientY));
      }
    }, true);
    let frame = 0;
    this.plot.addEventListener('mousemove', (ev) => {
      if (frame) return;
      frame = requestAnimationFrame(() => {
        frame = 0;
        this.hover(ev);
      });
    });
    this.plot.addEventListener('mouseleave', () => { this.tip.hidden = true; });
  }

  onRelayout(ev) {
    const moved = relayoutWindow(ev, this.origin);
    if (!moved) return;
    if ('reset' in moved) this.goTo(null);
    else if (!sameWindow(moved.window, this.win)) this.goTo(moved.window);
  }

  // ---------------------------------------------------------------- painting

  /** The categories hidden in the legend (a click on their entry). */
  hiddenCategories() {
    return new Set((this.plot.data || []).filter((t) => t.visible === 'legendonly')
      .map((t) => t.meta?.category));
  }

  /**
   * Draw the spans for the plot area as it is (or for the x `range`, seconds since the origin,
   * while a pan drags), and place the selection's outline.
   * @param {[number, number] | null} [range]
   */
  paint(range = null) {
    const fl = this.plot._fullLayout;
    if (!fl || !this.shown) return;
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const box = /** @type {HTMLElement} */ (this.plot.parentElement).getBoundingClientRect();
    const at = this.plot.getBoundingClientRect();
    const [x0, x1] = range ?? xa.range;
    this.spans.hidden = this.hiddenCategories();
    this.spans.draw({ left: at.left - box.left + xa._offset, top: at.top - box.top + ya._offset,
      width: xa._length, height: ya._length, x0, x1, rows: this.shown.rows.length });
    if (!range) this.placeOutline();
  }

  // ---------------------------------------------------------------- picking

  /** The event under a point of the page (client px), or -1. */
  eventAtPoint(clientX, clientY) {
    const fl = this.plot._fullLayout;
    const s = this.shown;
    if (!fl || !s) return -1;
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const rect = this.plot.getBoundingClientRect();
    const px = clientX - rect.left - xa._offset;
    const py = clientY - rect.top - ya._offset;
    if (px < 0 || px > xa._length || py < 0 || py > ya._length) return -1;
    const r = rowAt(ya.p2l(py), s.rows.length);
    if (r < 0) return -1;
    if (!s.index) s.index = new RowIndex(s.events.start, s.events.end, s.row, s.rows.length);
    const perPx = Math.abs(xa.range[1] - xa.range[0]) / xa._length;
    const hidden = this.hiddenCategories();
    const accept = hidden.size ? (i) => !hidden.has(s.list[s.layerOf[i]].category) : null;
    return s.index.at(r, this.origin + xa.p2l(px), PICK_PX * perPx, accept);
  }

  hover(ev) {
    const i = this.press ? -1 : this.eventAtPoint(ev.clientX, ev.clientY);
    this.plot.classList.toggle('on-span', i >= 0);
    if (i < 0) {
      this.tip.hidden = true;
      return;
    }
    const e = this.shown.events;
    const what = e.end[i] === null ? 'instant' : spanText(e.end[i] - e.start[i]);
    this.tip.textContent = `${e.name[i]} · ${what}${e.step[i] !== null ? ` · step ${e.step[i]}` : ''}`;
    this.tip.hidden = false;
    this.tip.style.left = `${ev.pageX + 12}px`;
    this.tip.style.top = `${ev.pageY + 12}px`;
  }

  /** Show event `i` (-1: none) in the panel and outline it on the plot. */
  select(i) {
    if (i === this.selected && i < 0) return;
    this.selected = i;
    this.showSelected();
  }

  showSelected() {
    const i = this.selected;
    renderDetails(this.panel, i >= 0 ? eventAt(this.shown.events, i) : null, this.origin, this.runId);
    this.placeOutline();
  }

  /**
   * The outline around the selected span (a few pixels wider than an instant or a very short
   * span), an element over the plot: selecting redraws nothing.
   */
  placeOutline() {
    const box = this.outline;
    const i = this.selected;
    const fl = this.plot._fullLayout;
    if (i < 0 || !fl) {
      box.hidden = true;
      return;
    }
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const e = this.shown.events;
    const lo = xa._offset;
    const hi = xa._offset + xa._length;
    const x0 = Math.max(lo, xa._offset + xa.l2p(e.start[i] - this.origin) - 3);
    const x1 = Math.min(hi, xa._offset + xa.l2p((e.end[i] ?? e.start[i]) - this.origin) + 3);
    const r = this.shown.row[i];
    const y0 = ya._offset + ya.l2p(r - 0.45);
    const y1 = ya._offset + ya.l2p(r + 0.45);
    box.hidden = x1 <= x0;
    const at = this.plot.getBoundingClientRect();
    const parent = /** @type {HTMLElement} */ (box.offsetParent ?? box.parentElement).getBoundingClientRect();
    Object.assign(box.style, { left: `${at.left - parent.left + x0}px`, width: `${x1 - x0}px`,
      top: `${at.top - parent.top + Math.min(y0, y1)}px`, height: `${Math.abs(y1 - y0)}px` });
  }
}

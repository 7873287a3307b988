// @ts-check
// Client-side state of the runs on the page: catalog, loaded series, live deltas, and the
// batched, lazy loading of series over HTTP.

import { getCatalog, getSeries } from '../core/api.js';
import { familyKey } from './compose.js';
import { TwinIndex } from './normalized.js';
import { firstStepTime, fromPayload, mergePoints } from './transforms.js';

const RECENT_DELTAS = 512;
// A normalized series' range (its badge) can move while points arrive (an observed range
// widens, a new environment shows up): after live points it is re-read at most this often.
export const RANGE_REFRESH_MS = 5000;
const BATCH_IDS = 60;
const MAX_IN_FLIGHT = 4;

/**
 * One run: its catalog, the series loaded so far (each valid as of a seq), and the last seq
 * applied from the live socket. Recent deltas are kept so that a series whose snapshot was
 * read before some already-applied delta catches up (snapshot + later deltas = current).
 */
export class RunStore {
  constructor(info) {
    this.info = info;
    this.id = info.id;
    this.catalog = new Map();
    this.twins = new TwinIndex();
    this.families = new Map(); // compose.familyKey -> this run's raw entries of that chart
    this.environments = [];
    this.seq = 0;
    this.series = new Map();
    this.recent = [];
    this.firstStep = null;
    this.t0 = null;
    this.maxPoints = 1000;
    /** @type {string | null} the run's colour (the page sets it: core/dom.js runColor) */
    this.color = null;
    /** @type {(() => void) | null} called when an earlier first step (the time axis' origin) is seen */
    this.onFirstStep = null;
  }

  /** Load the catalog (or take one the page came with); sets the seq live updates follow. */
  async loadCatalog(preloaded = null) {
    const body = preloaded || await getCatalog(this.id);
    this.environments = body.environments || [];
    this.seq = body.seq ?? 0;
    return this.addEntries(body.series);
  }

  /** Add catalog entries; returns the ones that are new. */
  addEntries(entries) {
    const added = [];
    for (const e of entries || []) {
      if (this.catalog.has(e.id)) continue;
      this.catalog.set(e.id, e);
      this.twins.add(e);
      if (!e.normalized) {
        const fk = familyKey(e);
        if (!this.families.has(fk)) this.families.set(fk, []);
        this.families.get(fk).push(e);
      }
      added.push(e);
    }
    return added;
  }

  /** Forget every loaded series (after a reset): they are reloaded on demand. */
  clearSeries() {
    this.series.clear();
    this.recent = [];
    this.firstStep = null;
    this.t0 = null;
  }

  has(sid) {
    return Boolean(this.series.get(sid)?.data);
  }

  /** This run's normalized twin of a catalog entry (optionally of its `stat` sibling). */
  twinOf(entry, stat = entry.stat) {
    return this.twins.twinOf(entry, stat);
  }

  /** The raw series a normalized id of this run is the twin of; null for any other id. */
  rawIdOf(sid) {
    return this.twins.rawOf(this.catalog.get(sid));
  }

  /** Loaded, but its range may have moved since: time to read it again. */
  rangeDue(sid, now = Date.now()) {
    const rec = this.series.get(sid);
    return Boolean(rec?.rangeStale) && now - rec.loadedAt >= RANGE_REFRESH_MS;
  }

  /**
   * Apply a delta that follows the last applied seq. Returns {changed: Set of series ids whose
   * points changed, added: new catalog entries, unknown: ids not in the catalog}.
   */
  applyDelta(msg) {
    const added = this.addEntries(msg.series);
    const changed = new Set();
    const unknown = [];
    for (const [sid, pts] of Object.entries(msg.points || {})) {
      if (!this.catalog.has(sid)) unknown.push(sid);
      if (this.mergeInto(sid, pts, msg.seq)) changed.add(sid);
    }
    this.recent.push({ seq: msg.seq, points: msg.points || {} });
    if (this.recent.length > RECENT_DELTAS) this.recent.splice(0, this.recent.length - RECENT_DELTAS);
    this.seq = msg.seq;
    return { changed, added, unknown };
  }

  mergeInto(sid, pts, seq) {
    const rec = this.series.get(sid);
    if (rec?.missing) {
      this.series.delete(sid); // it exists now: the chart loads it
      return true;
    }
    if (!rec || !rec.data || rec.seq >= seq) return false;
    // Categorical points are never merged pairwise (a state strip needs every step).
    const n = mergePoints(rec.data, pts, rec.categorical ? Infinity : this.maxPoints);
    if (rec.range?.normalized) {
      rec.rangeStale = true; // its bounds are raw values: only the server knows them
    } else if (rec.range && rec.range.source === 'observed') {
      for (const v of pts.value) {
        if (v === null || !Number.isFinite(v)) continue;
        if (rec.range.min === null || v < rec.range.min) rec.range.min = v;
        if (rec.range.max === null || v > rec.range.max) rec.range.max = v;
      }
    }
    this.noteFirstStep(rec.data);
    return n > 0;
  }

  /** A snapshot of one series arrived (valid as of `seq`): store it and replay later deltas. */
  loaded(sid, payload, seq) {
    const data = fromPayload(payload);
    // The server sends a categorical series whole (strings, never downsampled).
    const categorical = Boolean(payload.categorical || this.catalog.get(sid)?.categorical);
    if (categorical) Object.assign(data, { bmin: null, bmax: null, downsampled: false });
    this.series.set(sid, { data, seq, range: { ...payload.range }, loadedAt: Date.now(), categorical });
    for (const d of this.recent) {
      if (d.seq > seq && d.points[sid]) mergePoints(data, d.points[sid], categorical ? Infinity : this.maxPoints);
    }
    this.series.get(sid).seq = Math.max(seq, this.seq);
    this.noteFirstStep(data);
  }

  missing(sid) {
    this.series.set(sid, { data: null, seq: this.seq, range: null, missing: true });
  }

  /** Track the run's first step and its time (time 0 of the time axis). */
  noteFirstStep(data) {
    const first = firstStepTime(data.step.slice(0, 1), data.time.slice(0, 1));
    if (!first) return;
    if (this.firstStep === null || first.step < this.firstStep
        || (first.step === this.firstStep && first.time < this.t0)) {
      this.firstStep = first.step;
      this.t0 = first.time;
      this.onFirstStep?.();
    }
  }
}

/**
 * Lazy, batched series loading: charts ask for (run, id) pairs; requests made in the same tick
 * go out together, at most BATCH_IDS ids per request and MAX_IN_FLIGHT requests at a time.
 */
export class Loader {
  constructor() {
    this.urgent = new Map(); // run id -> {store, ids: Map(sid -> resolve)}
    this.queue = new Map();
    this.pending = new Map(); // `${run}\0${sid}` -> promise
    this.inFlight = 0;
    this.scheduled = false;
  }

  /**
   * Resolves when the series is in the store (or known missing). `urgent` requests (charts in
   * the viewport) go out before the others, in batches of their own.
   */
  request(store, sid, urgent = false) {
    const key = `${store.id}\u0000${sid}`;
    if (this.pending.has(key)) return this.pending.get(key);
    const queue = urgent ? this.urgent : this.queue;
    const promise = new Promise((resolve) => {
      if (!queue.has(store.id)) queue.set(store.id, { store, ids: new Map() });
      queue.get(store.id).ids.set(sid, resolve);
    });
    this.pending.set(key, promise);
    promise.then(() => this.pending.delete(key));
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => {
        this.scheduled = false;
        this.pump();
      });
    }
    return promise;
  }

  isPending(store, sid) {
    return this.pending.has(`${store.id}\u0000${sid}`);
  }

  pump() {
    while (this.inFlight < MAX_IN_FLIGHT && (this.urgent.size || this.queue.size)) {
      const queue = this.urgent.size ? this.urgent : this.queue;
      const [runId, job] = queue.entries().next().value;
      const batch = [...job.ids.entries()].slice(0, BATCH_IDS);
      for (const [sid] of batch) job.ids.delete(sid);
      if (!job.ids.size) queue.delete(runId);
      this.fetch(job.store, batch);
    }
  }

  async fetch(store, batch) {
    this.inFlight++;
    const ids = batch.map(([sid]) => sid);
    try {
      const body = await getSeries(store.id, ids, { maxPoints: store.maxPoints });
      for (const sid of ids) {
        if (body.series[sid]) store.loaded(sid, body.series[sid], body.seq);
        else store.missing(sid);
      }
    } catch (err) {
      console.warn('series request failed', err);
      for (const sid of ids) store.series.delete(sid); // retried when the chart comes back
    } finally {
      this.inFlight--;
      for (const [, resolve] of batch) resolve();
      this.pump();
    }
  }
}

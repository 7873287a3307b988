// @ts-check
// Keeping the Timeline and Performance pages current: the run's live socket (core/live.js)
// announces `{"type": "events", "run", "extent": [first, last]}` once events or gauges of the
// run commit; the page refetches what it shows, at most once per REFETCH_MS and never two at
// a time. The run's status badge follows `run` messages and runs/follow.js's re-reads.

import { LiveClient } from '../core/live.js';
import { RunFollower } from '../runs/follow.js';
import { setConnection, setStatusBadge, showDeleted } from '../runs/status.js';

export const REFETCH_MS = 1000;

/** The live socket, with the `events` message handed to `handlers.events(msg)`. */
export class EventsLive extends LiveClient {
  dispatch(msg) {
    if (msg?.type === 'events') {
      if (this.runs.has(msg.run) && this.handlers.events) this.handlers.events(msg);
      return;
    }
    super.dispatch(msg);
  }
}

/**
 * `run()` at most once per `everyMs`, the next call waiting for the one in flight: a burst
 * of live messages makes one refetch, and the last message is never dropped.
 */
export class Debounced {
  /** @param {() => Promise<unknown>} run */
  constructor(run, everyMs = REFETCH_MS) {
    this.run = run;
    this.everyMs = everyMs;
    this.timer = null;
    this.busy = null;
    this.again = false;
  }

  poke() {
    if (this.timer) return;
    this.timer = setTimeout(() => this.fire(), this.everyMs);
  }

  async fire() {
    this.timer = null;
    if (this.busy) {
      this.again = true;
      return;
    }
    try {
      this.busy = this.run();
      await this.busy;
    } catch (err) {
      console.warn(err);
    } finally {
      this.busy = null;
    }
    if (this.again) {
      this.again = false;
      this.poke();
    }
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * A page's run, followed: its status badge (`#run-status`), the live indicator
 * (`#live-status`), the deleted banner; `onEvents(msg)` for each `events` message and
 * `onStatus(status)` when the status changes. `seq` is the run's seq when the page was made
 * (the subscription replays only what follows).
 */
export class RunWatch {
  /**
   * @param {{id: number, status: string}} info
   * @param {number} seq
   * @param {{onEvents: (msg: any) => void, onStatus?: (status: string) => void}} hooks
   */
  constructor(info, seq, hooks) {
    this.info = info;
    this.seq = seq;
    this.hooks = hooks;
    this.gone = false;
    this.badge = document.getElementById('run-status');
    this.follower = new RunFollower((_, fresh) => this.onInfo(fresh), (_, gone) => this.deleted(gone));
    this.live = new EventsLive({
      seq: () => this.seq,
      delta: (msg) => { this.seq = msg.seq; },
      run: (_, fresh) => (fresh?.deleted ? this.deleted(fresh) : this.onInfo(fresh)),
      events: (msg) => this.hooks.onEvents(msg),
      status: (state) => setConnection(document.getElementById('live-status'), state),
    });
    this.onInfo(info);
    this.live.start();
    this.live.subscribe(info.id);
  }

  get running() {
    return this.info.status === 'running';
  }

  onInfo(fresh) {
    if (this.gone || !fresh?.status) return;
    const changed = fresh.status !== this.info.status;
    this.info = { ...this.info, ...fresh };
    if (this.badge) setStatusBadge(this.badge, this.info.status);
    this.follower.follow(this.info.id, this.info.status);
    if (changed) this.hooks.onStatus?.(this.info.status);
  }

  deleted(info) {
    if (this.gone) return;
    this.gone = true;
    this.live.stop();
    this.follower.stop();
    setConnection(document.getElementById('live-status'), 'stopped');
    if (this.badge) setStatusBadge(this.badge, 'deleted');
    showDeleted(document.getElementById('deleted-banner'), { ...this.info, ...info });
  }
}

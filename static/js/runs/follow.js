// @ts-check
// A page's runs, followed between live messages, so a page never shows a stale status: a run's shown status can change with
// no message at all (a trainer that dies silently turns `crashed` by the clock: ingest/progress.py),
// so while a run's status may drift the page re-reads it (GET /api/runs/<id>) every FOLLOW_MS.
// A 404 means the run is gone: the page is told as if a live deletion had arrived.

import { getRun } from '../core/api.js';
import { statusMayDrift } from './state.js';

export const FOLLOW_MS = 15000;

export class RunFollower {
  /**
   * `onInfo(id, info)` with each run's fresh info; `onGone(id, info)` once for a run that is
   * no longer there (`info`: {id, deleted: true, deleted_at?}).
   */
  constructor(onInfo, onGone, everyMs = FOLLOW_MS) {
    this.onInfo = onInfo;
    this.onGone = onGone;
    this.status = new Map(); // id -> the status last seen
    this.timer = setInterval(() => this.poll(), everyMs);
    this.onVisible = () => { if (!document.hidden) this.poll(); };
    document.addEventListener('visibilitychange', this.onVisible);
  }

  /** Follow `id`, whose status is now `status` (call again with every update). */
  follow(id, status) {
    this.status.set(id, status);
  }

  forget(id) {
    this.status.delete(id);
  }

  stop() {
    clearInterval(this.timer);
    document.removeEventListener('visibilitychange', this.onVisible);
    this.status.clear();
  }

  async poll() {
    if (document.hidden) return; // a hidden tab reads when it is looked at again
    const due = [...this.status].filter(([, status]) => statusMayDrift(status)).map(([id]) => id);
    await Promise.all(due.map(async (id) => {
      try {
        const info = await getRun(id);
        if (!this.status.has(id)) return;
        this.status.set(id, info.status);
        this.onInfo(id, info);
      } catch (err) {
        if (err?.status !== 404 || !this.status.has(id)) return; // away for now: next time
        this.status.delete(id);
        this.onGone(id, { id, deleted: true, deleted_at: err.body?.deleted_at ?? null });
      }
    }));
  }
}

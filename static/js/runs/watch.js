// @ts-check
// Live run info for a page that lists runs without drawing their points (the run list): a
// `/ws/live/` subscription per run that asks for no points, only the `run` messages
// (status, last step, renames, colours, notes, deletion) and backlog progress.
//
// How it asks for no points: it subscribes from a seq no run reaches (live.py replays the points
// written after `after_seq`, so none, and sends later deltas only above it). A dedicated
// info-only subscription on the server would say this outright; until then a seq past every run's is the way.

import { LiveClient } from '../core/live.js';

const INFO_ONLY_SEQ = Number.MAX_SAFE_INTEGER;
export const MAX_WATCHED = 64; // the server's limit of subscriptions per socket (live.py)

export class RunWatch {
  /** `onInfo(runId, info)` for each `run` message (info may be {id, deleted: true}). */
  constructor(onInfo) {
    this.client = new LiveClient({
      seq: () => INFO_ONLY_SEQ,
      delta: () => {},
      run: (run, info) => onInfo(run, info),
    });
    this.started = false;
  }

  /** Watch these runs (the first MAX_WATCHED of them), and no others. */
  watch(ids) {
    if (!this.started) {
      this.client.start();
      this.started = true;
    }
    const want = new Set(ids.slice(0, MAX_WATCHED));
    for (const id of [...this.client.runs]) if (!want.has(id)) this.client.unsubscribe(id);
    for (const id of want) if (!this.client.runs.has(id)) this.client.subscribe(id);
  }
}

// @ts-check
// The browser end of `/ws/live/` (telescope_ui/live.py): subscriptions per run, sequence
// checking, resync, and reconnection with backoff.

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 10000;

/**
 * One WebSocket for the page. `handlers.seq(run)` returns the last seq applied for a run (the
 * snapshot's seq at first); `handlers.delta(msg)` applies a delta that follows it;
 * `handlers.reset(run)`, `handlers.run(run, info)` and `handlers.status(text)` are optional.
 * A delta whose `from_seq` is not the last seq applied asks for a resync instead.
 */
export class LiveClient {
  constructor(handlers, url = null) {
    this.handlers = handlers;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.url = url || `${proto}//${location.host}/ws/live/`;
    this.runs = new Set();
    this.resyncing = new Map(); // run -> the seq a resync was asked from
    this.ws = null;
    this.backoff = BACKOFF_MIN_MS;
    this.timer = null;
    this.closed = false;
  }

  start() {
    this.closed = false;
    this.connect();
    return this;
  }

  stop() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
  }

  subscribe(run) {
    this.runs.add(run);
    this.send({ type: 'subscribe', run, after_seq: this.handlers.seq(run) });
  }

  unsubscribe(run) {
    this.runs.delete(run);
    this.send({ type: 'unsubscribe', run });
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  connect() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = BACKOFF_MIN_MS;
      this.resyncing.clear();
      this.status('live');
      // A reconnect resubscribes from what was applied: the server replays the gap.
      for (const run of this.runs) this.send({ type: 'subscribe', run, after_seq: this.handlers.seq(run) });
    };
    ws.onmessage = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      this.dispatch(msg);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) return;
      this.status('reconnecting');
      const delay = this.backoff * (0.75 + Math.random() * 0.5);
      this.backoff = Math.min(BACKOFF_MAX_MS, this.backoff * 2);
      this.timer = setTimeout(() => this.connect(), delay);
    };
  }

  dispatch(msg) {
    const run = msg.run;
    if (msg.type === 'delta') {
      if (!this.runs.has(run)) return;
      const last = this.handlers.seq(run);
      if (msg.from_seq !== last) {
        // One request per gap: deltas already in flight would otherwise each ask again.
        if (msg.seq > last && this.resyncing.get(run) !== last) {
          this.resyncing.set(run, last);
          this.send({ type: 'resync', run, after_seq: last });
        }
        return;
      }
      this.resyncing.delete(run);
      this.handlers.delta(msg);
    } else if (msg.type === 'reset') {
      if (this.runs.has(run) && this.handlers.reset) this.handlers.reset(run);
    } else if (msg.type === 'run') {
      if (this.handlers.run) this.handlers.run(run, msg.info);
    } else if (msg.type === 'progress') {
      if (this.handlers.run) this.handlers.run(run, { pending_steps: msg.pending });
    }
  }

  status(text) {
    if (this.handlers.status) this.handlers.status(text);
  }
}

// @ts-check
// Persistence of the Custom view: a dashboard's layout saved on the server (debounced, one
// request at a time, based on the version it was loaded as: a dashboard changed elsewhere
// meanwhile is refused, never overwritten), and the project's templates (saved dashboards to
// start new ones from; the server adds its built-in ones, "GRPO health" among them).

import { saveLayout } from '../core/api.js';

const SAVE_DELAY_MS = 400;

export class LayoutSaver {
  /**
   * `runId`, `name`: the dashboard; `base`: the updated_at it was loaded as; `read()` gives the
   * layout to save; `onStatus(text)` reports; `onSaved(stored)` gets the server's answer.
   */
  constructor({ runId, name, base, read, onStatus, onSaved }) {
    this.runId = runId;
    this.name = name;
    this.base = base;
    this.read = read;
    this.onStatus = onStatus;
    this.onSaved = onSaved;
    this.dirty = false;
    this.saving = null;
    this.conflict = false;
    this.failed = false;
  }

  /** The layout changed: save it soon. */
  changed() {
    this.dirty = true;
    this.failed = false;
    clearTimeout(this.timer);
    this.onStatus('Saving…');
    this.timer = setTimeout(() => this.flush(), SAVE_DELAY_MS);
  }

  /** Forget unsaved edits (the dashboard is going away). */
  drop() {
    clearTimeout(this.timer);
    this.dirty = false;
  }

  /**
   * Save now if anything changed; resolves when saved (or refused). `leaving`: the page is
   * going away, so the request must outlive it.
   */
  flush({ leaving = false } = {}) {
    clearTimeout(this.timer);
    if (!this.dirty || this.conflict) return this.saving ?? Promise.resolve();
    if (this.saving && !leaving) return this.saving.then(() => this.flush());
    this.dirty = false;
    // Leaving during a save: its answer never comes back, so this one cannot name a base.
    const body = this.saving ? this.read() : { ...this.read(), base: this.base };
    const request = saveLayout(this.runId, this.name, body, { keepalive: leaving }).then((saved) => {
      this.base = saved.updated_at;
      this.onSaved(saved);
      if (!this.dirty) this.onStatus('Saved');
    }, (err) => {
      if (err.status === 409) {
        this.conflict = true;
        this.onStatus('Not saved: this dashboard was changed elsewhere. Reload to see it.');
        return;
      }
      this.dirty = true;
      this.failed = true;
      const why = err.body?.error ? `${err.body.field}: ${err.body.error}` : err.message;
      this.onStatus(`Not saved (${why}); the next change retries.`);
    }).finally(() => {
      if (this.saving === request) this.saving = null;
      if (this.dirty && !this.failed && !this.conflict) this.flush();
    });
    this.saving = request;
    return request;
  }
}

// ------------------------------------------------------------ templates

function csrf() {
  const part = document.cookie.split(';').map((p) => p.trim()).find((p) => p.startsWith('csrftoken='));
  return part ? decodeURIComponent(part.slice('csrftoken='.length)) : '';
}

async function call(url, method = 'GET', body = null) {
  const res = await fetch(url, { method, credentials: 'same-origin',
    headers: method === 'GET' ? {} : { 'Content-Type': 'application/json', 'X-CSRFToken': csrf() },
    body: body === null ? undefined : JSON.stringify(body) });
  const answer = await res.json().catch(() => null);
  if (!res.ok) {
    const err = new Error(answer?.error ?? `HTTP ${res.status}`);
    Object.assign(err, { status: res.status, body: answer });
    throw err;
  }
  return answer;
}

const templatesUrl = (runId, name = null) => `/api/runs/${encodeURIComponent(runId)}/templates${
  name === null ? '' : `?name=${encodeURIComponent(name)}`}`;

/** The project's templates, built-in first: [{name, builtin, version, sections, updated_at}]. */
export function listTemplates(runId) {
  return call(templatesUrl(runId)).then((b) => b.templates);
}

/** Save `layout` ({version, sections}) as template `name` (replacing one of that name). */
export function saveTemplate(runId, name, layout) {
  return call(templatesUrl(runId, name), 'PUT', layout).then((b) => b.templates);
}

export function deleteTemplate(runId, name) {
  return call(templatesUrl(runId, name), 'DELETE').then((b) => b.templates);
}

/** Store a new dashboard `name` holding `layout`; refused (409) when the name is taken. */
export function createDashboard(runId, name, layout) {
  return saveLayout(runId, name, { ...layout, base: null });
}

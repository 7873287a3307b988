// @ts-check
// The read API (docs/protocol.md "HTTP endpoints") and the page writes (run colour, Custom view
// layout; both CSRF-protected).

export class HttpError extends Error {
  constructor(status, body) {
    super(`HTTP ${status}${body?.error ? `: ${body.error}` : ''}`);
    this.status = status;
    this.body = body;
  }
}

async function getJSON(url, options = {}) {
  const res = await fetch(url, { credentials: 'same-origin', ...options });
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) throw new HttpError(res.status, body);
  return body;
}

function cookie(name) {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return '';
}

/** The runs (of one project); `headline`: a series id whose latest point each run carries. */
export function listRuns(project = null, { headline = null } = {}) {
  const params = new URLSearchParams();
  if (project) params.set('project', project);
  if (headline !== null) params.set('headline', headline);
  const q = params.toString();
  return getJSON(`/api/runs${q ? `?${q}` : ''}`).then((b) => b.runs);
}

export function getRun(id) {
  return getJSON(`/api/runs/${encodeURIComponent(id)}`);
}

/** Change any of {name, notes, color} of a run; resolves to the run's new info. */
export function patchRun(id, body) {
  return write(`/api/runs/${encodeURIComponent(id)}`, 'PATCH', body);
}

/** Remove a run and all its data. */
export function deleteRun(id) {
  return write(`/api/runs/${encodeURIComponent(id)}`, 'DELETE');
}

export function setRunColor(id, color) {
  return patchRun(id, { color });
}

function layoutUrl(runId, name) {
  return `/api/runs/${encodeURIComponent(runId)}/layout?name=${encodeURIComponent(name)}`;
}

function write(url, method, body = null, keepalive = false) {
  return getJSON(url, {
    method,
    keepalive,
    headers: { 'Content-Type': 'application/json', 'X-CSRFToken': cookie('csrftoken') },
    body: body === null ? undefined : JSON.stringify(body),
  });
}

/** Save a Custom view dashboard of the run's project; resolves to the stored layout. */
export function saveLayout(runId, name, layout, { keepalive = false } = {}) {
  return write(layoutUrl(runId, name), 'PUT', layout, keepalive);
}

export function renameLayout(runId, name, newName) {
  return write(layoutUrl(runId, name), 'PATCH', { name: newName });
}

export function deleteLayout(runId, name) {
  return write(layoutUrl(runId, name), 'DELETE');
}

export function getCatalog(runId) {
  return getJSON(`/api/runs/${encodeURIComponent(runId)}/catalog`);
}

/** Series of one run: {series: {id: payload}, seq, missing}. Ids are URL-encoded one by one. */
export function getSeries(runId, ids, { maxPoints = null, minStep = null, maxStep = null } = {}) {
  const q = [`ids=${ids.map(encodeURIComponent).join(',')}`];
  if (maxPoints !== null) q.push(`max_points=${maxPoints}`);
  if (minStep !== null) q.push(`min_step=${Math.floor(minStep)}`);
  if (maxStep !== null) q.push(`max_step=${Math.ceil(maxStep)}`);
  return getJSON(`/api/runs/${encodeURIComponent(runId)}/series?${q.join('&')}`);
}

/**
 * The distribution of a sample value over steps (docs/protocol.md): counts per (step bucket,
 * value bin). `kind` reward | sample | rollouts; `env` null for every environment.
 */
export function getDistribution(runId, { kind, key, env = null, bins = null, maxSteps = null }) {
  const q = [`kind=${encodeURIComponent(kind)}`, `key=${encodeURIComponent(key)}`];
  if (env !== null && env !== undefined && env !== '') q.push(`env=${encodeURIComponent(env)}`);
  if (bins !== null) q.push(`bins=${bins}`);
  if (maxSteps !== null) q.push(`max_steps=${maxSteps}`);
  return getJSON(`/api/runs/${encodeURIComponent(runId)}/distribution?${q.join('&')}`);
}

export const MAX_IDS_PER_REQUEST = 500;
export const MAX_POINTS_LIMIT = 20000;

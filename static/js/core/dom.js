// @ts-check
// DOM helpers. Text always goes in as text (textContent / attributes), never as HTML, so a
// metric or run name such as `<img src=x onerror=alert(1)>` is shown as it is.

/**
 * h('button', {class: 'x', onclick: fn, 'aria-label': 'Close'}, 'text', childNode)
 * Attributes starting with "on" are listeners; `dataset` is an object of data-* values;
 * strings among the children become text nodes.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const ICONS = {
  expand: 'M4 9V4h5M20 9V4h-5M4 15v5h5M20 15v5h-5',
  gear: 'M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-2.8 2.8l-.1-.1a1.7 1.7 0 0 0-1.8-.3 1.7 1.7 0 0 0-1 1.5V21a2 2 0 1 1-4 0v-.1a1.7 1.7 0 0 0-1.1-1.5 1.7 1.7 0 0 0-1.8.3l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1a1.7 1.7 0 0 0 .3-1.8 1.7 1.7 0 0 0-1.5-1H3a2 2 0 1 1 0-4h.1a1.7 1.7 0 0 0 1.5-1.1 1.7 1.7 0 0 0-.3-1.8l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 1.8.3H9a1.7 1.7 0 0 0 1-1.5V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 1 1.5 1.7 1.7 0 0 0 1.8-.3l.1-.1a2 2 0 1 1 2.8 2.8l-.1.1a1.7 1.7 0 0 0-.3 1.8V9a1.7 1.7 0 0 0 1.5 1H21a2 2 0 1 1 0 4h-.1a1.7 1.7 0 0 0-1.5 1z',
};

/** A small stroked SVG icon (decorative: the button carries the accessible name). */
export function icon(name) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '14');
  svg.setAttribute('height', '14');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICONS[name]);
  svg.append(path);
  return svg;
}

/** Copy text to the clipboard; falls back to selecting a hidden textarea. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h('textarea', { class: 'visually-hidden', readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand('copy');
    ta.remove();
    return ok;
  }
}

/** Trigger a download of a Blob or data URL under `filename`. */
export function download(data, filename) {
  const url = typeof data === 'string' ? data : URL.createObjectURL(data);
  const a = h('a', { href: url, download: filename, class: 'visually-hidden' });
  document.body.append(a);
  a.click();
  a.remove();
  if (typeof data !== 'string') setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Colours of the current theme (CSS custom properties), for Plotly. */
export function themeColors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  return { fg: v('--fg'), muted: v('--muted'), grid: v('--grid'), bg: v('--surface'),
    font: v('--font-sans') || 'system-ui, sans-serif' };
}

/**
 * A run's colour: the one the server stored for it (assigned at creation, distinct within its
 * project, changeable with PATCH). Ids say nothing about colours (they jump), so a run without
 * a stored colour (an older server) is drawn in a neutral grey rather than one guessed from it.
 */
export const NO_COLOR = '#7f7f7f';

export function runColor(run) {
  return /^#[0-9a-f]{6}$/i.test(run.color || '') ? run.color.toLowerCase() : NO_COLOR;
}

/** Copyable code block: a <pre> with a Copy button. */
export function snippet(text, label = 'Copy') {
  const btn = h('button', { type: 'button', class: 'copy' }, label);
  btn.addEventListener('click', async () => {
    btn.textContent = (await copyText(text)) ? 'Copied' : 'Copy failed';
    setTimeout(() => { btn.textContent = label; }, 1500);
  });
  return h('div', { class: 'snippet' }, h('pre', {}, h('code', {}, text)), btn);
}

/** The "send your first metrics" help shown when there is nothing to draw yet. */
export function firstMetricsHelp(project = 'myproject', run = 'my-run') {
  const origin = location.origin;
  const ws = origin.replace(/^http/, 'ws');
  const token = `telescope token ${project}`;
  const py = [
    'from trainer_hooks import connect',
    '',
    `client = connect("${ws}", TOKEN, run="${run}")`,
    'for step in range(100):',
    '    client.log_step(step, {"entropy": 1.0 / (step + 1), "loss/policy": 0.1})',
    'client.close()',
  ].join('\n');
  const curl = `curl -X POST ${origin}/api/ingest -H "Authorization: Bearer $TOKEN" \\\n  -d '{"v": 1, "id": "step-0", "type": "step", "run": "${run}", "step": 0, "metrics": {"entropy": 1.1}}'`;
  return h('div', { class: 'help' },
    h('p', {}, '1. Create an ingest token (shown once):'), snippet(token),
    h('p', {}, '2. Send metrics from your training job:'), snippet(py),
    h('p', {}, 'or from a shell:'), snippet(curl),
    h('p', { class: 'muted' }, 'Charts appear here as soon as the first step arrives; no reload needed.'));
}

/**
 * Load plotly.min.js (preloaded by the page) and run it; resolves to window.Plotly. It takes
 * seconds to evaluate on a cold cache, so pages draw quick sketches first where they can.
 */
export function loadPlotly(src) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  return new Promise((resolve, reject) => {
    const el = document.createElement('script');
    el.src = src;
    el.onload = () => resolve(window.Plotly);
    el.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.append(el);
  });
}

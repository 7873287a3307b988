// @ts-check
// Run colours within a project: which colours its other runs have, which of the server's
// palette are still free (a new run gets the first free one: ingest/write/runs.py PALETTE, the
// same list; tests/unit/test_run_palette.py keeps the two equal), and the words that warn
// when a recolour takes a colour another run already has. Pure, for the run list, the
// overview's housekeeping and the Metrics page's run bar alike.

import { h } from '../core/dom.js';

export const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#bab0ac', '#1f77b4', '#d62728', '#2ca02c', '#9467bd',
  '#17becf', '#bcbd22'];

const norm = (c) => String(c || '').toLowerCase();

/** {colour: [run names]} of the runs of `project` other than run `id`. */
export function colorsInUse(runs, project, id) {
  const used = new Map();
  for (const r of runs) {
    if (r.project !== project || r.id === id || !r.color) continue;
    const c = norm(r.color);
    if (!used.has(c)) used.set(c, []);
    used.get(c).push(r.name);
  }
  return used;
}

/** The palette's colours none of `used` (colorsInUse) has, in palette order. */
export function freeColors(used) {
  return PALETTE.filter((c) => !used.has(c));
}

/** The warning for choosing `color` (null when no other run of the project has it). */
export function clashText(color, used) {
  const names = used.get(norm(color));
  if (!names?.length) return null;
  const who = names.length === 1 ? `run ${names[0]}` : `runs ${names.slice(0, 3).join(', ')}${names.length > 3 ? '…' : ''}`;
  return `${who} of this project already ${names.length === 1 ? 'has' : 'have'} this colour`;
}

let lists = 0;

/**
 * Offer the free colours on a colour input: a <datalist> (Chromium shows it as the picker's
 * suggestions), refilled by `offer(used)`. Returns {list, offer}; the list goes into the page.
 */
export function colorChoices(input) {
  const list = h('datalist', { id: `free-colors-${++lists}` });
  input.setAttribute('list', list.id);
  const offer = (used) => {
    const free = freeColors(used);
    list.replaceChildren(...(free.length ? free : PALETTE).map((c) => h('option', { value: c })));
    return free;
  };
  offer(new Map());
  return { list, offer };
}

/**
 * Check a colour about to be saved for run `run` against the other runs of its project
 * (`runs`, as listed). Free: `save(color)` at once. Taken: a warning (role alert) goes into
 * `slot`, naming the runs that have it, with a button for the first free palette colour and
 * one to keep the chosen colour anyway; `revert()` runs when the warning is dismissed
 * otherwise. Returns the promise of the save (or of the choice).
 */
export function guardColor({ color, run, runs, slot, save, revert = () => {} }) {
  const used = colorsInUse(runs, run.project, run.id);
  const clash = clashText(color, used);
  slot.replaceChildren();
  slot.hidden = true;
  if (!clash) return Promise.resolve(save(color));
  const free = freeColors(used)[0] ?? null;
  return new Promise((resolve) => {
    const done = (value) => {
      slot.replaceChildren();
      slot.hidden = true;
      resolve(value);
    };
    const pick = free && h('button', { type: 'button', class: 'color-free', dataset: { color: free },
      onclick: () => done(save(free)) },
    h('span', { class: 'swatch-dot', style: `background:${free}`, 'aria-hidden': 'true' }), `Use ${free} (free)`);
    const keep = h('button', { type: 'button', onclick: () => done(save(color)) }, 'Keep it anyway');
    const cancel = h('button', { type: 'button', class: 'tool', 'aria-label': 'Cancel the colour change', title: 'Cancel',
      onclick: () => { revert(); done(null); } }, '\u00d7');
    slot.replaceChildren(h('span', { class: 'color-clash-text' }, `${clash[0].toUpperCase()}${clash.slice(1)}.`), pick, keep, cancel);
    slot.hidden = false;
  });
}

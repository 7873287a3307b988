// @ts-check
// The sample viewer (/runs/<id>/samples?step=S): one step's samples in groups, each
// sample's reward and sample metrics coloured red → green by its environment's range (declared,
// else observed; `invert` reverses it), with advantage, tokens, stop and discard reasons. A
// sample opens to its prompt and completion (plain text, monospace; the search's matches marked),
// a group shows its best and worst samples side by side, keys move between samples and steps, and
// a running run's newest step arrives without a reload (/ws/live/). Text is only fetched once it
// is needed (open, search, compare).
//
// Entry point of templates/samples.html: the parts are samples/pure.js (the pure rules, node
// tests), samples/cards.js (a group and its samples) and samples/viewer.js (the page).

import { Viewer } from './samples/viewer.js';

const root = typeof document !== 'undefined' ? document.getElementById('samples') : null;
if (root) {
  const initial = JSON.parse(document.getElementById('samples-initial').textContent);
  const info = JSON.parse(document.getElementById('run-info').textContent);
  window.telescopeSamples = new Viewer(root, initial, info);
}

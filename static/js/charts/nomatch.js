// @ts-check
// What the Metrics page says when its metric search matches no chart (instead of a blank
// page): "No chart matches ‘x’" and a button that clears the search. The page calls
// `showNoMatch(page, count)` after each filtering (metrics.js applyFilter); the message sits
// before the charts and is removed once something matches again.

import { h } from '../core/dom.js';

const BOXES = new WeakMap(); // page -> its message element

/** The message's words for a search `query`. */
export function noMatchText(query) {
  return `No chart matches \u2018${query}\u2019`;
}

/**
 * Show or hide the message for a page whose search left `count` charts visible. `page`
 * supplies settings.search, view.hasEntries(), controls.inputs.search and controls.read.
 */
export function showNoMatch(page, count) {
  const query = String(page.settings?.search ?? '').trim();
  const none = Boolean(query) && count === 0 && page.view?.hasEntries?.();
  let box = BOXES.get(page);
  if (!none) {
    if (box) box.hidden = true;
    return;
  }
  if (!box) {
    const search = page.controls.inputs.search;
    box = h('div', { class: 'empty no-match', role: 'status', dataset: { noMatch: '' } },
      h('h2', {}, ''),
      h('p', {}, 'The search looks in chart titles and metric names (and with \u201cregex\u201d, as a regular expression).'),
      h('button', { type: 'button', class: 'primary', onclick: () => {
        search.value = '';
        page.controls.read('search');
        search.focus();
      } }, 'Clear the search'));
    const sections = document.getElementById('sections');
    sections?.before(box);
    BOXES.set(page, box);
  }
  box.querySelector('h2').textContent = noMatchText(query);
  box.hidden = false;
}

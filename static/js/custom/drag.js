// @ts-check
// Drag and drop of the Custom view on SortableJS (1.15.7, package.json; served with the static
// files): every list of the board (sections; a section's plots and groups; a group's plots) and
// of the metric list is a Sortable. SortableJS moves elements while the pointer moves; on the
// drop, `onDrop(what, container, index)` says what happened and the board re-renders from the
// edited layout, so the layout, not the DOM, is the truth. Pointer events (its fallback mode)
// for mouse, pen and touch alike (on touch, hold a moment to drag; a swipe scrolls); a drop
// lands before the element under the pointer when the pointer is on its first half, after it
// on its second half (`invertSwap`).

import Sortable from '../../vendor/sortablejs/sortable.esm.js';

/** Sortable groups: sections among themselves; plots, groups and metrics among the rest. */
export const SECTIONS = 'sections';
export const PLOTS = 'plots';

/** What moves in any list: sections, groups, plots, and metrics and groups of the metric list. */
export const ITEMS = '.dash-section, .dash-group, .chart, .palette-item, .palette-group';
const reducedMotion = () => matchMedia('(prefers-reduced-motion: reduce)').matches;
const waiting = []; // what must not rebuild lists in the middle of a drag

/** Run `fn` now, or once the drag under way has ended (and its drop has been handled). */
export function whenIdle(fn) {
  if (Sortable.active || Sortable.dragged) waiting.push(fn);
  else fn();
}

function idle() {
  setTimeout(() => {
    for (const fn of waiting.splice(0)) fn();
  }, 0);
}

/** A dragged element says what it is in `data-drag`: section, group, plot, metric, metrics. */
export const dragKind = (el) => el?.dataset?.drag ?? '';

/** What a dragged element is, for the layout: {node}, {metric, section} or {group: key}. */
export function dragged(el) {
  const d = el.dataset;
  if (d.nodeId) return { node: d.nodeId };
  if (d.metricId) return { metric: d.metricId, section: d.section };
  return { group: d.groupKey, section: d.section };
}

/**
 * Make `el` a Sortable list. `onDrop(el, container, index)`: an element was dropped at
 * `index` of the list whose `data-container` is `container` (the DOM is put back by the
 * caller's re-render; a list item dragged out as a copy is back in its list already).
 */
export function sortable(el, options, onDrop) {
  return Sortable.create(el, {
    animation: reducedMotion() ? 0 : 150,
    forceFallback: true,
    fallbackOnBody: true,
    fallbackTolerance: 4,
    delay: 150, // on touch only: a press that lingers drags, a quick swipe scrolls
    delayOnTouchOnly: true,
    invertSwap: true,
    emptyInsertThreshold: 20,
    filter: 'input, select, textarea, .chart-settings, .plot-form, .title-edit',
    preventOnFilter: false,
    ghostClass: 'drop-ghost',
    chosenClass: 'drag-chosen',
    fallbackClass: 'drag-fallback',
    direction: (evt, target) => direction(el, target),
    onUnchoose: idle,
    onEnd: (evt) => {
      // Counted here: SortableJS counts by the source list's `draggable`, which another list's
      // elements need not match.
      const index = [...evt.to.children].filter((c) => c.matches(ITEMS)).indexOf(evt.item);
      if (evt.pullMode === 'clone') evt.clone.replaceWith(evt.item); // the list keeps its item
      if (evt.from === evt.to && evt.oldDraggableIndex === index) return;
      onDrop(evt.item, evt.to.dataset.container, index);
    },
    ...options,
  });
}

/**
 * Which way a list runs at `target`: a grid of several columns runs across, except past an
 * element that fills its row (a group, a wide plot), which is before or after by its halves.
 */
function direction(list, target) {
  if (target?.classList?.contains('dash-group') || target?.classList?.contains('wide')) return 'vertical';
  const css = getComputedStyle(list);
  return css.display === 'grid' && css.gridTemplateColumns.split(' ').length > 1 ? 'horizontal' : 'vertical';
}

/** Whether a group's list takes element `el`: anything but a group (groups do not nest). */
export const notGroup = (to, from, el) => dragKind(el) !== 'group';

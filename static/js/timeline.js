// @ts-check
// The Timeline page (/runs/<id>/timeline?start=&end=): a Gantt of a window of the run's
// events, one row per lane (inference servers and slots, trainer ranks, the orchestrator and
// other sources), drawn with WebGL; zoom and pan fetch the window and keep it in the URL; a
// click shows a span and links its sample; "Export trace" downloads the window as a Chrome
// trace; a running run's new events arrive without a reload.
//
// Entry point of templates/timeline.html: the parts are in timeline/ (window: the URL state;
// lanes: the rows; segments: spans into traces; pick: the span under the pointer; gantt: the
// figure; details: a span's fields; follow: live updates; page: the page).

import { TimelinePage } from './timeline/page.js';

const root = typeof document !== 'undefined' ? document.getElementById('timeline') : null;
if (root) {
  /** @type {any} */ (window).telescopeTimeline = new TimelinePage(root);
}

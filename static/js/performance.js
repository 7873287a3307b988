// @ts-check
// The Performance page (/runs/<id>/performance?bucket=B): time buckets of the run's events
// (inference utilization, weight sync, trainer working and idle, generations, tokens per
// second; the newest, still filling bucket marked) and its gauges (system metrics) per host
// and device, live for a running run.
//
// Entry point of templates/performance.html: the parts are timeline/perf.js (the pure rules)
// and timeline/perfpage.js (the page), with timeline/api.js and timeline/follow.js.

import { PerformancePage } from './timeline/perfpage.js';

const root = typeof document !== 'undefined' ? document.getElementById('performance') : null;
if (root) {
  /** @type {any} */ (window).telescopePerformance = new PerformancePage(root);
}

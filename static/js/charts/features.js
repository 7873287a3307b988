// @ts-check
// The chart add-ons of the Metrics page, registered in one place (see charts/addons.js).

import './heatmap.js';
import './health.js';
import './samplelink.js';

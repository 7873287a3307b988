// The chart add-ons of the Metrics page, registered in one place (see addons.js).

import './heatmap.js';
import './health.js';
import './samplelink.js';

// The distribution heatmap of a reward, sample-metric or completion-length chart (issue 10,
// item 4). Registers its chart add-on (addons.js).

// @ts-check
// Chart add-ons: features that attach to every chart card without the card knowing them (the
// distribution heatmap, health hints). An add-on is {tools(chart) → Element | null, drawn(chart,
// fig)}; each registers itself once (see charts/features.js, imported by the Metrics page). Cards ask
// here for their extra header tools when built and report every draw.

const ADDONS = [];

/** Register an add-on: `tools` adds header buttons to a card, `drawn` follows its draws. */
export function registerAddon(addon) {
  ADDONS.push(addon);
}

/** The header tools the add-ons give this chart card. */
export function addonTools(chart) {
  return ADDONS.map((a) => (a.tools ? a.tools(chart) : null)).filter(Boolean);
}

/** Tell the add-ons a card drew `fig` (its prepared traces and layout). */
export function addonDrawn(chart, fig) {
  for (const a of ADDONS) if (a.drawn) a.drawn(chart, fig);
}

// Globals of the front end, for tsc (tsconfig.json): what the vendor scripts and the pages put
// on `window`. Only declarations; nothing here is served.

/** A Plotly figure's parts: plain objects Plotly reads (https://plotly.com/javascript/reference/),
 * built by charts/traces.js and the figure builders. Open records: Plotly has hundreds of keys. */
type PlotlyTrace = Record<string, any>;
type PlotlyLayout = Record<string, any>;
type PlotlyConfig = Record<string, any>;
/** The plot element once Plotly drew into it (Plotly keeps its state on the element). */
type PlotlyElement = HTMLElement & { _fullLayout?: PlotlyLayout; data?: PlotlyTrace[];
  on?(event: string, handler: (data: any) => void): void };

/** The calls the charts make of plotly.min.js (vendor/plotly: a classic script, loaded on
 * demand by core/dom.js loadPlotly, so it is `window.Plotly`, undefined until then). */
interface PlotlyStatic {
  newPlot(el: HTMLElement, data: PlotlyTrace[], layout?: PlotlyLayout, config?: PlotlyConfig): Promise<PlotlyElement>;
  react(el: HTMLElement, data: PlotlyTrace[], layout?: PlotlyLayout, config?: PlotlyConfig): Promise<PlotlyElement>;
  restyle(el: HTMLElement, update: Record<string, unknown>, traces?: number | number[]): Promise<PlotlyElement>;
  purge(el: HTMLElement): void;
  toImage(figure: { data: PlotlyTrace[]; layout: PlotlyLayout },
          options: { format: 'png' | 'svg' | 'jpeg'; width: number; height: number }): Promise<string>;
  Plots: { resize(el: HTMLElement): Promise<void> };
  Fx: { hover(el: HTMLElement, point: Record<string, unknown>, subplot?: string): void;
        unhover(el: HTMLElement): void };
}

interface Window {
  Plotly?: PlotlyStatic;
  /** The Metrics page's state (metrics.js), for tests, benchmarks and the curious. */
  telescope?: unknown;
  /** The sample viewer (samples.js), likewise. */
  telescopeSamples?: unknown;
}

/** A chart card: charts/chart.js puts its Chart on its element, for the cursor and add-ons. */
type ChartElement = HTMLElement & { chart?: import('../static/js/charts/chart.js').Chart };

// @ts-check
// One plot of the Custom view: a chart card (charts/chart.js: settings, fullscreen, CSV, PNG, zoom,
// the run legend) drawing every series of a layout plot (custom/figure.js), under the plot's
// title, with a list of its series (colour, axis side, remove) when it has several, and a form
// to add one. Its settings are the plot's, kept in the layout (the entry it is built from
// carries `plotId`, so the view's prefs find them).

import { getSeries, MAX_POINTS_LIMIT } from '../core/api.js';
import { Chart } from '../charts/chart.js';
import { buildPlotFigure, seriesColor, seriesDash } from './figure.js';
import { plotTitle, seriesName } from './tree.js';
import { download, h } from '../core/dom.js';
import { LIMITS, parseId } from './layout.js';
import { normalizes } from '../charts/normalized.js';
import { safeFilename, toCSV } from '../core/text.js';

const AXIS_NEXT = { auto: 'left', left: 'right', right: 'auto' };

export class Plot extends Chart {
  /**
   * `node`: the layout's plot; `entries`: catalog entries by series id (every run shown);
   * `actions`: {setAxis(sid, axis), removeSeries(sid), addSeries(sid, axis), options()}.
   */
  constructor(node, entries, page, actions) {
    const first = node.series.map((s) => entries.get(s.id)).find(Boolean);
    super({ ...first, plotId: node.id }, page);
    this.entries = entries;
    this.actions = actions;
    this.seriesList = h('ul', { class: 'plot-series', dataset: { plotSeries: '' } });
    this.el.querySelector('.chart-head').after(this.seriesList);
    this.setNode(node);
  }

  /** The layout's plot changed (title, series, axes): follow it. */
  setNode(node) {
    const sig = JSON.stringify(node.series);
    this.node = node;
    nameCard(this.el, node);
    if (sig !== this.seriesSig) {
      this.seriesSig = sig;
      this.renderSeries();
      this.invalidate();
    }
  }

  /** Catalog entries arrived: a series may be drawable now. */
  refresh() {
    this.listSig = null;
    this.renderSeries();
    this.invalidate();
  }

  /** The plot's series as drawn: those some run shown has, state strips only alone. */
  drawn() {
    const known = this.node.series.map((s) => ({ ...s, entry: this.entries.get(s.id) })).filter((s) => s.entry);
    return this.categorical ? known.slice(0, 1) : known.filter((s) => !s.entry.categorical);
  }

  /** The series one run draws for `entry`: raw or normalized, and its ± std band (a plot of
   * one series only: several bands would hide each other). */
  lineIds(store, entry) {
    const band = this.settings.band && this.drawn().length === 1 ? this.page.stdIdFor(entry) : null;
    if (!(this.page.settings.normalize && normalizes(entry))) return { main: entry.id, std: band };
    return { main: store.twinOf(entry), std: band ? store.twinOf(entry, 'std') : null };
  }

  ids(store) {
    if (this.categorical) return super.ids(store);
    return this.drawn().flatMap((s) => Object.values(this.lineIds(store, s.entry)).filter(Boolean));
  }

  /** Every raw series id this plot draws (for the view's index of live updates). */
  rawIds() {
    return this.drawn().flatMap((s) => [s.id, this.page.stdIdFor(s.entry)]).filter(Boolean);
  }

  figure() {
    if (this.categorical) return super.figure();
    const drawn = this.drawn();
    const runs = this.page.runs.map((store) => ({
      id: store.id, name: store.info.name, color: store.color, t0: store.t0, firstStep: store.firstStep,
      lines: drawn.map((s) => {
        const { main, std } = this.lineIds(store, s.entry);
        return { data: main ? this.dataFor(store, main) : null, std: std ? this.dataFor(store, std) : null,
          range: main ? store.series.get(main)?.range ?? null : null };
      }),
    }));
    const fig = buildPlotFigure({ series: drawn.map((s) => ({ ...s, name: seriesName(s.id) })), runs,
      chart: this.settings, page: this.page.settings, theme: this.page.theme(), zoom: this.zoom,
      normalized: this.normalized() });
    this.sides = new Map(drawn.map((s, i) => [s.id, fig.sides[i]]));
    return fig;
  }

  draw() {
    super.draw();
    this.renderSeries();
    this.placeTools(); // the series list may have changed height
  }

  // ------------------------------------------------------------ series list and form

  /** Colour (or dash), name, axis side and remove of each series; shown for two or more. */
  renderSeries() {
    const series = this.node.series;
    const drawn = this.drawn().map((s) => s.id);
    const many = this.page.runs.length > 1;
    const sig = JSON.stringify([series, drawn, many, [...(this.sides ?? [])], this.page.runs[0]?.color]);
    if (sig === this.listSig) return;
    this.listSig = sig;
    const chips = seriesChips(series, drawn);
    this.seriesList.hidden = chips.length < 2;
    this.seriesList.setAttribute('aria-label', `Series of ${plotTitle(this.node)}`);
    this.seriesList.replaceChildren(...chips.map(({ series: s, name, tip }) => {
      const i = drawn.indexOf(s.id);
      const side = this.sides?.get(s.id);
      const key = i < 0 ? null : many
        ? h('span', { class: `series-dash dash-${seriesDash(i)}`, 'aria-hidden': 'true' })
        : h('span', { class: 'series-swatch', style: `background:${seriesColor(i, this.page.runs[0]?.color)}`, 'aria-hidden': 'true' });
      const axisText = s.axis === 'auto' ? `auto${side ? ` (${side})` : ''}` : s.axis;
      const axis = drawn.length > 1 && i >= 0 ? h('button', { type: 'button', class: 'tool axis',
        title: 'y axis: auto, left or right', 'aria-label': `Axis of ${name}: ${axisText}`,
        onclick: () => this.actions.setAxis(s.id, AXIS_NEXT[s.axis]) },
      s.axis === 'auto' ? `${side === 'right' ? 'R' : 'L'} auto` : s.axis === 'left' ? 'L' : 'R') : null;
      return h('li', { class: i < 0 ? 'missing' : null, dataset: { series: s.id, axis: s.axis, side: side ?? '' } },
        key, h('span', { class: 'series-name', title: tip }, name), axis,
        h('button', { type: 'button', class: 'tool', title: 'Remove from the plot',
          'aria-label': `Remove ${name} from the plot`, onclick: () => this.actions.removeSeries(s.id) }, '×'));
    }));
  }

  /** The form that adds a series (any metric of the runs shown) to this plot. */
  toggleSeriesForm() {
    if (this.seriesForm) {
      this.seriesForm.remove();
      this.seriesForm = null;
      this.placeTools();
      return;
    }
    const select = h('select', { name: 'series', 'aria-label': `Series to add to ${plotTitle(this.node)}` },
      ...this.actions.options().map((sec) => h('optgroup', { label: sec.title },
        ...sec.options.map((o) => h('option', { value: o.id }, o.text)))));
    const axis = h('select', { name: 'axis', 'aria-label': 'y axis' },
      ...['auto', 'left', 'right'].map((a) => h('option', { value: a }, `${a} axis`)));
    const full = this.node.series.length >= LIMITS.series;
    this.seriesForm = h('form', { class: 'plot-form' }, select, axis,
      h('button', { type: 'submit', disabled: full }, 'Add'),
      h('button', { type: 'button', onclick: () => this.toggleSeriesForm() }, 'Close'),
      full ? h('span', { class: 'muted' }, ` at most ${LIMITS.series} series`) : null);
    this.seriesForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.actions.addSeries(select.value, axis.value);
      select.focus();
    });
    this.seriesForm.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') this.toggleSeriesForm();
    });
    this.seriesList.after(this.seriesForm);
    this.placeTools();
    select.focus();
  }

  // ------------------------------------------------------------ export

  /** Every series the plot draws, for every run: one row per point. */
  async exportCSV() {
    if (this.categorical) return super.exportCSV();
    const rows = [];
    for (const store of this.page.runs) {
      const ids = this.drawn().map((s) => [s.id, this.lineIds(store, s.entry).main]).filter(([, sid]) => sid);
      if (!ids.length) continue;
      const body = await getSeries(store.id, ids.map(([, sid]) => sid), { maxPoints: MAX_POINTS_LIMIT });
      for (const [raw, sid] of ids) {
        const s = body.series[sid];
        if (s) for (let i = 0; i < s.step.length; i++) rows.push([store.info.name, raw, s.step[i], s.time[i], s.value[i]]);
      }
    }
    const csv = toCSV(['run', 'series', 'step', 'time', 'value'], rows);
    download(new Blob([csv], { type: 'text/csv' }), safeFilename(plotTitle(this.node), 'csv'));
  }
}

/** The card of a plot no run shown has a series of (yet). */
export function placeholder() {
  return h('article', { class: 'chart missing' }, h('header', { class: 'chart-head' },
    h('h4', { class: 'chart-title' }), h('div', { class: 'chart-tools' }),
    h('span', { class: 'tools-fold', 'aria-hidden': 'true' }, '\u22ef')),
  h('p', { class: 'chart-note' }, 'Not in the runs shown (yet).'));
}

/** A plot card's title: the plot's, its series' ids in the tooltip. */
export function nameCard(card, node) {
  const title = card.querySelector('.chart-title');
  title.textContent = plotTitle(node);
  title.title = node.series.map((s) => s.id).join('\n');
}

/** A series id's metric in words for a tooltip: its key (and statistic, environment). */
function seriesKey(sid) {
  const [kind, key, stat, env] = parseId(sid);
  const stated = stat && stat !== key && kind !== 'step' ? `${key} ${stat}` : key || sid;
  return env ? `${stated} [${env}]` : stated;
}

/**
 * The series list's chips of a plot, one per name: a template lists the keys trainers log a
 * figure under (`entropy`, `train/entropy`), which share the registry's title; a key the runs
 * do not log is left out when a key of the same name is drawn, and keys of one name that are
 * all missing make one chip. Two drawn series of one name are told apart by their keys.
 * Tooltips say in words what a chip draws or that the runs shown do not log it.
 */
export function seriesChips(series, drawn) {
  const named = new Map(); // name -> [series]
  for (const s of series) {
    const name = seriesName(s.id);
    if (!named.has(name)) named.set(name, []);
    named.get(name).push(s);
  }
  const chips = [];
  for (const [name, all] of named) {
    const present = all.filter((s) => drawn.includes(s.id));
    if (!present.length) {
      const keys = all.map((s) => seriesKey(s.id)).join(', ');
      chips.push({ series: all[0], name, tip: `${name} (${keys}): not logged by the runs shown` });
      continue;
    }
    for (const s of present) {
      const key = seriesKey(s.id);
      chips.push({ series: s, name: present.length > 1 ? `${name} (${key})` : name, tip: key });
    }
  }
  return chips;
}

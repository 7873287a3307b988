// @ts-check
// The Custom view's board: the dashboard's sections (collapsible), their groups and plots, put
// on the page from the layout and kept in its order. Everything moves by drag and drop
// (custom/drag.js: within and across lists; metrics and groups of the metric list drop in as
// new plots) and by keyboard (each node's move buttons step it through the page order,
// custom_ops.shiftNode). Each node has its tools: rename, collapse, wide, add a group or a
// series, remove. Edits go through `view.edit`, which saves them and calls render().

import { notGroup, PLOTS, SECTIONS, sortable } from './drag.js';
import {
  dropInto, findNode, insertNode, listOf, newGroup, newSection, NEW_SECTION, removeNode, ROOT, shiftNode, updateNode,
} from './ops.js';
import { plotTitle } from './tree.js';
import { h } from '../core/dom.js';

const TOOLS = {
  section: [['Rename', '✎'], ['Add group', '+'], ['Move earlier', '↑'], ['Move later', '↓'], ['Remove', '×']],
  group: [['Rename', '✎'], ['Move earlier', '↑'], ['Move later', '↓'], ['Remove', '×']],
  plot: [['Add series', '+'], ['Rename', '✎'], ['Move earlier', '←'], ['Move later', '→'], ['Toggle wide', '⇔'], ['Remove', '×']],
};

const nameOf = (node) => (node.type === 'plot' ? plotTitle(node) : node.title || (node.type ? 'Untitled group' : 'Untitled section'));

export class Board {
  /** `view`: {layout, edit(fn), cardFor(plot), plotOf(id), dropped(el) → what, focusList()}. */
  constructor(view) {
    this.view = view;
    this.nodes = new Map(); // section or group id -> {el, body, title, count, tools, sortable}
    this.cards = new Map(); // plot id -> its decorated card
    const drop = (el, cid, index) => this.drop(el, cid, index);
    this.el = h('div', { class: 'board', 'aria-label': 'Dashboard sections', dataset: { container: ROOT } });
    sortable(this.el, { group: SECTIONS, handle: '.section-handle', draggable: '.dash-section' }, drop);
    this.hint = h('p', { class: 'board-hint muted' }, 'This dashboard is empty. Drag metrics here from the list, ',
      'press Add, or start a new dashboard from a template (New…).');
    this.newSection = h('div', { class: 'new-section-drop', dataset: { container: NEW_SECTION },
      title: 'Drop a plot, group or metric here for a new section' });
    sortable(this.newSection, { group: { name: PLOTS, pull: false, put: true }, sort: false }, drop);
    this.addSection = h('button', { type: 'button', class: 'add-section', onclick: () => this.addNewSection() }, '+ Section');
    this.wrap = h('div', { class: 'board-body' }, this.hint, this.el, this.newSection, this.addSection);
  }

  /** Make the page follow the layout: create, update, order, drop what left it. */
  render(layout) {
    const focused = /** @type {HTMLElement | null} */ (document.activeElement);
    const alive = new Set();
    const plotEl = (p) => {
      alive.add(p.id);
      return this.card(p);
    };
    const sections = layout.sections.map((s) => {
      const rec = this.container(s, 'section');
      alive.add(s.id);
      sync(rec.body, s.items.map((it) => {
        if (it.type !== 'group') return plotEl(it);
        const g = this.container(it, 'group');
        alive.add(it.id);
        sync(g.body, it.plots.map(plotEl));
        return g.el;
      }));
      return rec.el;
    });
    sync(this.el, sections);
    for (const [id, rec] of this.nodes) if (!alive.has(id)) this.forget(id, rec);
    for (const id of this.cards.keys()) if (!alive.has(id)) this.cards.delete(id);
    this.hint.hidden = layout.sections.length > 0;
    if (focused && focused !== document.activeElement && focused.isConnected) focused.focus();
  }

  /** A section's or group's element (made once), brought up to date with `node`. */
  container(node, kind) {
    let rec = this.nodes.get(node.id);
    if (!rec) rec = this.make(node, kind);
    rec.title.textContent = nameOf(node);
    rec.title.classList.toggle('untitled', !node.title);
    const plots = kind === 'group' ? node.plots.length
      : node.items.reduce((n, it) => n + (it.type === 'group' ? it.plots.length : 1), 0);
    rec.count.textContent = String(plots);
    if (kind === 'section') {
      rec.toggle.setAttribute('aria-expanded', String(!node.collapsed));
      rec.body.hidden = node.collapsed;
    }
    label(rec.tools, nameOf(node));
    return rec;
  }

  make(node, kind) {
    const id = node.id;
    const title = h('span', { class: kind === 'section' ? 'section-title' : 'group-title' });
    const count = h('span', { class: 'count' });
    const body = h('div', { class: 'dash-body grid', id: `body-${id}`, dataset: { container: id } });
    const tools = this.tools(id, kind);
    const drop = (el, cid, index) => this.drop(el, cid, index);
    let rec;
    if (kind === 'section') {
      const toggle = h('button', { type: 'button', class: 'section-toggle', 'aria-controls': body.id,
        onclick: () => this.view.edit((l) => updateNode(l, id, { collapsed: !findNode(l, id).node.collapsed })) },
      h('span', { class: 'caret', 'aria-hidden': 'true' }), title, count);
      const el = h('section', { class: 'dash-section', dataset: { nodeId: id, drag: 'section' } },
        h('header', { class: 'dash-section-head' },
          h('span', { class: 'section-handle', title: 'Drag to move the section', 'aria-hidden': 'true' }, '⠿'),
          h('h2', {}, toggle), h('div', { class: 'node-tools' }, ...tools.values())), body);
      rec = { el, body, title, count, tools, toggle,
        sortable: sortable(body, { group: PLOTS, handle: '.drag-handle', draggable: '.chart, .dash-group' }, drop) };
    } else {
      const el = h('div', { class: 'dash-group', dataset: { nodeId: id, drag: 'group' } },
        h('header', { class: 'dash-group-head drag-handle' }, h('h3', {}, title), count,
          h('div', { class: 'node-tools' }, ...tools.values())), body);
      rec = { el, body, title, count, tools,
        sortable: sortable(body, { group: { name: PLOTS, put: notGroup }, handle: '.drag-handle', draggable: '.chart' }, drop) };
    }
    this.nodes.set(id, rec);
    return rec;
  }

  forget(id, rec) {
    rec.sortable.destroy();
    this.nodes.delete(id);
  }

  /** A plot's card (the view's), with the board's tools and its header as the drag handle. */
  card(node) {
    const card = this.view.cardFor(node);
    let rec = this.cards.get(node.id);
    if (rec?.card !== card) {
      rec = { card, tools: this.tools(node.id, 'plot') };
      card.dataset.nodeId = node.id;
      card.dataset.drag = 'plot';
      card.querySelector('.chart-tools').append(...rec.tools.values());
      card.querySelector('.chart-head').classList.add('drag-handle');
      this.cards.set(node.id, rec);
    }
    card.classList.toggle('wide', node.wide);
    label(rec.tools, nameOf(node));
    return card;
  }

  tools(id, kind) {
    return new Map(TOOLS[kind].map(([name, text]) => [name, h('button', { type: 'button', class: 'tool',
      title: name, dataset: { tool: name }, onclick: () => this.act(id, name) }, text)]));
  }

  /** A node's tool was used (button: mouse or keyboard). */
  act(id, name) {
    const edit = (fn) => this.view.edit(fn);
    if (name === 'Move earlier' || name === 'Move later') {
      edit((l) => shiftNode(l, id, name === 'Move later' ? 1 : -1));
      this.focusTool(id, name);
    } else if (name === 'Toggle wide') {
      edit((l) => updateNode(l, id, { wide: !findNode(l, id).node.wide }));
    } else if (name === 'Add group') {
      edit((l) => insertNode(l, id, findNode(l, id).node.items.length, newGroup(l, 'New group', [])));
    } else if (name === 'Add series') {
      this.view.plotOf(id)?.toggleSeriesForm();
    } else if (name === 'Rename') {
      this.rename(id);
    } else if (name === 'Remove') {
      this.remove(id);
    }
  }

  focusTool(id, name) {
    const tool = (this.nodes.get(id) ?? this.cards.get(id))?.tools.get(name);
    tool?.focus();
  }

  /** Remove a node (asking first when a section or group holds plots); the focus moves on. */
  remove(id) {
    const at = findNode(this.view.layout, id);
    if (!at) return;
    const holds = at.node.type === 'plot' ? 0 : (at.node.plots ?? at.node.items).length;
    if (holds && !confirm(`Remove “${nameOf(at.node)}” and everything in it?`)) return;
    this.view.edit((l) => removeNode(l, id));
    const siblings = listOf(this.view.layout, at.container) ?? [];
    const next = siblings[Math.min(at.index, siblings.length - 1)];
    if (next) this.focusTool(next.id, next.type === 'plot' ? 'Move earlier' : 'Rename');
    else if (at.container !== ROOT) this.focusTool(at.container, 'Rename');
    else this.view.focusList();
  }

  /** Edit a node's title in place: Enter or leaving the field keeps it, Escape does not. */
  rename(id) {
    const node = findNode(this.view.layout, id)?.node;
    const anchor = node && (this.nodes.get(id)?.title.closest('h2, h3') ?? this.cards.get(id)?.card.querySelector('.chart-title'));
    if (!anchor || anchor.hidden) return;
    const input = h('input', { type: 'text', name: 'title', value: node.title, maxlength: '200',
      placeholder: nameOf({ ...node, title: '' }), 'aria-label': `Title of ${nameOf(node)}` });
    const form = h('form', { class: 'title-edit' }, input);
    let done = false;
    const finish = (keep) => {
      if (done) return;
      done = true;
      form.remove();
      anchor.hidden = false;
      if (keep) this.view.edit((l) => updateNode(l, id, { title: input.value }));
      this.focusTool(id, 'Rename');
    };
    form.addEventListener('submit', (ev) => { ev.preventDefault(); finish(true); });
    input.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') finish(false); });
    input.addEventListener('blur', () => finish(true));
    anchor.hidden = true;
    anchor.after(form);
    input.focus();
    input.select();
  }

  addNewSection() {
    /** @type {{id: string} | null} */
    let made = null;
    this.view.edit((l) => {
      made = newSection(l, `Section ${l.sections.length + 1}`);
      return insertNode(l, ROOT, l.sections.length, made);
    });
    if (made && this.nodes.has(made.id)) this.rename(made.id);
  }

  /** Something was dropped at `index` of container `cid`: the layout follows. */
  drop(el, cid, index) {
    const what = this.view.dropped(el);
    if (what) this.view.edit((l) => dropInto(l, what, cid, index), { always: true });
  }
}

/** Put `els` in `parent` in this order, touching the DOM only when it differs. */
function sync(parent, els) {
  const kids = parent.children;
  if (kids.length === els.length && els.every((el, i) => kids[i] === el)) return;
  parent.replaceChildren(...els);
}

function label(tools, name) {
  for (const [tool, btn] of tools) btn.setAttribute('aria-label', `${tool} ${name}`);
}

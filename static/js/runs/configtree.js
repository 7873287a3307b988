// @ts-check
// A run's config as a searchable tree: nested keys fold, a search keeps the leaves
// whose path or value holds the text (and their parents) and marks the match. Pure parts in
// core/config.js; text always goes in as text.

import { filterConfig } from '../core/config.js';
import { h } from '../core/dom.js';

/** `text` with every case-insensitive occurrence of `query` in a <mark>. */
export function highlighted(text, query) {
  const q = query.trim().toLowerCase();
  if (!q) return [text];
  const out = [];
  const lower = text.toLowerCase();
  let at = 0;
  for (let i = lower.indexOf(q); i !== -1; i = lower.indexOf(q, at)) {
    if (i > at) out.push(text.slice(at, i));
    out.push(h('mark', {}, text.slice(i, i + q.length)));
    at = i + q.length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

export class ConfigTree {
  constructor(root, config) {
    this.config = config;
    this.search = h('input', { type: 'search', placeholder: 'Search keys and values', 'aria-label': 'Search config' });
    this.count = h('span', { class: 'muted config-count', role: 'status' });
    this.tree = h('div', { class: 'config-tree' });
    this.search.addEventListener('input', () => this.render());
    const hasConfig = config !== null && typeof config === 'object' && Object.keys(config).length > 0;
    if (!hasConfig) {
      root.replaceChildren(h('p', { class: 'muted' }, 'This run sent no config (connect(…, config=cfg) or run.start’s config).'));
      return;
    }
    root.replaceChildren(h('div', { class: 'config-search' }, this.search, this.count), this.tree);
    this.render();
  }

  render() {
    const query = this.search.value;
    const { tree, count } = filterConfig(this.config, query);
    this.count.textContent = query.trim() ? `${count} match${count === 1 ? '' : 'es'}` : '';
    this.tree.replaceChildren(tree.length ? this.list(tree, query) : h('p', { class: 'muted' }, 'Nothing matches.'));
  }

  list(nodes, query) {
    return h('ul', {}, ...nodes.map((n) => (n.children ? this.branch(n, query) : this.leaf(n, query))));
  }

  branch(node, query) {
    const label = h('span', { class: 'config-key' }, ...highlighted(String(node.key), query));
    const size = h('span', { class: 'muted config-size' }, node.array ? `[${node.children.length}]` : `{${node.children.length}}`);
    return h('li', { dataset: { path: node.path } },
      h('details', { open: true }, h('summary', {}, label, ' ', size), this.list(node.children, query)));
  }

  leaf(node, query) {
    const kind = node.value === null ? 'null' : typeof node.value;
    return h('li', { class: 'config-leaf', dataset: { path: node.path } },
      h('span', { class: 'config-key' }, ...highlighted(String(node.key), query)),
      h('span', { class: `config-value ${kind}` }, ...highlighted(node.text, query)));
  }
}

// @ts-check
// The sample viewer's cards: a group (its best vs worst comparison) and its samples (chips
// coloured by range, the prompt and completion with the search's matches marked).

import { h } from '../core/dom.js';
import { bestAndWorst, countMatches, fmt, highlightParts, hueOf, keyOf, normalized } from './pure.js';
/** The text of one prompt or completion, the search's matches marked. */
function textBlock(label, text, query) {
  const pre = h('pre', { class: 'sample-text' });
  if (text === null || text === undefined) pre.append(h('span', { class: 'muted' }, `no ${label.toLowerCase()} stored`));
  else pre.append(...highlightParts(text, query).map((p) => (p.match ? h('mark', {}, p.text) : p.text)));
  return h('div', { class: 'text-block', dataset: { text: label.toLowerCase() } }, h('h4', {}, label), pre);
}

function chip(cls, label, value, t, title) {
  return h('span', {
    class: `chip ${cls}${t === null ? ' unranged' : ''}`, title,
    dataset: t === null ? {} : { norm: t.toFixed(3) },
    style: t === null ? null : `--h: ${hueOf(t)}`,
  }, label ? h('span', { class: 'chip-label' }, label) : null, fmt(value));
}

function rangeTitle(name, r) {
  if (!r || typeof r.min !== 'number') return `${name}: no range known yet`;
  return `${name}: ${r.source} range ${fmt(r.min)} – ${fmt(r.max)}${r.invert ? ' (inverted: lower is better)' : ''}`;
}

class Row {
  constructor(viewer, s) {
    this.viewer = viewer;
    this.sample = s;
    this.key = keyOf(s);
    this.count = 0;
    const rr = viewer.rangeOf(s);
    const metrics = Object.entries(s.metrics).filter(([, v]) => v !== null).map(([k, v]) => {
      const r = viewer.rangeOf(s, k);
      return chip('metric', k, v, normalized(v, r), rangeTitle(k, r));
    });
    this.badge = h('span', { class: 'match-count', hidden: true });
    this.summary = h('button', { type: 'button', class: 'sample-summary', 'aria-expanded': 'false',
      onclick: () => this.toggle() },
    chip('reward', null, s.reward, normalized(s.reward, rr), rangeTitle('reward', rr)),
    s.advantage === null ? null
      : h('span', { class: 'field', title: 'advantage' }, h('span', { class: 'field-label' }, 'adv '), fmt(s.advantage)),
    s.prompt_tokens === null && s.completion_tokens === null ? null
      : h('span', { class: 'field', title: 'prompt + completion tokens' }, h('span', { class: 'field-label' }, 'tokens '),
        `${fmt(s.prompt_tokens)} + ${fmt(s.completion_tokens)}`),
    s.stop_reason ? h('span', { class: `tag stop${s.stop_reason === 'length' ? ' length' : ''}`, title: 'stop reason' }, s.stop_reason) : null,
    s.discard_reason ? h('span', { class: 'tag discard', title: 'discarded' }, s.discard_reason) : null,
    ...metrics, this.badge, h('span', { class: 'sample-id muted' }, String(s.sample_id)));
    this.detail = h('div', { class: 'sample-detail', hidden: true });
    this.el = h('li', { class: `sample${s.discard_reason ? ' discarded' : ''}`, dataset: { sampleId: String(s.sample_id), key: this.key } },
      this.summary, this.detail);
    if (viewer.expanded.has(this.key)) this.toggle(true);
  }

  focus() {
    this.summary.focus();
    this.summary.scrollIntoView({ block: 'nearest' });
  }

  async toggle(open = this.detail.hidden) {
    this.detail.hidden = !open;
    this.summary.setAttribute('aria-expanded', String(open));
    this.el.classList.toggle('open', open);
    if (!open) {
      this.viewer.expanded.delete(this.key);
      return;
    }
    this.viewer.expanded.add(this.key);
    if (!this.detail.childElementCount) this.detail.append(h('p', { class: 'muted' }, 'Loading text…'));
    const text = await this.viewer.textFor([this.sample]);
    this.fill(text.get(this.key));
  }

  fill(t) {
    if (this.detail.hidden) return;
    const q = this.viewer.query;
    this.detail.replaceChildren(textBlock('Prompt', t?.prompt, q), textBlock('Completion', t?.completion, q));
  }

  matches(t) {
    const q = this.viewer.query;
    this.count = q && t ? countMatches(t.prompt, q) + countMatches(t.completion, q) : 0;
    this.badge.hidden = this.count === 0;
    this.badge.textContent = `${this.count} match${this.count === 1 ? '' : 'es'}`;
    this.el.classList.toggle('match', this.count > 0);
    this.el.classList.toggle('no-match', Boolean(q) && this.count === 0);
    if (!this.detail.hidden && t !== undefined) this.fill(t);
    return this.count;
  }
}

export class Group {
  constructor(viewer, g) {
    this.viewer = viewer;
    this.group = g;
    this.rows = g.samples.map((s) => new Row(viewer, s));
    const rewards = g.samples.map((s) => s.reward).filter((r) => typeof r === 'number');
    const tied = rewards.length > 1 && rewards.every((r) => r === rewards[0]);
    const envs = [...new Set(g.samples.map((s) => s.env).filter(Boolean))];
    this.pair = bestAndWorst(g.samples);
    this.compareBtn = h('button', { type: 'button', class: 'compare-button', 'aria-expanded': 'false',
      disabled: !this.pair, title: this.pair ? 'Best vs worst of this group (b)' : 'Needs two samples with different rewards',
      onclick: () => this.compare() }, 'Best vs worst');
    this.panel = h('div', { class: 'compare', hidden: true });
    this.el = h('section', { class: 'sample-group', dataset: { groupId: g.id }, 'aria-label': `Group ${g.id}` },
      h('header', { class: 'group-head' }, h('h3', {}, `Group ${g.id}`),
        envs.length ? h('span', { class: 'muted' }, envs.join(', ')) : null,
        h('span', { class: 'muted' }, `${g.samples.length} sample${g.samples.length === 1 ? '' : 's'}`),
        tied ? h('span', { class: 'tag tied', title: 'every reward equal: no learning signal' }, 'tied') : null,
        this.compareBtn),
      this.panel, h('ol', { class: 'samples' }, ...this.rows.map((r) => r.el)));
  }

  async compare(open = this.panel.hidden) {
    if (!this.pair) return;
    this.panel.hidden = !open;
    this.compareBtn.setAttribute('aria-expanded', String(open));
    if (open) {
      this.panel.replaceChildren(h('p', { class: 'muted' }, 'Loading text…'));
      await this.viewer.textFor([this.pair.best, this.pair.worst]);
      this.refreshCompare();
      this.panel.scrollIntoView({ block: 'nearest' });
    }
  }

  async refreshCompare() {
    if (this.panel.hidden || !this.pair) return;
    const text = await this.viewer.textFor([this.pair.best, this.pair.worst]);
    const q = this.viewer.query;
    const side = (name, s) => {
      const t = text.get(keyOf(s));
      const r = this.viewer.rangeOf(s);
      return h('div', { class: 'compare-side', dataset: { side: name } },
        h('h4', {}, `${name === 'best' ? 'Best' : 'Worst'} · `, chip('reward', null, s.reward, normalized(s.reward, r), rangeTitle('reward', r)),
          h('span', { class: 'muted' }, ` ${s.sample_id}`)),
        textBlock('Prompt', t?.prompt, q), textBlock('Completion', t?.completion, q));
    };
    this.panel.replaceChildren(side('best', this.pair.best), side('worst', this.pair.worst));
  }
}


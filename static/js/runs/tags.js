// @ts-check
// A run's tags: chips that lead to the run list filtered by them (`/?tag=`), and the overview's
// editor (add by typing, remove by ×), saved with PATCH /api/runs/<id> {"tags"}; the server
// keeps them sorted and distinct and names a tag it refuses (ingest/write/housekeeping.py).

import { h } from '../core/dom.js';

/** The run list's URL filtered by `tag`. */
export function tagUrl(tag) {
  return `/?${new URLSearchParams({ tag })}`;
}

/** A tag chip: a link to the runs carrying it, or with `onRemove` also a × button. */
export function tagChip(tag, { onRemove = null, onPick = null } = {}) {
  const link = h('a', { class: 'tag-name', href: tagUrl(tag), title: `Runs tagged ${tag}` }, tag);
  if (onPick) {
    link.addEventListener('click', (ev) => {
      if (ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
      ev.preventDefault();
      onPick(tag);
    });
  }
  const remove = onRemove && h('button', { type: 'button', class: 'tool tag-remove', 'aria-label': `Remove tag ${tag}`,
    title: 'Remove this tag', onclick: () => onRemove(tag) }, '\u00d7');
  return h('span', { class: 'tag', dataset: { tag } }, link, remove);
}

/** Tags typed in one field: split at commas, trimmed, empty ones left out. */
export function parseTags(text) {
  return String(text ?? '').split(',').map((t) => t.trim()).filter(Boolean);
}

/**
 * The overview's tag editor. `save(tags)` writes them (resolves to the run's info, rejects
 * with the server's error); `say(text, bad)` reports.
 */
export class TagEditor {
  constructor(info, { save, say }) {
    this.info = info;
    this.saveTags = save;
    this.say = say;
    this.chips = h('span', { class: 'tag-list', role: 'list', 'aria-label': 'Tags of this run' });
    this.input = h('input', { type: 'text', id: 'hk-tags', name: 'tag', autocomplete: 'off', spellcheck: 'false',
      maxlength: 200, placeholder: 'baseline, lr-sweep', 'aria-label': 'Add tags (comma-separated)' });
    this.form = h('form', { class: 'hk-row hk-tags' }, h('label', { for: 'hk-tags' }, 'Tags'), this.chips, this.input,
      h('button', { type: 'submit' }, 'Add'));
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.add();
    });
    this.render();
  }

  get tags() {
    return this.info.tags ?? [];
  }

  render() {
    this.chips.replaceChildren(...this.tags.map((t) => {
      const chip = tagChip(t, { onRemove: (tag) => this.remove(tag) });
      chip.setAttribute('role', 'listitem');
      return chip;
    }));
    if (!this.tags.length) this.chips.append(h('span', { class: 'muted' }, 'none'));
  }

  async add() {
    const added = parseTags(this.input.value).filter((t) => !this.tags.includes(t));
    if (!added.length) return;
    if (await this.write([...this.tags, ...added], `Tagged ${added.join(', ')}.`)) this.input.value = '';
  }

  remove(tag) {
    return this.write(this.tags.filter((t) => t !== tag), `Tag ${tag} removed.`);
  }

  async write(tags, done) {
    try {
      await this.saveTags(tags);
      this.say(done);
      return true;
    } catch (err) {
      this.say(`Tags not saved: ${err?.body?.error || err?.message || err}`, true);
      return false;
    }
  }

  update(info) {
    this.info = info;
    this.render();
  }

  disable() {
    this.input.disabled = true;
    for (const b of this.form.querySelectorAll('button')) b.disabled = true;
  }
}

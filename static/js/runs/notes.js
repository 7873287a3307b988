// @ts-check
// A run's notes on its overview: markdown rendered safely (core/markdown.js), edited in
// place with a live preview and saved with PATCH /api/runs/<id>.

import { h } from '../core/dom.js';
import { renderMarkdown } from '../core/markdown.js';
import { patchRun } from '../core/api.js';
import { problem } from './edit.js';

const HELP = 'Markdown: **bold**, *italic*, `code`, lists, # headings, [links](https://…)';

export class NotesPanel {
  /**
   * `onSaved(info)` gets the server's answer to a save.
   * @param {HTMLElement} root
   * @param {object} info the run (GET /api/runs/<id>)
   * @param {{onSaved?: (info: object) => void}} [callbacks]
   */
  constructor(root, info, { onSaved = () => {} } = {}) {
    this.info = info;
    this.onSaved = onSaved;
    this.view = h('div', { class: 'notes-body' });
    this.edit = h('button', { type: 'button', onclick: () => this.open() }, 'Edit notes');
    this.text = h('textarea', { rows: 8, 'aria-label': 'Notes (markdown)', spellcheck: 'true' });
    this.preview = h('div', { class: 'notes-body notes-preview', 'aria-label': 'Preview' });
    this.status = h('span', { class: 'hk-status', role: 'status' });
    this.editor = h('div', { class: 'notes-editor', hidden: true },
      h('div', { class: 'notes-panes' }, this.text, this.preview),
      h('div', { class: 'notes-buttons' },
        h('button', { type: 'button', class: 'primary', onclick: () => this.save() }, 'Save notes'),
        h('button', { type: 'button', onclick: () => this.close() }, 'Cancel'),
        h('span', { class: 'muted' }, HELP), this.status));
    this.text.addEventListener('input', () => this.preview.replaceChildren(renderMarkdown(this.text.value)));
    root.replaceChildren(this.view, h('div', { class: 'notes-actions' }, this.edit), this.editor);
    this.render();
  }

  render() {
    const notes = this.info.notes || '';
    if (notes.trim()) this.view.replaceChildren(renderMarkdown(notes));
    else this.view.replaceChildren(h('p', { class: 'muted' }, 'No notes yet.'));
  }

  open() {
    this.text.value = this.info.notes || '';
    this.preview.replaceChildren(renderMarkdown(this.text.value));
    this.status.textContent = '';
    this.editor.hidden = false;
    this.view.hidden = true;
    this.edit.hidden = true;
    this.text.focus();
  }

  close() {
    this.editor.hidden = true;
    this.view.hidden = false;
    this.edit.hidden = false;
    this.render();
  }

  async save() {
    try {
      const info = await patchRun(this.info.id, { notes: this.text.value });
      this.info = info;
      this.onSaved(info);
      this.close();
    } catch (err) {
      this.status.textContent = `Not saved: ${problem(err)}`;
    }
  }

  /** The run changed: show its notes, unless they are being edited here. */
  update(info) {
    this.info = info;
    if (this.editor.hidden) this.render();
  }

  disable() {
    this.edit.disabled = true;
    this.editor.hidden = true;
  }
}

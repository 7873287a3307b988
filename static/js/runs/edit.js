// @ts-check
// Run housekeeping: PATCH name / notes / color / tags and DELETE /api/runs/<id>, written
// like the page's other writes (CSRF cookie in X-CSRFToken), and the controls that use them:
// rename, colour (warned when another run of the project has it), tags, the whole-run CSV
// export, and delete behind a typed confirmation (the run's name).

import { deleteRun, listRuns, patchRun } from '../core/api.js';
import { colorChoices, colorsInUse, guardColor } from './colors.js';
import { h, runColor } from '../core/dom.js';
import { TagEditor } from './tags.js';

/** What went wrong, in words: the server's message when it gave one. */
export function problem(err) {
  return err?.body?.error || err?.message || String(err);
}

/**
 * The housekeeping controls of one run. `info` is the run's info (kept current by `update`);
 * `onSaved(info)` gets the server's answer to an edit; `onDeleted()` runs once it is gone.
 */
export class RunEditor {
  /**
   * @param {HTMLElement} root
   * @param {object} info the run (GET /api/runs/<id>)
   * @param {{onSaved?: (info: object) => void, onDeleted?: () => void}} [callbacks]
   */
  constructor(root, info, { onSaved = () => {}, onDeleted = () => {} } = {}) {
    this.info = info;
    this.onSaved = onSaved;
    this.onDeleted = onDeleted;
    this.status = h('p', { class: 'hk-status', role: 'status', 'aria-live': 'polite' });
    this.tagEditor = new TagEditor(info, { say: (text, bad) => this.say(text, bad),
      save: async (tags) => {
        const saved = await patchRun(this.info.id, { tags });
        this.onSaved(saved);
        return saved;
      } });
    root.replaceChildren(this.renameForm(), this.colorField(), this.tagEditor.form, this.exportRow(),
      this.deleteControl(), this.status);
  }

  say(text, bad = false) {
    this.status.textContent = text;
    this.status.classList.toggle('bad', bad);
  }

  renameForm() {
    this.name = h('input', { type: 'text', name: 'name', value: this.info.name, maxlength: 200, required: true,
      autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Run name' });
    const form = h('form', { class: 'hk-row' }, h('label', { for: 'hk-name' }, 'Name'), this.name,
      h('button', { type: 'submit' }, 'Rename'));
    this.name.id = 'hk-name';
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.rename();
    });
    return form;
  }

  async rename() {
    const name = this.name.value.trim();
    if (!name || name === this.info.name) return;
    await this.save({ name }, `Renamed to ${name}.`);
  }

  colorField() {
    this.color = h('input', { type: 'color', class: 'swatch', value: runColor(this.info), 'aria-label': 'Run colour', id: 'hk-color' });
    const { list, offer } = colorChoices(this.color);
    this.clash = h('span', { class: 'color-clash', role: 'alert', hidden: true });
    // The picker suggests the colours no other run of the project has.
    const siblings = () => listRuns(this.info.project).catch(() => []);
    this.color.addEventListener('focus', async () => offer(colorsInUse(await siblings(), this.info.project, this.info.id)));
    this.color.addEventListener('change', async () => {
      const color = this.color.value;
      await guardColor({ color, run: this.info, runs: await siblings(), slot: this.clash,
        save: (c) => this.save({ color: c }, 'Colour saved.'), revert: () => this.update(this.info) });
    });
    return h('div', { class: 'hk-row' }, h('label', { for: 'hk-color' }, 'Colour'), this.color, list, this.clash);
  }

  async save(body, done) {
    try {
      const info = await patchRun(this.info.id, body);
      this.say(done);
      this.onSaved(info);
    } catch (err) {
      this.say(`Not saved: ${problem(err)}`, true);
      this.update(this.info); // back to what the server has
    }
  }

  /** The whole run as CSV: every series, one row per point (GET /api/runs/<id>/export.csv). */
  exportRow() {
    this.exportLink = h('a', { class: 'button-link', href: `/api/runs/${encodeURIComponent(this.info.id)}/export.csv`,
      download: `run-${this.info.id}.csv`, dataset: { export: 'csv' } }, 'Export CSV');
    return h('div', { class: 'hk-row' }, h('span', { class: 'hk-label' }, 'Data'), this.exportLink,
      h('span', { class: 'muted' }, 'every series of the run, one row per point'));
  }

  deleteControl() {
    this.confirm = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Type the run name to confirm' });
    this.doDelete = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete this run');
    this.what = h('span', { class: 'hk-name' });
    this.dialog = h('dialog', { class: 'hk-dialog', 'aria-labelledby': 'hk-delete-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'hk-delete-title' }, 'Delete run'),
        h('p', {}, 'This removes ', this.what, ' and everything stored for it: steps, charts, samples, notes. It cannot be undone.'),
        h('label', {}, 'Type the run name to confirm: ', this.confirm),
        h('p', { class: 'hk-dialog-status bad', role: 'alert' }),
        h('div', { class: 'hk-dialog-buttons' },
          h('button', { type: 'button', onclick: () => this.dialog.close() }, 'Cancel'), this.doDelete)));
    this.confirm.addEventListener('input', () => { this.doDelete.disabled = this.confirm.value !== this.info.name; });
    this.dialog.querySelector('form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.remove();
    });
    const open = h('button', { type: 'button', class: 'danger' }, 'Delete run…');
    open.addEventListener('click', () => {
      this.what.textContent = this.info.name;
      this.confirm.value = '';
      this.doDelete.disabled = true;
      this.dialog.querySelector('.hk-dialog-status').textContent = '';
      this.dialog.showModal();
      this.confirm.focus();
    });
    this.openDelete = open;
    return h('div', { class: 'hk-row' }, open, this.dialog);
  }

  async remove() {
    if (this.confirm.value !== this.info.name) return; // the typed name is the confirmation
    this.doDelete.disabled = true;
    try {
      await deleteRun(this.info.id);
      this.dialog.close();
      this.onDeleted();
    } catch (err) {
      this.dialog.querySelector('.hk-dialog-status').textContent = `Not deleted: ${problem(err)}`;
      this.doDelete.disabled = false;
    }
  }

  /** The run changed (here or elsewhere): show it, leaving a field being typed in alone. */
  update(info) {
    this.info = info;
    if (document.activeElement !== this.name) this.name.value = info.name;
    if (document.activeElement !== this.color) this.color.value = runColor(info);
    this.doDelete.disabled = this.confirm.value !== info.name;
    if (this.dialog.open) this.what.textContent = info.name;
    this.tagEditor.update(info);
  }

  /** The run is gone: nothing left to edit. */
  disable() {
    for (const el of [this.name, this.color, this.openDelete]) el.disabled = true;
    this.tagEditor.disable();
    this.exportLink.removeAttribute('href');
    if (this.dialog.open) this.dialog.close();
  }
}

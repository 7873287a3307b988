// @ts-check
// The dashboards of a project, above the Custom view's board: pick one; create one (empty or
// from a template: the built-in "GRPO health" or one saved from a dashboard), rename or delete
// it; save it as a template; export it as a JSON file and import one (a new dashboard).

import { deleteLayout, renameLayout } from '../core/api.js';
import { createDashboard, deleteTemplate, listTemplates, saveTemplate } from './store.js';
import { download, h } from '../core/dom.js';
import { normalizeLayout, VERSION } from './layout.js';
import { safeFilename } from '../core/text.js';

const EMPTY = '';

export class Dashboards {
  /** `view`: {runId, name, names, layout, status(text), flush(), discard(), renamed(stored)}. */
  constructor(view) {
    this.view = view;
    this.picker = h('select', { class: 'dashboard-picker', 'aria-label': 'Dashboard' });
    this.picker.addEventListener('change', () => this.open(this.picker.value));
    this.input = h('input', { type: 'text', name: 'dashboard', maxlength: '100', required: true, 'aria-label': 'Name' });
    this.template = h('select', { name: 'template', 'aria-label': 'Start from' });
    this.template.addEventListener('change', () => this.syncTemplate());
    this.dropTemplate = h('button', { type: 'button', class: 'tool', onclick: () => this.removeTemplate() }, 'Delete template');
    this.from = h('label', { class: 'dashboard-from' }, 'from ', this.template, this.dropTemplate);
    this.form = h('form', { class: 'dashboard-name', hidden: true }, this.input, this.from,
      h('button', { type: 'submit' }, 'OK'), h('button', { type: 'button', onclick: () => this.close() }, 'Cancel'));
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.named(this.input.value.trim());
    });
    this.form.addEventListener('keydown', (ev) => ev.key === 'Escape' && this.close());
    this.file = h('input', { type: 'file', accept: 'application/json,.json', class: 'visually-hidden',
      'aria-label': 'Dashboard file to import', tabindex: '-1' });
    this.file.addEventListener('change', () => this.importFile(this.file.files[0]));
    const tool = (text, onclick) => h('button', { type: 'button', class: 'tool', onclick }, text);
    this.el = h('div', { class: 'dashboards' }, this.picker,
      tool('New…', () => this.ask('new', '')), tool('Rename…', () => this.ask('rename', this.view.name)),
      tool('Delete', () => this.remove()), tool('Save as template…', () => this.ask('template', this.view.name)),
      tool('Export', () => this.exportFile()), tool('Import…', () => this.file.click()), this.file, this.form);
    this.fill();
  }

  fill() {
    const { names, name } = this.view;
    const all = names.includes(name) ? names : [...names, name];
    this.picker.replaceChildren(...all.map((n) => h('option', { value: n, selected: n === name }, n)));
  }

  async ask(mode, value) {
    this.mode = mode;
    this.input.value = value;
    this.input.setAttribute('aria-label', { new: 'New dashboard name', rename: 'Dashboard name', template: 'Template name' }[mode]);
    this.from.hidden = mode !== 'new';
    this.form.hidden = false;
    this.input.focus();
    if (mode === 'new') await this.loadTemplates();
  }

  close() {
    this.form.hidden = true;
  }

  async loadTemplates(keep = EMPTY) {
    try {
      this.templates = await listTemplates(this.view.runId);
    } catch (err) {
      this.templates = [];
      this.view.status(`Templates not loaded (${err.message})`);
    }
    this.template.replaceChildren(h('option', { value: EMPTY }, 'an empty dashboard'),
      ...this.templates.map((t) => h('option', { value: t.name, selected: t.name === keep },
        t.builtin ? `${t.name} (built in)` : t.name)));
    this.syncTemplate();
  }

  syncTemplate() {
    const t = this.templates?.find((x) => x.name === this.template.value);
    this.dropTemplate.disabled = !t || t.builtin;
  }

  async named(name) {
    if (!name) return;
    this.close();
    const { view } = this;
    try {
      if (this.mode === 'new') {
        const t = this.templates?.find((x) => x.name === this.template.value);
        if (!t) return await this.open(name); // empty until its first plot; saved then
        await createDashboard(view.runId, name, normalizeLayout(t));
        return await this.open(name);
      }
      await view.flush();
      if (this.mode === 'template') {
        await saveTemplate(view.runId, name, view.layout);
        view.status(`Saved as template “${name}”`);
      } else if (name !== view.name) {
        const got = await renameLayout(view.runId, view.name, name);
        history.replaceState(null, '', this.url(got.name));
        view.renamed(got);
        this.fill();
        view.status('Renamed');
      }
    } catch (err) {
      view.status(this.failure(err));
    }
  }

  failure(err) {
    if (err.status === 404) return 'Not renamed: this dashboard is not saved yet.';
    if (err.status === 409 && this.mode === 'new') return 'Not created: a dashboard of that name exists already.';
    return `Not done (${err.body?.error ?? err.message})`;
  }

  async removeTemplate() {
    const name = this.template.value;
    if (!name || !confirm(`Delete the template “${name}” for the whole project?`)) return;
    try {
      await deleteTemplate(this.view.runId, name);
      await this.loadTemplates();
    } catch (err) {
      this.view.status(`Template not deleted (${err.body?.error ?? err.message})`);
    }
  }

  async remove() {
    if (!confirm(`Delete the dashboard “${this.view.name}” for the whole project?`)) return;
    this.view.discard();
    try {
      await deleteLayout(this.view.runId, this.view.name);
      location.assign(this.url(null));
    } catch (err) {
      this.view.status(`Not deleted (${err.body?.error ?? err.message})`);
    }
  }

  async open(name) {
    await this.view.flush();
    location.assign(this.url(name));
  }

  /** This page for dashboard `name` (null: the default one). */
  url(name) {
    const url = new URL(location.href);
    if (name === null || name === 'default') url.searchParams.delete('dashboard');
    else url.searchParams.set('dashboard', name);
    return url.toString();
  }

  /** The dashboard as a file: its name and layout, in the layout format (custom/layout.js). */
  exportFile() {
    const doc = { telescope: 'dashboard', name: this.view.name, version: VERSION, sections: this.view.layout.sections };
    const blob = new Blob([`${JSON.stringify(doc, null, 2)}\n`], { type: 'application/json' });
    download(blob, safeFilename(`dashboard-${this.view.name}`, 'json'));
  }

  /** A dashboard file (any layout version) becomes a new dashboard, named as in the file. */
  async importFile(file) {
    if (!file) return;
    this.file.value = '';
    let doc;
    try {
      doc = JSON.parse(await file.text());
    } catch {
      this.view.status(`Not imported: ${file.name} is not JSON.`);
      return;
    }
    const layout = normalizeLayout(doc);
    const base = (typeof doc?.name === 'string' && doc.name.trim()) || file.name.replace(/\.json$/i, '') || 'imported';
    let name = base.slice(0, 90);
    for (let n = 2; this.view.names.includes(name) || name === this.view.name; n++) name = `${base.slice(0, 90)} (${n})`;
    try {
      await createDashboard(this.view.runId, name, layout);
      await this.open(name);
    } catch (err) {
      this.view.status(`Not imported (${err.body?.field ?? ''} ${err.body?.error ?? err.message})`);
    }
  }
}

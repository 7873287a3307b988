// @ts-check
// Page-level controls of the Metrics page: x axis, smoothing (EMA, running mean or Gaussian)
// and span, max step / time (a duration: `1h30m`, `2d`, or hours), Normalize, metric search
// (`/` focuses it, Escape leaves it), and Copy link (the page's URL, which holds the view:
// charts/viewurl.js). Every valid change is saved (localStorage) and reported to the page; an
// invalid one is flagged and changes nothing.

import { copyText, h } from '../core/dom.js';
import { formatDuration, parseDuration } from '../core/duration.js';
import { loadPage, savePage } from './prefs.js';
import { checkSmoothing, clampSpan, SMOOTHERS, SPAN_MAX, SPAN_MIN } from './transforms.js';

const SEARCH_DEBOUNCE_MS = 150;
const TOAST_MS = 2500;
const SPAN_HELP = 'Smoothing window, in points: EMA α = 2/(span+1); running mean of the last span '
  + 'points; Gaussian over span/2 points either side (σ half of that)';

/** Whether a key press goes to a field being typed in (there `/` is a character). */
function typing(target) {
  const el = /** @type {HTMLElement | null} */ (target);
  if (!el || !el.tagName) return false;
  if (el.isContentEditable) return true;
  if (el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return true;
  if (el.tagName !== 'INPUT') return false;
  const type = /** @type {HTMLInputElement} */ (el).type;
  return !['checkbox', 'radio', 'button', 'submit', 'reset', 'range', 'color', 'file'].includes(type);
}

export class Controls {
  /**
   * `onChange(settings, field)` after each change; `settings` is the live object: `initial`
   * (a URL's view) or else the stored settings. `link()`: the URL Copy link copies; its
   * button goes in `linkSlot` (else at the end of the controls).
   * @param {HTMLElement} root
   * @param {(settings: object, field: string) => void} onChange
   * @param {{initial?: object | null, link?: () => string, linkSlot?: HTMLElement | null}} [options]
   */
  constructor(root, onChange, { initial = null, link = () => location.href, linkSlot = null } = {}) {
    this.settings = initial ?? loadPage();
    this.onChange = onChange;
    this.link = link;
    this.linkSlot = linkSlot;
    this.root = root;
    this.build();
    document.addEventListener('keydown', (ev) => this.onKey(ev));
  }

  build() {
    const s = this.settings;
    const radio = (value, text) => h('label', { class: 'seg' },
      h('input', { type: 'radio', name: 'xaxis', value, checked: s.xaxis === value }), text);
    this.inputs = {
      ema: h('input', { type: 'checkbox', name: 'ema', checked: s.ema }),
      smooth: h('select', { name: 'smooth', 'aria-label': 'Smoothing' },
        Object.entries(SMOOTHERS).map(([value, text]) => h('option', { value, selected: s.smoothing === value }, text))),
      span: h('input', { type: 'number', name: 'span', min: SPAN_MIN, max: SPAN_MAX, step: 1, value: s.span, class: 'num',
        'aria-label': 'Smoothing span', title: SPAN_HELP }),
      maxStep: h('input', { type: 'number', name: 'maxStep', min: 0, step: 1, value: s.maxStep ?? '', class: 'num', placeholder: 'all' }),
      // Settings keep hours (what a bare number means, and what they held before).
      maxTime: h('input', { type: 'text', name: 'maxTime', value: s.maxTime === null ? '' : formatDuration(s.maxTime * 3600),
        class: 'duration', placeholder: 'all', title: 'e.g. 90m, 1h30m, 2d, 45s, 1.5h; a bare number is hours',
        autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'max-time-error' }),
      normalize: h('input', { type: 'checkbox', name: 'normalize', checked: s.normalize }),
      search: h('input', { type: 'search', name: 'search', value: s.search, placeholder: 'Search metrics', 'aria-label': 'Search metrics by name', autocomplete: 'off' }),
      regex: h('input', { type: 'checkbox', name: 'regex', checked: s.regex }),
    };
    const i = this.inputs;
    this.count = h('span', { class: 'search-count muted', 'aria-live': 'polite' });
    this.searchError = h('span', { class: 'search-error', role: 'alert' });
    this.timeError = h('span', { class: 'duration-error', id: 'max-time-error', role: 'alert' });
    this.copyBtn = h('button', { type: 'button', class: 'copy-link', name: 'copyLink',
      title: 'Copy a link to this view (the x axis, smoothing, limits, search, runs and chart settings)' }, 'Copy link');
    this.copyBtn.addEventListener('click', () => this.copyLink());
    this.toast = h('div', { class: 'toast', role: 'status', 'aria-live': 'polite', hidden: true });
    this.form = h('form', { class: 'controls', 'aria-label': 'Chart controls' },
      h('fieldset', { class: 'segmented' }, h('legend', {}, 'x axis'), radio('step', 'Step'), radio('time', 'Time')),
      h('span', { class: 'control' }, h('label', { title: 'Smooth every line' }, i.ema, ' Smooth'), i.smooth,
        h('label', { title: SPAN_HELP }, ' span ', i.span)),
      h('label', { class: 'control' }, 'Max step ', i.maxStep),
      h('span', { class: 'control' }, h('label', {}, 'Max time ', i.maxTime), this.timeError),
      h('label', { class: 'control' }, i.normalize, ' Normalize'),
      h('span', { class: 'control search' }, i.search, h('label', { title: 'Regular expression' }, i.regex, ' regex'), this.count, this.searchError),
      this.linkSlot ? null : this.copyBtn);
    this.linkSlot?.replaceChildren(this.copyBtn);
    i.search.title = 'Search metrics (press / to get here, Escape to leave)';
    this.form.addEventListener('submit', (ev) => ev.preventDefault());
    this.form.addEventListener('change', (ev) => this.read(ev.target.name));
    i.maxTime.addEventListener('input', () => this.showTimeError(null)); // judged when committed
    i.search.addEventListener('input', () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.read('search'), SEARCH_DEBOUNCE_MS);
    });
    this.root.replaceChildren(this.form);
    // In <body>: a fixed element inside the controls bar (a backdrop filter) would be placed in it.
    document.body.append(this.toast);
  }

  /** `/` anywhere but in a field focuses the search; Escape in the search leaves it. */
  onKey(ev) {
    const search = this.inputs.search;
    if (ev.key === 'Escape' && ev.target === search) {
      ev.preventDefault(); // the search keeps its text (a search field clears on Escape)
      search.blur();
      return;
    }
    if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
    ev.preventDefault();
    search.focus();
    search.select();
  }

  async copyLink() {
    const ok = await copyText(this.link());
    this.showToast(ok ? 'Link copied' : 'Could not copy the link: copy it from the address bar');
  }

  showToast(text) {
    this.toast.textContent = text;
    this.toast.hidden = false;
    clearTimeout(this.toastTimer);
    this.toastTimer = setTimeout(() => { this.toast.hidden = true; }, TOAST_MS);
  }

  read(field) {
    const s = this.settings;
    const i = this.inputs;
    const num = (el) => (el.value === '' || !Number.isFinite(Number(el.value)) ? null : Number(el.value));
    if (field === 'maxTime') {
      const d = parseDuration(i.maxTime.value);
      this.showTimeError(d.ok ? null : d.error);
      if (!d.ok) return; // shown as invalid; the charts keep the last valid limit
      s.maxTime = d.seconds === null ? null : d.seconds / 3600;
    }
    s.xaxis = this.form.elements.xaxis.value === 'time' ? 'time' : 'step';
    s.ema = i.ema.checked;
    s.smoothing = checkSmoothing(i.smooth.value);
    s.span = clampSpan(i.span.value === '' ? s.span : i.span.value);
    if (field === 'span') i.span.value = s.span;
    s.maxStep = num(i.maxStep);
    s.normalize = i.normalize.checked;
    s.search = i.search.value;
    s.regex = i.regex.checked;
    savePage(s);
    this.onChange(s, field);
  }

  showTimeError(error) {
    this.timeError.textContent = error ?? '';
    this.inputs.maxTime.setAttribute('aria-invalid', error ? 'true' : 'false');
  }

  showSearchResult(count, error) {
    this.count.textContent = `${count} chart${count === 1 ? '' : 's'}`;
    this.searchError.textContent = error ? `Invalid regex: ${error}` : '';
    this.inputs.search.setAttribute('aria-invalid', error ? 'true' : 'false');
  }
}

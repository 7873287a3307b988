// @ts-check
// Durations as people type them, for the Max time control: `90m`, `1h30m`, `2d`, `45s`, `1.5h`,
// `1d 2h`, and a bare number meaning hours (what the control took before, and what stored page
// settings hold). Pure: no DOM. Tested with `node --test tests/js/`.

const UNIT_SECONDS = { d: 86400, h: 3600, m: 60, s: 1 };
const ORDER = 'dhms';
const NUMBER = '(?:\\d+(?:\\.\\d*)?|\\.\\d+)';
const BARE = new RegExp(`^${NUMBER}$`);
const PART = new RegExp(`(${NUMBER})\\s*([dhms])`, 'gy');

/** What the control accepts, in words: the message shown next to an invalid entry. */
export const DURATION_FORMS = 'Use a duration such as 90m, 1h30m, 2d, 45s or 1.5h, or a number of hours';

/**
 * Seconds in `text`: {ok: true, seconds} (seconds null for a blank entry: no limit), or
 * {ok: false, error} naming the accepted forms. Units d, h, m, s, each at most once and from
 * the largest down (`1h30m`, not `30m1h`); a bare number is hours; nothing negative.
 */
export function parseDuration(text) {
  const s = String(text ?? '').trim().toLowerCase();
  if (s === '') return { ok: true, seconds: null };
  if (BARE.test(s)) return { ok: true, seconds: Number(s) * 3600 };
  PART.lastIndex = 0;
  let seconds = 0;
  let last = -1;
  let end = 0;
  for (let m = PART.exec(s); m; m = PART.exec(s)) {
    const rank = ORDER.indexOf(m[2]);
    if (rank <= last) return { ok: false, error: DURATION_FORMS };
    last = rank;
    seconds += Number(m[1]) * UNIT_SECONDS[m[2]];
    end = PART.lastIndex;
    while (s[PART.lastIndex] === ' ') PART.lastIndex++;
  }
  if (last < 0 || end !== s.length || !Number.isFinite(seconds)) return { ok: false, error: DURATION_FORMS };
  return { ok: true, seconds };
}

/** `seconds` written the way parseDuration reads it back (5400 → `1h30m`); '' for null. */
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '';
  let rest = Math.round(seconds * 1000) / 1000; // a stored number of hours may carry float noise
  const parts = [];
  for (const u of ORDER) {
    const size = UNIT_SECONDS[u];
    const n = u === 's' ? rest : Math.floor(rest / size + 1e-9);
    if (n > 0) parts.push(`${u === 's' ? Number(n.toFixed(3)) : n}${u}`);
    rest = Math.round((rest - n * size) * 1000) / 1000;
  }
  return parts.length ? parts.join('') : '0s';
}

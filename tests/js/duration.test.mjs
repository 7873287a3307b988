// The Max time control's durations (static/js/core/duration.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DURATION_FORMS, formatDuration, parseDuration } from '../../static/js/core/duration.js';

const seconds = (text) => {
  const d = parseDuration(text);
  assert.equal(d.ok, true, `${text}: ${d.error}`);
  return d.seconds;
};

test('durations in d, h, m, s, alone or combined, largest unit first', () => {
  assert.equal(seconds('90m'), 5400);
  assert.equal(seconds('1h30m'), 5400);
  assert.equal(seconds('2d'), 172800);
  assert.equal(seconds('45s'), 45);
  assert.equal(seconds('1.5h'), 5400);
  assert.equal(seconds('1d2h'), 93600);
  assert.equal(seconds('1d 2h 3m 4s'), 93784);
  assert.equal(seconds(' 2H '), 7200); // case and surrounding blanks do not matter
  assert.equal(seconds('.5m'), 30);
});

test('a bare number is hours, as the control and stored settings had it', () => {
  assert.equal(seconds('2'), 7200);
  assert.equal(seconds('0.25'), 900);
  assert.equal(seconds('0'), 0);
});

test('blank means no limit', () => {
  assert.equal(seconds(''), null);
  assert.equal(seconds('   '), null);
  assert.equal(seconds(null), null);
});

test('anything else is refused, naming the accepted forms', () => {
  for (const bad of ['abc', '1x', 'h', '1h30', '30m1h', '1h1h', '-1h', '-2', '1..5h', '1h-30m', '1 2h', '1e3', 'Infinity']) {
    const d = parseDuration(bad);
    assert.equal(d.ok, false, bad);
    assert.equal(d.error, DURATION_FORMS);
  }
  for (const form of ['90m', '1h30m', '2d', '45s', '1.5h', 'hours']) assert.ok(DURATION_FORMS.includes(form), form);
});

test('formatDuration writes what parseDuration reads back', () => {
  assert.equal(formatDuration(5400), '1h30m');
  assert.equal(formatDuration(93784), '1d2h3m4s');
  assert.equal(formatDuration(0.0125 * 3600), '45s'); // stored hours with float noise
  assert.equal(formatDuration(0), '0s');
  assert.equal(formatDuration(null), '');
  for (const s of [1, 59, 60, 3599.5, 86400, 90061, 1.5 * 3600]) assert.equal(seconds(formatDuration(s)), s);
});

// The Metrics page's view state in its URL (static/js/charts/viewurl.js; docs/protocol.md,
// "Page URLs"): the round trip, and hand-edited or stale values taking their defaults.
import assert from 'node:assert/strict';
import { test } from 'node:test';

// charts/prefs.js keeps its settings in localStorage: a Map stands in for it here.
const storage = new Map();
globalThis.localStorage = {
  getItem: (k) => (storage.has(k) ? storage.get(k) : null),
  setItem: (k, v) => storage.set(k, String(v)),
};

const {
  chartsFromParams, chartsToParams, decodeChart, encodeChart, hasView, MAX_CHARTS,
  pageToParams, queryString, viewFromUrl,
} = await import('../../static/js/charts/viewurl.js');
const { ChartPrefs, chartDefaults, checkPage, MAX_SEARCH, PAGE_DEFAULTS } = await import('../../static/js/charts/prefs.js');

const SET = {
  xaxis: 'time', ema: true, smoothing: 'gauss', span: 25, normalize: true, maxStep: 120,
  maxTime: 1.5, search: 'loss/kl a&b+c=d #1 %41 ü', regex: true,
};
const reward = { id: 'reward|reward|mean|', kind: 'reward', key: 'reward', stat: 'mean', env: null };
const loss = { id: 'step|loss%2Ftotal||', kind: 'step', key: 'loss/total', stat: null, env: null };

/** The query a page would carry for settings `s` and chart overrides `charts`. */
function query(s, charts = {}, base = '') {
  const params = new URLSearchParams(base);
  pageToParams(params, s);
  chartsToParams(params, charts);
  return queryString(params);
}

test('every page setting survives the round trip through a query string', () => {
  const q = query(SET, {}, 'view=all&overlay=3,4&dashboard=Perf+%26+timing');
  const back = viewFromUrl(q);
  assert.equal(back.fromUrl, true);
  assert.deepEqual(back.page, SET);
  assert.deepEqual(back.charts, {});
  const params = new URLSearchParams(q);
  // what is not the view's is kept as it was
  assert.equal(params.get('overlay'), '3,4');
  assert.equal(params.get('dashboard'), 'Perf & timing');
  assert.equal(params.get('maxtime'), '1h30m'); // a duration, as the control takes it
  // each kind of smoothing, and smoothing off with a span kept
  for (const smoothing of ['ema', 'mean', 'gauss']) {
    assert.deepEqual(viewFromUrl(query({ ...SET, smoothing })).page, { ...SET, smoothing });
  }
  const off = { ...PAGE_DEFAULTS, span: 7, xaxis: 'time' };
  assert.deepEqual(viewFromUrl(query(off)).page, off);
});

test('defaults are left out of the URL; a link to copy still says it holds a view', () => {
  const params = new URLSearchParams('overlay=5');
  pageToParams(params, { ...PAGE_DEFAULTS });
  assert.equal(queryString(params), '?overlay=5');
  assert.equal(hasView(params), false); // such a URL opens with the stored settings
  pageToParams(params, { ...PAGE_DEFAULTS }, true);
  assert.equal(queryString(params), '?overlay=5&x=step');
  assert.equal(hasView(params), true);
  assert.deepEqual(viewFromUrl(queryString(params)).page, { ...PAGE_DEFAULTS });
  assert.deepEqual(viewFromUrl('?view=custom&dashboard=x&overlay=2,3'), { fromUrl: false, page: null, charts: null });
  // settings written again replace the old ones, never pile up
  pageToParams(params, SET);
  pageToParams(params, { ...SET, search: 'entropy' });
  assert.deepEqual(params.getAll('q'), ['entropy']);
});

test('hand-edited page values take their defaults (or the nearest valid one), never throw', () => {
  const bad = viewFromUrl('?x=sideways&smooth=cubic&span=abc&norm=maybe&maxstep=-3&maxtime=forever&re=yes');
  assert.equal(bad.fromUrl, true);
  assert.deepEqual(bad.page, { ...PAGE_DEFAULTS });
  const page = (q) => viewFromUrl(q).page;
  assert.equal(page('?span=500').span, 100); // clamped to the control's 2–100
  assert.equal(page('?span=1').span, 2);
  assert.equal(page('?span=').span, 10);
  assert.equal(page('?span=7.6').span, 8);
  assert.equal(page('?maxstep=2.5').maxStep, 2.5);
  assert.equal(page('?maxstep=').maxStep, null);
  assert.equal(page('?maxtime=90m').maxTime, 1.5);
  assert.equal(page('?maxtime=2').maxTime, 2); // a bare number is hours, as in the control
  assert.equal(page('?maxtime=-1h').maxTime, null);
  assert.equal(page('?norm=true&re=1').normalize, true);
  assert.equal(page(`?q=${'a'.repeat(MAX_SEARCH + 50)}`).search.length, MAX_SEARCH);
  assert.equal(page('?smooth=__proto__').ema, false);
  // every setting a URL gives is one checkPage keeps as it is
  assert.deepEqual(checkPage(page('?x=time&span=0')), page('?x=time&span=0'));
});

test('a chart\'s overrides are encoded compactly and come back', () => {
  const diff = { ignoreOutliers: true, ignoreFirst: false, logY: true, band: false, envelope: false,
    yMin: -0.5, yMax: 1e-3, env: 'ma,th!:%é' };
  const text = encodeChart(reward.id, diff);
  assert.equal(text.startsWith('reward|reward|mean|!outliers:1,first:0,log:1,band:0,minmax:0,lo:-0.5,hi:0.001,env:'), true);
  assert.deepEqual(decodeChart(text), [reward.id, diff]);
  const charts = { [reward.id]: { env: '@' }, [loss.id]: { logY: true, yMax: 5 } };
  const q = query(PAGE_DEFAULTS, charts);
  // readable in the address bar: ids and separators as they are (a % of an id escaped)
  assert.equal(q, '?chart=reward|reward|mean|!env:@&chart=step|loss%252Ftotal||!log:1,hi:5');
  assert.deepEqual(viewFromUrl(q), { fromUrl: true, page: { ...PAGE_DEFAULTS }, charts });
});

test('hand-edited chart values are left out, and so is what names no chart', () => {
  assert.equal(decodeChart('no-separator'), null);
  assert.equal(decodeChart('!log:1'), null);
  assert.equal(decodeChart('__proto__!log:1'), null); // not a series id
  assert.deepEqual(decodeChart('a|b||!log:yes,hi:abc,bogus:1,env:%E0%A4%A,lo,:1,first:1'),
    ['a|b||', { ignoreFirst: true }]);
  assert.deepEqual(decodeChart('a|b||!lo:,hi:Infinity,band:0'), ['a|b||', { yMin: null, band: false }]);
  const params = new URLSearchParams();
  params.append('chart', 'a|b||!log:yes'); // nothing readable: no override at all
  params.append('chart', 'c|d||!log:1');
  assert.deepEqual(chartsFromParams(params), { 'c|d||': { logY: true } });
  for (let i = 0; i < MAX_CHARTS + 20; i++) params.append('chart', `k|${i}||!log:1`);
  assert.equal(Object.keys(chartsFromParams(params)).length, MAX_CHARTS - 1);
});

test('arbitrary query strings never throw and always give valid settings', () => {
  const alphabet = 'xsmoothspanormaxtimeq=&!:,|%.-+1209 éE@*#';
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let k = 0; k < 3000; k++) {
    const keys = ['x', 'smooth', 'span', 'norm', 'maxstep', 'maxtime', 'q', 're', 'chart'];
    let q = '?';
    for (let p = rand(6); p >= 0; p--) {
      let v = '';
      for (let c = rand(12); c > 0; c--) v += alphabet[rand(alphabet.length)];
      q += `${keys[rand(keys.length)]}=${v}&`;
    }
    const got = viewFromUrl(q);
    assert.deepEqual(checkPage(got.page), got.page, q);
    for (const diff of Object.values(got.charts)) assert.ok(Object.keys(diff).length > 0, q);
  }
});

test('chart settings of a URL are the view\'s; a change is stored for that chart only', () => {
  storage.clear();
  const stored = new ChartPrefs();
  stored.set(loss, { ...chartDefaults(loss, true), logY: true }, true);
  stored.set(reward, { ...chartDefaults(reward, true), band: false }, true);
  // a URL holding a view: its overrides, none of the stored ones
  let changes = 0;
  const prefs = new ChartPrefs({ [reward.id]: { env: 'math' } });
  prefs.onChange = () => changes++;
  assert.deepEqual(prefs.get(reward, true), { ...chartDefaults(reward, true), env: 'math' });
  assert.deepEqual(prefs.get(loss, true), chartDefaults(loss, true));
  prefs.set(loss, { ...chartDefaults(loss, true), yMax: 3 }, true);
  assert.equal(changes, 1);
  assert.deepEqual(prefs.forUrl([]), { [reward.id]: { env: 'math' }, [loss.id]: { yMax: 3 } });
  // storage: the changed chart as changed, the other stored chart as it was
  assert.deepEqual(JSON.parse(storage.get('telescope.charts.v1')),
    { [loss.id]: { yMax: 3 }, [reward.id]: { band: false } });
  // with no view in the URL, the stored overrides of the page's charts go into its URL
  assert.deepEqual(new ChartPrefs().forUrl([loss.id, 'x|y||']), { [loss.id]: { yMax: 3 } });
});

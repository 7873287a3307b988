// Run notes' markdown (static/js/core/markdown.js): the subset it renders and the markup it never lets
// through.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parseMarkdown, toHTML } from '../../static/js/core/markdown.js';

const html = (src) => toHTML(parseMarkdown(src));

test('paragraphs, line breaks, emphasis and code', () => {
  assert.equal(html('**lr** 1e-6, *warm-up* of `20` steps\nsecond line\n\nnext'),
    '<p><strong>lr</strong> 1e-6, <em>warm-up</em> of <code>20</code> steps<br>second line</p><p>next</p>');
  assert.equal(html('__bold__ and _it_'), '<p><strong>bold</strong> and <em>it</em></p>');
});

test('snake_case, lone stars and arithmetic stay text', () => {
  assert.equal(html('reward_max and group_size_max'), '<p>reward_max and group_size_max</p>');
  assert.equal(html('2 * 3 * 4 and a*'), '<p>2 * 3 * 4 and a*</p>');
  assert.equal(html('\\*not em\\*'), '<p>*not em*</p>');
});

test('code keeps its text verbatim, markup included', () => {
  assert.equal(html('`<b>**x**</b>`'), '<p><code>&lt;b&gt;**x**&lt;/b&gt;</code></p>');
  assert.equal(html('```\n<script>alert(1)</script>\n  *x*\n```'),
    '<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\n  *x*</code></pre>');
});

test('lists and headings', () => {
  assert.equal(html('# Plan\n- one\n- **two**\n  continued\n\n1. a\n2. b'),
    '<h3>Plan</h3><ul><li>one</li><li><strong>two</strong><br>continued</li></ul><ol><li>a</li><li>b</li></ol>');
});

test('links: http(s) only, anything else stays text', () => {
  assert.equal(html('[W&B](https://wandb.ai/x?a=1&b=2)'),
    '<p><a href="https://wandb.ai/x?a=1&amp;b=2">W&amp;B</a></p>');
  assert.equal(html('see https://example.com/run/(3).'),
    '<p>see <a href="https://example.com/run/(3">https://example.com/run/(3</a>).</p>');
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,<b>', '//evil.example',
    'vbscript:x', ' java\tscript:alert(1)']) {
    const out = html(`[click](${bad})`);
    assert.ok(!out.includes('<a'), `${bad} became a link: ${out}`);
    assert.ok(out.startsWith('<p>[click]('), out);
  }
  // A quote cannot leave the href: the link stops before it, the rest is text.
  assert.equal(html('[x](https://a.b/"onmouseover="x)'),
    '<p>[x](<a href="https://a.b/">https://a.b/</a>&quot;onmouseover=&quot;x)</p>');
});

test('nothing a user types becomes markup', () => {
  const hostile = '<img src=x onerror=alert(1)> <script>alert(2)</script> " \' &amp; <a href="javascript:x">y</a>';
  const out = html(hostile);
  assert.ok(!/<(img|script|a)\b/i.test(out), out);
  assert.ok(out.includes('&lt;img src=x onerror=alert(1)&gt;'));
  assert.ok(out.includes('&quot; &#39; &amp;amp;'));
  // Only the subset's tags appear, whatever the input.
  const tags = new Set(html('# h\n- [a](http://x) `c` *e* **s**\n\n```\nz\n```\np').match(/<\/?([a-z0-9]+)/g));
  for (const t of tags) assert.ok(/^<\/?(p|h[3-6]|ul|ol|li|pre|code|a|strong|em|br)$/.test(t), t);
});

test('bare URLs become links without their trailing punctuation', () => {
  assert.equal(html('logs at https://example.com/a_b, then'),
    '<p>logs at <a href="https://example.com/a_b">https://example.com/a_b</a>, then</p>');
  assert.equal(html('xhttps://example.com'), '<p>xhttps://example.com</p>');
});

test('empty and missing notes render nothing', () => {
  assert.deepEqual(parseMarkdown(''), []);
  assert.deepEqual(parseMarkdown(null), []);
  assert.deepEqual(parseMarkdown('\n \n'), []);
});

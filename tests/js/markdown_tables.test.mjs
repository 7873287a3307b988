// GitHub-style tables in run notes (core/markdown.js): header, alignment, rows, escaped pipes,
// and every cell's text escaped like any other text.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseMarkdown, tableCells, toHTML } from '../../static/js/core/markdown.js';

const html = (src) => toHTML(parseMarkdown(src));

test('a table with alignments renders its header and rows', () => {
  assert.equal(html('| a | b | c |\n|:--|--:|:-:|\n| 1 | **2** | `3` |'),
    '<table><thead><tr><th class="md-align-left">a</th><th class="md-align-right">b</th>'
    + '<th class="md-align-center">c</th></tr></thead><tbody><tr><td class="md-align-left">1</td>'
    + '<td class="md-align-right"><strong>2</strong></td><td class="md-align-center"><code>3</code></td></tr></tbody></table>');
});

test('outer pipes are optional, short rows are padded, an escaped pipe stays in its cell', () => {
  assert.equal(html('a | b\n--- | ---\nx \\| y\n'),
    '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>x | y</td><td></td></tr></tbody></table>');
  assert.deepEqual(tableCells('| 1 | 2 |'), ['1', '2']);
});

test('markup in a cell is text, and a javascript: link stays text', () => {
  const out = html('| x |\n|---|\n| <script>alert(1)</script> [a](javascript:alert(1)) |');
  assert.ok(!out.includes('<script>'));
  assert.ok(out.includes('&lt;script&gt;alert(1)&lt;/script&gt; [a](javascript:alert(1))'));
  assert.ok(!out.includes('href'));
});

test('no delimiter row, or one of another width, is no table', () => {
  assert.equal(html('a | b\nc | d'), '<p>a | b<br>c | d</p>');
  assert.equal(html('a | b\n|---|'), '<p>a | b<br>|---|</p>');
  assert.equal(html('text\n\n---'), '<p>text</p><p>---</p>');
});

test('a table ends at a blank line; text before it stays a paragraph', () => {
  assert.equal(html('intro\n| h |\n|---|\n| r |\n\nafter'),
    '<p>intro</p><table><thead><tr><th>h</th></tr></thead><tbody><tr><td>r</td></tr></tbody></table><p>after</p>');
});

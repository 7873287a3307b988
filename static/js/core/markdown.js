// @ts-check
// Run notes as markdown, rendered safely (no HTML passes through). A small subset: paragraphs (a single line
// break is kept), headings, `-` / `1.` lists, fenced code blocks, GitHub-style tables (a header
// row, a `|---|:--:|` delimiter row giving each column's alignment, then rows; `\|` is a pipe
// inside a cell), **strong**, *emphasis*, `code` and [links](https://…) whose target is http(s)
// only; anything else stays as text.
//
// Safe by construction: the parser builds a tree of the tags above (strings are text), and
// the renderer makes DOM nodes with createElement / createTextNode only (never innerHTML), so
// no markup a user typed can reach the page. `toHTML` (for tests) escapes every text.

const ESCAPABLE = '\\`*_[]()#+-.!>';
// A link's URL: no space, quote or angle bracket, and no control character (they end it).
// eslint-disable-next-line no-control-regex -- the control characters are what it refuses
const URL_RE = /^https?:\/\/[^\s<>"'`\\\u0000-\u001f\u007f]+$/i;
// A bare URL in text becomes a link; trailing punctuation stays text.
const AUTOLINK_RE = /^https?:\/\/[^\s<>"'`]*[^\s<>"'`.,;:!?)\]]/i;
const WORD_RE = /[\p{L}\p{N}]/u;
// A table's delimiter row: cells of dashes, with a colon at either end for the alignment.
const DELIMITER_RE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
const ALIGNS = new Set(['left', 'right', 'center']);

/** The cells of a table row: split at unescaped pipes, outer pipes dropped, `\|` a pipe. */
export function tableCells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cell = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && s[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (s[i] === '|') {
      cells.push(cell.trim());
      cell = '';
    } else cell += s[i];
  }
  cells.push(cell.trim());
  return cells;
}

/** Each column's alignment from the delimiter row: 'left', 'right', 'center' or null. */
function alignments(line) {
  return tableCells(line).map((c) => {
    const left = c.startsWith(':');
    const right = c.endsWith(':');
    return left && right ? 'center' : right ? 'right' : left ? 'left' : null;
  });
}

/** The table starting at lines[i] (a header row then a delimiter row), or null: {block, end}. */
function table(lines, i) {
  const head = lines[i];
  const delimiter = lines[i + 1];
  if (!head.includes('|') || delimiter === undefined || !DELIMITER_RE.test(delimiter)) return null;
  const names = tableCells(head);
  const aligns = alignments(delimiter);
  if (names.length !== aligns.length) return null;
  const row = (cells, tag) => ({ tag: 'tr', children: aligns.map((align, c) => ({ tag, align, text: cells[c] ?? '' })) });
  const body = [];
  let j = i + 2;
  for (; j < lines.length && lines[j].trim() && lines[j].includes('|'); j++) body.push(row(tableCells(lines[j]), 'td'));
  const children = [{ tag: 'thead', children: [row(names, 'th')] }];
  if (body.length) children.push({ tag: 'tbody', children: body });
  return { block: { tag: 'table', children }, end: j - 1 };
}

/** The block tree of `src`: [{tag: 'p' | 'h3'… | 'ul' | 'ol' | 'pre', children}]. */
export function parseMarkdown(src) {
  const lines = String(src ?? '').replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let para = null;
  let list = null;
  const end = () => { para = null; list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^ {0,3}(```|~~~)/.exec(line);
    if (fence) {
      end();
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      blocks.push({ tag: 'pre', children: [{ tag: 'code', children: [body.join('\n')] }] });
      continue;
    }
    if (!line.trim()) { end(); continue; }
    const found = table(lines, i);
    if (found) {
      end();
      blocks.push(found.block);
      i = found.end;
      continue;
    }
    const heading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      end();
      blocks.push({ tag: `h${Math.min(6, heading[1].length + 2)}`, children: parseInline(heading[2]) });
      continue;
    }
    const item = /^\s*(?:([-*+])|(\d{1,9})[.)])\s+(.*)$/.exec(line);
    if (item) {
      const tag = item[1] ? 'ul' : 'ol';
      if (!list || list.tag !== tag) {
        para = null;
        list = { tag, children: [] };
        blocks.push(list);
      }
      list.children.push({ tag: 'li', text: item[3] });
      continue;
    }
    if (list && /^\s+\S/.test(line)) { // a continuation of the last item
      list.children.at(-1).text += `\n${line.trim()}`;
      continue;
    }
    list = null;
    if (para) para.text += `\n${line}`;
    else {
      para = { tag: 'p', text: line };
      blocks.push(para);
    }
  }
  return blocks.map(inlineBlock);
}

function inlineBlock(block) {
  if (block.tag === 'p') return { tag: 'p', children: parseInline(block.text.trim()) };
  if (block.tag === 'table') {
    const cell = ({ tag, align, text }) => ({ tag, align, children: parseInline(text) });
    return { tag: 'table', children: block.children.map((part) => ({ tag: part.tag,
      children: part.children.map((tr) => ({ tag: 'tr', children: tr.children.map(cell) })) })) };
  }
  if (block.tag === 'ul' || block.tag === 'ol') {
    return { tag: block.tag, children: block.children.map((li) => ({ tag: 'li', children: parseInline(li.text) })) };
  }
  return block;
}

/** Inline nodes of one block's text: strings, and {tag, children[, href]} for the subset. */
export function parseInline(s) {
  const out = [];
  let text = '';
  const flush = () => {
    if (text) out.push(text);
    text = '';
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    const found = c === '\\' ? null : inlineAt(s, i);
    if (found) {
      flush();
      out.push(...found.nodes);
      i = found.end;
    } else if (c === '\\' && ESCAPABLE.includes(s[i + 1] ?? '')) {
      text += s[i + 1];
      i += 2;
    } else if (c === '\n') {
      flush();
      out.push({ tag: 'br', children: [] });
      i += 1;
    } else {
      text += c;
      i += 1;
    }
  }
  flush();
  return out;
}

/** The inline element starting at s[i], if one does: {nodes, end}. */
function inlineAt(s, i) {
  const c = s[i];
  if (c === '`') return codeSpan(s, i);
  if (c === '[') return link(s, i);
  if (c === '*' || c === '_') return emphasis(s, i);
  if ((c === 'h' || c === 'H') && !WORD_RE.test(s[i - 1] ?? '')) {
    const m = AUTOLINK_RE.exec(s.slice(i));
    if (m && URL_RE.test(m[0])) return { nodes: [{ tag: 'a', href: m[0], children: [m[0]] }], end: i + m[0].length };
  }
  return null;
}

function codeSpan(s, i) {
  let n = 0;
  while (s[i + n] === '`') n++;
  const fence = '`'.repeat(n);
  let j = s.indexOf(fence, i + n);
  while (j !== -1 && s[j + n] === '`') j = s.indexOf(fence, j + n + 1);
  if (j === -1 || j === i + n) return null;
  const body = s.slice(i + n, j).replace(/\n/g, ' ');
  const trimmed = /^ .*\S.* $/.test(body) ? body.slice(1, -1) : body;
  return { nodes: [{ tag: 'code', children: [trimmed] }], end: j + n };
}

function link(s, i) {
  const close = matching(s, i, '[', ']');
  if (close === -1 || s[close + 1] !== '(') return null;
  const paren = matching(s, close + 1, '(', ')');
  if (paren === -1) return null;
  const href = s.slice(close + 2, paren).trim();
  const label = s.slice(i + 1, close);
  if (!URL_RE.test(href) || !label.trim()) return null; // not http(s): stays text
  const children = parseInline(label).flatMap((n) => (typeof n !== 'string' && n.tag === 'a' ? n.children : [n]));
  return { nodes: [{ tag: 'a', href, children }], end: paren + 1 };
}

/** Index of the bracket closing the one at s[i] (nested pairs balanced), or -1. */
function matching(s, i, open, close) {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    if (s[j] === '\\') j++;
    else if (s[j] === open) depth++;
    else if (s[j] === close && --depth === 0) return j;
    else if (s[j] === '\n' && s[j + 1] === '\n') return -1;
  }
  return -1;
}

function emphasis(s, i) {
  const c = s[i];
  const n = s[i + 1] === c ? 2 : 1;
  const delim = c.repeat(n);
  const inner = i + n;
  // `snake_case` and `2*3*4` are no emphasis: `_` must not sit inside a word; the text
  // just inside a delimiter is not a space.
  if (!s[inner] || /\s/.test(s[inner])) return null;
  if (c === '_' && WORD_RE.test(s[i - 1] ?? '')) return null;
  for (let j = s.indexOf(delim, inner + 1); j !== -1; j = s.indexOf(delim, j + 1)) {
    if (n === 1 && (s[j + 1] === c || s[j - 1] === c)) continue; // part of a `**`
    if (/\s/.test(s[j - 1])) continue;
    if (c === '_' && WORD_RE.test(s[j + n] ?? '')) continue;
    return { nodes: [{ tag: n === 2 ? 'strong' : 'em', children: parseInline(s.slice(inner, j)) }], end: j + n };
  }
  return null;
}

/** A DocumentFragment of the notes: only the subset's elements, text as text nodes. */
export function renderMarkdown(src, doc = document) {
  const frag = doc.createDocumentFragment();
  for (const node of parseMarkdown(src)) frag.append(toNode(node, doc));
  return frag;
}

function toNode(node, doc) {
  if (typeof node === 'string') return doc.createTextNode(node);
  const el = doc.createElement(node.tag);
  if (node.tag === 'a') {
    el.setAttribute('href', node.href);
    el.setAttribute('rel', 'noopener noreferrer nofollow');
    el.setAttribute('target', '_blank');
  }
  if (ALIGNS.has(node.align)) el.className = `md-align-${node.align}`; // one of three, never the text's
  for (const child of node.children) el.append(toNode(child, doc));
  return el;
}

const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escape = (t) => String(t).replace(/[&<>"']/g, (ch) => ENTITIES[ch]);

/** The tree as HTML text, every string escaped (what renderMarkdown builds, for tests). */
export function toHTML(nodes) {
  return nodes.map((n) => {
    if (typeof n === 'string') return escape(n);
    if (n.tag === 'br') return '<br>';
    const attrs = n.tag === 'a' ? ` href="${escape(n.href)}"`
      : ALIGNS.has(n.align) ? ` class="md-align-${n.align}"` : '';
    return `<${n.tag}${attrs}>${toHTML(n.children)}</${n.tag}>`;
  }).join('');
}

// DOM helpers for the admin UI.
//
// Every value that came from a model, a client or a tool is put on the page
// as text: h() turns string children into text nodes and sets attributes
// with setAttribute, never markup. Nothing in this UI parses HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(el, c);
    return;
  }
  if (child instanceof Node) {
    el.appendChild(child);
    return;
  }
  el.appendChild(document.createTextNode(String(child)));
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (k === 'dataset') {
      for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
    } else if (k === 'value') {
      el.value = v;
    } else if (k === 'checked' || k === 'disabled' || k === 'selected' || k === 'required' ||
               k === 'hidden' || k === 'open' || k === 'readOnly') {
      el[k] = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

// h('div', {class: 'x', onClick: fn}, 'text', child, [more]) -> Element
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// An internal link: only ever "#/..." routes built from encoded parts.
export function route(...parts) {
  return '#/' + parts.map((p) => encodeURIComponent(p)).join('/');
}

// A thread's page: thread ids are unique per owner, so the owner is part
// of the address.
export function threadRoute(id, owner, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ owner, ...params })) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return route('threads', id) + (s ? `?${s}` : '');
}

export function routeQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return '#/' + path + (s ? '?' + s : '');
}

// ----------------------------------------------------------- formatting

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}

// Compact, for table cells: no year, seconds kept (audit rows need them).
export function fmtShort(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function fmtDuration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60 ? `${s % 60} s` : ''}`.trim();
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr} h ${m % 60 ? `${m % 60} min` : ''}`.trim();
  return `${Math.floor(hr / 24)} d`;
}

export function fmtAgo(iso, now = Date.now()) {
  if (!iso) return '—';
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const ms = now - t;
  if (ms < 5000) return 'just now';
  return `${fmtDuration(ms)} ago`;
}

// A <time> element showing a relative age that the ticker keeps current.
export function ago(iso) {
  const el = h('time', { datetime: iso || '', title: fmtTime(iso), dataset: { ago: iso || '' } }, fmtAgo(iso));
  return el;
}

// Updates every [data-ago] and [data-until] element once a second.
let ticker = null;
export function startTicker() {
  if (ticker) return;
  ticker = setInterval(() => {
    const now = Date.now();
    for (const el of document.querySelectorAll('[data-ago]')) {
      if (el.dataset.ago) el.textContent = fmtAgo(el.dataset.ago, now);
    }
    for (const el of document.querySelectorAll('[data-until]')) {
      const left = new Date(el.dataset.until).getTime() - now;
      el.textContent = left > 0 ? `${fmtDuration(left)} left` : 'expired';
      el.className = `badge ${untilClass(left)}`;
      el.dispatchEvent(new CustomEvent('tick', { detail: left }));
    }
  }, 1000);
}

function untilClass(left) {
  return left <= 0 ? 'bad' : left < 5 * 60 * 1000 ? 'warn' : 'info';
}

export function until(iso) {
  const left = new Date(iso).getTime() - Date.now();
  return h('span', { class: ['badge', untilClass(left)], title: `expires ${fmtTime(iso)}`, dataset: { until: iso } },
    left > 0 ? `${fmtDuration(left)} left` : 'expired');
}

export function shortId(id) {
  if (!id) return '—';
  const s = String(id);
  return s.length > 14 ? `${s.slice(0, 12)}…` : s;
}

// Text cut to a width with the whole value (bounded) as a tooltip.
export function trunc(text, cls) {
  const s = text === null || text === undefined ? '—' : String(text);
  return h('span', { class: ['trunc', cls], title: s.length > 300 ? `${s.slice(0, 300)}…` : s }, s);
}

// JSON pretty-printed for people.
export function pretty(value) {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

const PREVIEW_CHARS = 1500;
const PREVIEW_LINES = 14;

// Characters that do not show as themselves: controls other than tab and
// newline, format characters (bidirectional overrides and isolates,
// zero-width characters, tag characters) and the line and paragraph
// separators. Shown as they are, they make a value read differently from
// what it is: a right-to-left override reverses what follows it.
const HIDDEN_RE = /(?![\t\n])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

// text as parts for h(): each character that does not show is a visible
// mark, ⟨U+202E⟩, instead of itself.
function revealed(text) {
  const parts = [];
  let at = 0;
  for (const m of text.matchAll(HIDDEN_RE)) {
    if (m.index > at) parts.push(text.slice(at, m.index));
    const cp = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    parts.push(h('span', { class: 'hidden-char', title: 'A character that does not show on screen' }, `⟨U+${cp}⟩`));
    at = m.index + m[0].length;
  }
  if (at < text.length) parts.push(text.slice(at));
  return parts;
}

function setText(el, text, reveal) {
  if (reveal) replace(el, revealed(text));
  else el.textContent = text;
}

// How many characters that do not show the strings in value hold (object
// keys too), to a bounded depth.
export function countHidden(value, depth = 0) {
  if (typeof value === 'string') return (value.match(HIDDEN_RE) || []).length;
  if (!value || typeof value !== 'object' || depth > 64) return 0;
  let n = 0;
  for (const [k, v] of Object.entries(value)) {
    if (!Array.isArray(value)) n += countHidden(k);
    n += countHidden(v, depth + 1);
  }
  return n;
}

// A long value (arguments, results, messages): the start is shown in a
// bounded box, with a button to show all of it. Never breaks the layout.
// reveal: characters that do not show are marked (for what a tool gets).
export function longValue(value, { label = 'value', chars = PREVIEW_CHARS, lines = PREVIEW_LINES, reveal = false } = {}) {
  const text = pretty(value);
  let cut = text.length > chars ? chars : -1;
  let nl = -1;
  for (let i = 0, n = 0; i < Math.min(text.length, chars); i++) {
    if (text.charCodeAt(i) === 10 && ++n >= lines) { nl = i; break; }
  }
  if (nl >= 0 && (cut < 0 || nl < cut)) cut = nl;
  const pre = h('pre', { class: 'value', tabindex: '0', 'aria-label': label });
  if (cut < 0) {
    setText(pre, text, reveal);
    return h('div', { class: 'longval' }, pre);
  }
  setText(pre, `${text.slice(0, cut)}\n…`, reveal);
  const size = fmtBytes(new TextEncoder().encode(text).length);
  const btn = h('button', { type: 'button', class: 'link more', 'aria-expanded': 'false' }, `Show all (${size})`);
  btn.addEventListener('click', () => {
    const open = btn.getAttribute('aria-expanded') === 'true';
    setText(pre, open ? `${text.slice(0, cut)}\n…` : text, reveal);
    pre.classList.toggle('expanded', !open);
    btn.setAttribute('aria-expanded', String(!open));
    btn.textContent = open ? `Show all (${size})` : 'Show less';
  });
  return h('div', { class: 'longval' }, pre, btn);
}

// Tool arguments for a reviewer: one row per argument, strings as the text
// they are, with the exact JSON a click away. Arguments the audit log kept
// only a hash of say so.
export function argsView(args, toolName = 'the tool') {
  if (args && typeof args === 'object' && args.truncated === true && typeof args.bytes === 'number') {
    return h('div', { class: 'notice warn' },
      `The arguments were ${args.bytes} bytes, more than the audit log keeps (audit.max_args_bytes); `,
      'only their hash is stored: ', h('code', null, String(args.blake2b || '')));
  }
  const hidden = countHidden(args);
  const note = hidden ? h('div', { class: 'notice warn' },
    `${hidden} ${hidden === 1 ? 'character in these arguments does' : 'characters in these arguments do'} not show on screen `,
    '(control, bidirectional or zero-width characters): each is marked ', h('span', { class: 'hidden-char' }, '⟨U+…⟩'),
    ' where it is. The tool gets them as they are.') : null;
  if (args && typeof args === 'object' && !Array.isArray(args)) {
    const keys = Object.keys(args);
    if (keys.length > 0 && keys.length <= 30) {
      return h('div', null,
        note,
        h('dl', { class: 'kv args' }, keys.map((k) => [
          h('dt', { class: 'mono' }, revealed(k)),
          h('dd', null, longValue(args[k], { label: `${toolName} argument ${k}`, reveal: true }))])),
        h('details', { class: 'raw' }, h('summary', null, 'As JSON'),
          longValue(args, { label: `arguments of ${toolName} as JSON`, reveal: true })));
    }
  }
  return h('div', null, note, longValue(args, { label: `arguments of ${toolName}`, reveal: true }));
}

// ----------------------------------------------------------- messages

// One CoreMessage's content: a string, or parts (text, tool-call, tool-result).
export function messageContent(content) {
  if (typeof content === 'string') {
    return content.length > PREVIEW_CHARS || content.split('\n').length > PREVIEW_LINES
      ? longValue(content, { label: 'message text' })
      : h('div', { class: 'text' }, content);
  }
  if (!Array.isArray(content)) return longValue(content, { label: 'message content' });
  return content.map((p) => {
    if (p && p.type === 'text') return h('div', { class: 'part' }, messageContent(String(p.text ?? '')));
    if (p && p.type === 'tool-call') {
      return h('div', { class: 'part' },
        h('div', { class: 'label' }, 'calls ', h('code', null, String(p.toolName ?? '?')), ' ',
          h('span', { class: 'mono' }, shortId(p.toolCallId))),
        longValue(p.args, { label: `arguments of ${p.toolName}`, lines: 8, chars: 800, reveal: true }));
    }
    if (p && p.type === 'tool-result') {
      return h('div', { class: 'part' },
        h('div', { class: 'label' }, 'result of ', h('code', null, String(p.toolName ?? '?')),
          p.isError ? h('span', { class: 'badge bad' }, 'error') : null),
        longValue(p.result, { label: `result of ${p.toolName}`, lines: 8, chars: 800 }));
    }
    return h('div', { class: 'part' }, longValue(p, { label: 'message part', lines: 8, chars: 800 }));
  });
}

export function message(m) {
  const role = String(m.role || '?');
  return h('div', { class: ['msg', role] },
    h('div', { class: 'who' }, role, m.createdAt ? h('span', null, ' · ', ago(m.createdAt)) : null),
    messageContent(m.content));
}

// --------------------------------------------------------------- toasts

export function toast(text, kind) {
  const box = document.getElementById('toasts');
  if (!box) return;
  const t = h('div', { class: ['toast', kind] }, text);
  box.appendChild(t);
  setTimeout(() => t.remove(), kind === 'bad' ? 8000 : 4000);
}

// --------------------------------------------------------------- dialogs

// Shows dlg as a modal dialog (appended to the page, removed when it
// closes). It belongs to the page it was opened on: navigating away (a
// link, the browser's Back or Forward) closes it.
export function openModal(dlg) {
  const close = () => { if (dlg.open) dlg.close(); };
  window.addEventListener('hashchange', close);
  window.addEventListener('popstate', close);
  dlg.addEventListener('close', () => {
    window.removeEventListener('hashchange', close);
    window.removeEventListener('popstate', close);
    dlg.remove();
  });
  document.body.appendChild(dlg);
  dlg.showModal();
  return dlg;
}

// A modal confirmation; resolves true when confirmed.
export function confirmDialog({ title, body, confirm = 'Confirm', danger = false }) {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'button', class: danger ? 'danger' : 'primary' }, confirm);
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const heading = h('h2', { id: 'confirm-title' }, title);
    const dlg = h('dialog', { class: 'small', 'aria-labelledby': 'confirm-title' },
      h('div', { class: 'dialog-head' }, heading),
      h('div', { class: 'dialog-body' }, body),
      h('div', { class: 'dialog-foot' }, cancel, ok));
    let result = false;
    ok.addEventListener('click', () => { result = true; dlg.close(); });
    cancel.addEventListener('click', () => dlg.close());
    dlg.addEventListener('close', () => resolve(result));
    openModal(dlg);
    cancel.focus();
  });
}

// Keyboard for a role=tablist: arrows and Home/End move between tabs.
export function tablist(list) {
  list.addEventListener('keydown', (ev) => {
    const tabs = [...list.querySelectorAll('[role="tab"]')];
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    let j = -1;
    if (ev.key === 'ArrowRight') j = (i + 1) % tabs.length;
    else if (ev.key === 'ArrowLeft') j = (i - 1 + tabs.length) % tabs.length;
    else if (ev.key === 'Home') j = 0;
    else if (ev.key === 'End') j = tabs.length - 1;
    if (j >= 0) {
      ev.preventDefault();
      tabs[j].focus();
      tabs[j].click();
    }
  });
}

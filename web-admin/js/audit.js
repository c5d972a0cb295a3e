// Audit log: filters, a paged table newest first, the full detail of a row,
// exports of the current filter, and the hash chain's status.

import { api, withQuery } from './api.js';
import {
  argsView, fmtShort, fmtTime, h, longValue, openModal, replace, routeQuery, shortId, threadRoute, trunc,
} from './dom.js';

const FILTERS = ['from', 'to', 'key', 'agent', 'thread', 'run', 'tool', 'event', 'outcome', 'owner'];
const PAGE = 50;

// Cursors of the pages before the current one, per filter.
let pages = { filter: '', stack: [] };
// The last verification, kept across visits (a full check reads every row).
let lastChain = null;

export function eventClass(ev) {
  if (['executed', 'allowed', 'approved', 'admin_login', 'client_result', 'key_created'].includes(ev)) return 'ok';
  if (['denied', 'failed', 'interrupted', 'rate_limited', 'expired', 'admin_login_failed', 'key_revoked',
    'audit_check_failed'].includes(ev)) return 'bad';
  if (ev === 'approval_requested') return 'warn';
  return 'info';
}

function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(/^\d+$/.test(iso) ? Number(iso) : iso);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function fromLocalInput(v) {
  if (!v) return '';
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

function field(id, label, control, hint) {
  return h('div', { class: 'field' }, h('label', { for: id }, label), control,
    hint ? h('span', { class: 'hint' }, hint) : null);
}

function select(id, current, options, anyLabel) {
  const s = h('select', { id, name: id },
    h('option', { value: '' }, anyLabel),
    options.map(([v, label]) => h('option', { value: v, selected: v === current }, label)));
  if (current && !options.some(([v]) => v === current)) {
    s.appendChild(h('option', { value: current, selected: true }, current));
  }
  return s;
}

function chainView(ctx) {
  const box = h('div', { class: 'card chain', role: 'status', 'aria-live': 'polite' });
  const btn = h('button', { type: 'button', class: 'small' }, 'Re-verify');
  const show = (v) => {
    box.classList.toggle('ok', v.ok);
    box.classList.toggle('bad', !v.ok);
    const lines = v.ok
      ? [h('strong', null, v.rows ? `Chain verified up to row ${v.lastSeq}` : 'The audit log is empty'),
        h('div', { class: 'sub' },
          v.signedSeq
            ? `Last signed checkpoint at row ${v.signedSeq}, ${fmtTime(v.signedAt)}`
            : 'No signed checkpoint yet',
          v.unsignedRows ? ` · ${v.unsignedRows} ${v.unsignedRows === 1 ? 'row' : 'rows'} since` : '',
          ` · ${v.rows} rows checked in ${Number(v.seconds || 0).toFixed(2)} s`,
          lastChain ? ` at ${fmtShort(lastChain.at)}` : '')]
      : [h('strong', null, `Chain broken at row ${v.badSeq}`), h('div', null, v.message)];
    replace(box,
      h('div', { class: 'state' },
        h('span', { class: 'icon', 'aria-hidden': 'true' }, v.ok ? '✓' : '✗'),
        h('div', null, lines)),
      btn);
  };
  const verify = async () => {
    btn.disabled = true;
    btn.textContent = 'Verifying…';
    try {
      const v = await api('/api/audit/verify');
      lastChain = { at: new Date().toISOString(), v };
      show(v);
    } catch (err) {
      replace(box, h('div', { class: 'state' }, `Verification failed: ${err.message}`), btn);
    } finally {
      btn.disabled = false;
      btn.textContent = 'Re-verify';
    }
  };
  btn.addEventListener('click', verify);
  if (lastChain) show(lastChain.v);
  else {
    replace(box, h('div', { class: 'state' }, 'Verifying the hash chain…'), btn);
    verify();
  }
  return box;
}

export function rowDetail(row, ctx) {
  const close = h('button', { type: 'button', class: 'small' }, 'Close');
  const title = h('h2', { id: 'audit-detail-title' }, `Row ${row.seq} · ${row.event}`);
  let detail = row.detail;
  let result = null;
  if (detail && typeof detail === 'object' && typeof detail.result === 'string') {
    try { result = JSON.parse(detail.result); } catch { result = detail.result; }
    detail = { ...detail };
    delete detail.result;
  }
  const kv = [
    ['Time', fmtTime(row.ts)], ['Event', row.event], ['Outcome', row.outcome],
    ['Tool', row.toolName], ['Source', row.source], ['Agent', row.agentId],
    ['Key', row.keyId ? `${ctx.keyLabel(row.keyId)}` : null], ['Owner', row.owner],
    ['Admin', row.adminUser], ['Thread', row.threadId], ['Run', row.runId],
    ['Tool call', row.toolCallId], ['Duration', row.durationMs !== null && row.durationMs !== undefined ? `${row.durationMs} ms` : null],
    ['Reason', row.reason], ['Error', row.error],
  ].filter(([, v]) => v !== null && v !== undefined && v !== '');
  const links = [];
  if (row.runId) links.push(h('a', { href: routeQuery('audit', { run: row.runId }) }, 'All rows of this run'));
  if (row.threadId) links.push(h('a', { href: threadRoute(row.threadId, row.owner) }, 'Open the thread'));
  const dlg = h('dialog', { 'aria-labelledby': 'audit-detail-title' },
    h('div', { class: 'dialog-head' }, title, close),
    h('div', { class: 'dialog-body' },
      h('dl', { class: 'kv' }, kv.map(([k, v]) => [h('dt', null, k), h('dd', null, String(v))])),
      row.args !== null && row.args !== undefined ? h('section', null, h('h3', null, 'Arguments'), argsView(row.args, row.toolName || 'the call')) : null,
      result !== null ? h('section', null, h('h3', null, 'Result summary'), longValue(result, { label: 'result summary' })) : null,
      detail && Object.keys(detail).length ? h('section', null, h('h3', null, 'Detail'), longValue(detail, { label: 'detail' })) : null,
      h('section', null, h('h3', null, 'Hash chain'),
        h('dl', { class: 'kv' },
          h('dt', null, 'Previous hash'), h('dd', { class: 'mono' }, row.prevHash || '—'),
          h('dt', null, 'Hash'), h('dd', { class: 'mono' }, row.hash || '—'))),
      links.length ? h('p', { class: 'toolbar' }, links) : null));
  close.addEventListener('click', () => dlg.close());
  // a link to where the page already is changes nothing: close anyway
  for (const a of links) a.addEventListener('click', () => dlg.close());
  openModal(dlg);
  close.focus();
}

// At most two lines of a long text, all of it (bounded) as a tooltip.
function clamp(text) {
  const s = String(text);
  return h('span', { class: 'clamp', title: s.length > 300 ? `${s.slice(0, 300)}…` : s }, s);
}

// A key by name and prefix: two keys may share a name. The full id is in
// the tooltip.
function keyCell(ctx, id) {
  const k = ctx.keyCache && ctx.keyCache.get(id);
  if (!k) return h('span', { class: 'trunc mono', title: id }, shortId(id));
  return h('span', { class: 'key-label', title: `${k.name} · ${k.prefix}… · ${id}` },
    h('span', { class: 'trunc' }, k.name), ' ', h('span', { class: 'mono sub' }, `${k.prefix}…`));
}

// A table of audit rows (also used by the thread page).
export function rowsTable(rows, ctx, { caption, compact = false } = {}) {
  const tbody = h('tbody');
  for (const r of rows) {
    const open = h('button', { type: 'button', class: 'link', 'aria-label': `Row ${r.seq}: ${r.event} details` }, String(r.seq));
    open.addEventListener('click', (ev) => { ev.stopPropagation(); rowDetail(r, ctx); });
    const tr = h('tr', { class: 'clickable', dataset: { seq: String(r.seq) } },
      h('td', { class: 'num' }, open),
      h('td', { class: 'nowrap', title: fmtTime(r.ts) }, fmtShort(r.ts)),
      h('td', null, h('span', { class: `badge ${eventClass(r.event)}` }, r.event)),
      h('td', null, r.outcome || '—'),
      h('td', null, r.toolName ? h('code', null, trunc(r.toolName)) : '—'),
      compact ? null : h('td', null, r.agentId ? trunc(r.agentId) : '—'),
      compact ? null : h('td', null, r.keyId ? keyCell(ctx, r.keyId) : r.adminUser ? `admin ${r.adminUser}` : '—'),
      compact ? null : h('td', { class: 'mono' }, r.runId ? shortId(r.runId) : '—'),
      h('td', { class: 'hide-narrow' }, r.reason || r.error ? clamp(r.error || r.reason) : '—'));
    tr.addEventListener('click', () => rowDetail(r, ctx));
    tbody.appendChild(tr);
  }
  const heads = ['#', 'Time', 'Event', 'Outcome', 'Tool']
    .concat(compact ? [] : ['Agent', 'Key', 'Run']).concat(['Reason / error']);
  return h('div', { class: 'table-wrap' },
    h('table', null,
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', null, h('tr', null, heads.map((t, i) => h('th', { scope: 'col', class: i === heads.length - 1 ? 'hide-narrow' : null }, t)))),
      tbody));
}

export async function render(main, ctx, { params }) {
  const cfg = await ctx.config().catch(() => ({ agents: [], tools: [] }));
  const keys = await ctx.keys().catch(() => new Map());
  // the values the gateway knows: its events and outcomes, and the tools
  // configured or named in the log
  const known = await api('/api/audit/values').catch(() => ({ events: [], outcomes: [], tools: [] }));
  const pairs = (list) => list.map((v) => [v, v]);
  const f = {};
  for (const k of FILTERS) f[k] = params.get(k) || '';
  const cursor = params.get('cursor') || '';
  const sig = JSON.stringify(f);
  if (pages.filter !== sig) pages = { filter: sig, stack: [] };
  if (!cursor) pages.stack = [];

  const inputs = {
    from: h('input', { id: 'f-from', type: 'datetime-local', value: toLocalInput(f.from) }),
    to: h('input', { id: 'f-to', type: 'datetime-local', value: toLocalInput(f.to) }),
    key: select('f-key', f.key, [...keys.values()].map((k) => [k.id, `${k.name} (${k.prefix}…)`]), 'Any key'),
    agent: select('f-agent', f.agent, (cfg.agents || []).map((a) => [a.id, a.id]), 'Any agent'),
    thread: h('input', { id: 'f-thread', value: f.thread, placeholder: 'thread id', spellcheck: 'false' }),
    run: h('input', { id: 'f-run', value: f.run, placeholder: 'run_…', spellcheck: 'false' }),
    owner: h('input', { id: 'f-owner', value: f.owner, placeholder: 'owner', spellcheck: 'false' }),
    tool: select('f-tool', f.tool, pairs(known.tools), 'Any tool'),
    event: select('f-event', f.event, pairs(known.events), 'Any event'),
    outcome: select('f-outcome', f.outcome, pairs(known.outcomes), 'Any outcome'),
  };
  const apply = (over = {}) => {
    const q = {};
    for (const k of FILTERS) q[k] = k === 'from' || k === 'to' ? fromLocalInput(inputs[k].value) : inputs[k].value.trim();
    Object.assign(q, over);
    location.hash = routeQuery('audit', q);
  };
  const quick = (label, ms) => h('button', { type: 'button', class: 'small', onClick: () => apply({ from: ms ? new Date(Date.now() - ms).toISOString() : '', to: '' }) }, label);
  const form = h('form', { class: 'filters', 'aria-label': 'Filter the audit log' },
    field('f-from', 'From', inputs.from), field('f-to', 'To', inputs.to),
    field('f-key', 'Key', inputs.key), field('f-agent', 'Agent', inputs.agent),
    field('f-tool', 'Tool', inputs.tool), field('f-event', 'Event', inputs.event),
    field('f-outcome', 'Outcome', inputs.outcome), field('f-thread', 'Thread', inputs.thread),
    field('f-run', 'Run', inputs.run), field('f-owner', 'Owner', inputs.owner),
    h('div', { class: 'quick' }, h('span', null, 'Time range:'),
      quick('Last hour', 3600e3), quick('Last 24 h', 86400e3), quick('Last 7 days', 7 * 86400e3), quick('All time', 0)),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Apply filters'),
      h('button', { type: 'button', onClick: () => { location.hash = '#/audit'; } }, 'Clear')));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); apply(); });

  const q = {};
  for (const k of FILTERS) if (f[k]) q[k] = f[k];
  const exportLink = (fmt, label) => h('a', { class: 'button small', href: withQuery('/api/audit/export', { format: fmt, ...q }), download: `gatehouse-audit.${fmt}` }, label);

  const results = h('div', null, h('p', { class: 'sub' }, 'Loading…'));
  replace(main,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Audit log'),
        h('p', { class: 'sub' }, 'Every tool decision, execution and admin action, newest first. Each row is chained to the one before it.')),
      h('div', { class: 'toolbar' }, exportLink('ndjson', 'Export NDJSON'), exportLink('csv', 'Export CSV'))),
    chainView(ctx), form, results);

  const r = await api(withQuery('/api/audit', { ...q, limit: PAGE, cursor }));
  await ctx.keysFor(r.rows.map((x) => x.keyId));
  const pager = h('div', { class: 'pager' },
    h('span', null, r.rows.length
      ? `Rows ${r.rows[0].seq} to ${r.rows[r.rows.length - 1].seq}${Object.keys(q).length ? ' matching the filter' : ''}`
      : ''),
    h('div', { class: 'toolbar' },
      cursor ? h('button', { type: 'button', class: 'small', onClick: () => { pages.stack = []; location.hash = routeQuery('audit', q); } }, 'Newest') : null,
      cursor ? h('button', { type: 'button', class: 'small', onClick: () => {
        const prev = pages.stack.pop() || '';
        location.hash = routeQuery('audit', { ...q, cursor: prev });
      } }, '← Newer') : null,
      r.nextCursor ? h('button', { type: 'button', class: 'small', onClick: () => {
        pages.stack.push(cursor);
        location.hash = routeQuery('audit', { ...q, cursor: r.nextCursor });
      } }, 'Older →') : null));
  replace(results, r.rows.length
    ? [rowsTable(r.rows, ctx, { caption: 'Audit rows, newest first' }), pager]
    : h('div', { class: 'empty' }, h('strong', null, 'No rows match'), 'Try a wider time range or fewer filters.'));
}

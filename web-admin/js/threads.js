// Threads of every owner, by agent and resource; a thread shows its
// messages (with the tool calls in them), its runs and its audit rows.

import { api, withQuery } from './api.js';
import { ago, fmtTime, h, message, replace, routeQuery, shortId, threadRoute, trunc } from './dom.js';
import { rowsTable } from './audit.js';

const PER_PAGE = 25;
const MSG_PAGE = 50;

export async function render(main, ctx, { params, match }) {
  if (match[0]) return detail(main, ctx, decodeURIComponent(match[0]), params);
  return list(main, ctx, params);
}

async function list(main, ctx, params) {
  const cfg = await ctx.config().catch(() => ({ agents: [] }));
  const f = {
    agentId: params.get('agentId') || '',
    resourceId: params.get('resourceId') || '',
    owner: params.get('owner') || '',
  };
  const page = Math.max(0, Number(params.get('page')) || 0);
  const agent = h('select', { id: 't-agent' }, h('option', { value: '' }, 'Any agent'),
    (cfg.agents || []).map((a) => h('option', { value: a.id, selected: a.id === f.agentId }, a.id)));
  const resource = h('input', { id: 't-resource', value: f.resourceId, spellcheck: 'false' });
  const owner = h('input', { id: 't-owner', value: f.owner, spellcheck: 'false' });
  const form = h('form', { class: 'filters', 'aria-label': 'Filter threads' },
    h('div', { class: 'field' }, h('label', { for: 't-agent' }, 'Agent'), agent),
    h('div', { class: 'field' }, h('label', { for: 't-resource' }, 'Resource'), resource),
    h('div', { class: 'field' }, h('label', { for: 't-owner' }, 'Owner'), owner),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Apply'),
      h('button', { type: 'button', onClick: () => { location.hash = '#/threads'; } }, 'Clear')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = routeQuery('threads', { agentId: agent.value, resourceId: resource.value.trim(), owner: owner.value.trim() });
  });
  const results = h('div', null, h('p', { class: 'sub' }, 'Loading…'));
  replace(main,
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Threads'),
      h('p', { class: 'sub' }, 'Conversations of every owner, most recently active first.'))),
    form, results);

  const r = await api(withQuery('/api/admin/threads', { ...f, page, perPage: PER_PAGE }));
  if (!r.threads.length) {
    replace(results, h('div', { class: 'empty' }, h('strong', null, 'No threads'), 'None match these filters.'));
    return null;
  }
  const rows = r.threads.map((t) => {
    const link = h('a', { href: threadRoute(t.id, t.owner) }, t.title ? trunc(t.title) : h('code', null, shortId(t.id)));
    const tr = h('tr', { class: 'clickable' },
      h('td', null, link),
      h('td', null, trunc(t.agentId)),
      h('td', null, trunc(t.resourceId)),
      h('td', null, trunc(t.owner)),
      h('td', { class: 'num' }, String(t.messageCount)),
      h('td', { class: 'nowrap' }, ago(t.updatedAt)));
    tr.addEventListener('click', (ev) => { if (ev.target !== link) location.hash = threadRoute(t.id, t.owner); });
    return tr;
  });
  const go = (p) => { location.hash = routeQuery('threads', { ...f, page: p || '' }); };
  replace(results,
    h('div', { class: 'table-wrap' }, h('table', null,
      h('caption', { class: 'visually-hidden' }, 'Threads'),
      h('thead', null, h('tr', null, ['Thread', 'Agent', 'Resource', 'Owner', 'Messages', 'Updated'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, rows))),
    h('div', { class: 'pager' },
      h('span', null, `${page * PER_PAGE + 1}–${page * PER_PAGE + r.threads.length} of ${r.total}`),
      h('div', { class: 'toolbar' },
        page > 0 ? h('button', { type: 'button', class: 'small', onClick: () => go(page - 1) }, '← Previous') : null,
        r.hasMore ? h('button', { type: 'button', class: 'small', onClick: () => go(page + 1) }, 'Next →') : null)));
  return null;
}

async function detail(main, ctx, id, params) {
  // thread ids are unique per owner: the owner comes with the id
  const owner = params.get('owner') || '';
  const t = await api(withQuery(`/api/admin/threads/${encodeURIComponent(id)}`, { owner }));
  await ctx.keysFor(t.runs.map((r) => r.keyId));
  const total = t.messageCount;
  const lastPage = Math.max(0, Math.ceil(total / MSG_PAGE) - 1);
  const page = params.has('page') ? Math.min(lastPage, Math.max(0, Number(params.get('page')) || 0)) : lastPage;
  const [msgs, audit] = await Promise.all([
    api(withQuery(`/api/admin/threads/${encodeURIComponent(id)}/messages`, { page, perPage: MSG_PAGE, owner: t.owner })),
    api(withQuery('/api/audit', { thread: id, owner: t.owner, limit: 100 })),
  ]);
  const go = (p) => { location.hash = threadRoute(id, t.owner, { page: p }); };
  replace(main,
    h('p', null, h('a', { href: '#/threads' }, '← All threads')),
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, t.title || 'Thread'),
      h('p', { class: 'sub mono' }, t.id))),
    h('div', { class: 'grid-2' },
      h('div', { class: 'card' },
        h('dl', { class: 'kv' },
          h('dt', null, 'Agent'), h('dd', null, t.agentId),
          h('dt', null, 'Resource'), h('dd', null, t.resourceId),
          h('dt', null, 'Owner'), h('dd', null, t.owner),
          h('dt', null, 'Created'), h('dd', null, fmtTime(t.createdAt)),
          h('dt', null, 'Updated'), h('dd', null, fmtTime(t.updatedAt)),
          h('dt', null, 'Messages'), h('dd', null, String(total)))),
      h('div', { class: 'card' },
        h('h3', null, 'Runs'),
        t.runs.length
          ? h('ul', { class: 'steps' }, t.runs.map((r) => h('li', { class: r.status === 'completed' ? 'done' : r.status === 'failed' ? 'failed' : '' },
            h('a', { href: routeQuery('audit', { run: r.id }) }, h('code', null, shortId(r.id))), ' ',
            h('span', { class: 'badge' }, r.status), ' ', ctx.keyLabel(r.keyId), ' · ', ago(r.createdAt))))
          : h('p', { class: 'sub' }, 'No runs.'))),
    h('h2', null, 'Messages'),
    msgs.messages.length ? h('div', { class: 'messages' }, msgs.messages.map(message)) : h('div', { class: 'empty' }, 'No messages.'),
    total > MSG_PAGE ? h('div', { class: 'pager' },
      h('span', null, `Messages ${page * MSG_PAGE + 1}–${page * MSG_PAGE + msgs.messages.length} of ${total}`),
      h('div', { class: 'toolbar' },
        page > 0 ? h('button', { type: 'button', class: 'small', onClick: () => go(page - 1) }, '← Earlier') : null,
        page < lastPage ? h('button', { type: 'button', class: 'small', onClick: () => go(page + 1) }, 'Later →') : null)) : null,
    h('div', { class: 'page-head' },
      h('h2', null, 'Audit rows'),
      h('a', { href: routeQuery('audit', { thread: id, owner: t.owner }) }, 'Open in the audit log')),
    audit.rows.length ? rowsTable(audit.rows, ctx, { caption: 'Audit rows of this thread', compact: true })
      : h('div', { class: 'empty' }, 'No audit rows for this thread.'),
    audit.nextCursor ? h('p', { class: 'sub' }, 'Showing the newest 100 rows.') : null);
  return null;
}

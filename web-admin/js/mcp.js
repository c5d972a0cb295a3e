// MCP servers: each upstream MCP server's state (connected, or failing with
// its last error and the next retry), its tools with their annotations and
// pins, and Accept / Reject for a tool whose definition changed after it
// was pinned (the tool is held, not offered, until an admin decides).
// Everything an upstream sent is rendered as text, never as HTML.

import { api } from './api.js';
import { ago, confirmDialog, fmtTime, h, longValue, replace, toast } from './dom.js';

const STATE_CLASS = { connected: 'ok', connecting: 'info', failing: 'bad', stopped: 'warn' };

function stateBadge(s) {
  return h('span', { class: ['badge', STATE_CLASS[s.state] || 'warn'] }, s.state);
}

function hints(a) {
  if (!a) return h('span', { class: 'sub' }, 'none');
  const names = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];
  const shown = names.filter((n) => typeof a[n] === 'boolean');
  if (!shown.length) return h('span', { class: 'sub' }, 'none');
  return h('span', { class: 'chips' }, shown.map((n) =>
    h('span', { class: ['chip', n === 'destructiveHint' && a[n] ? 'deny' : null] }, `${n}: ${a[n]}`)));
}

function pinBadge(t) {
  const s = t.pin.status;
  const cls = s === 'pinned' ? 'ok' : s === 'held' ? 'warn' : s === 'rejected' ? 'bad' : 'info';
  return h('span', { class: ['badge', cls], title: t.pin.digest ? `pinned digest ${t.pin.digest}` : '' }, s);
}

function serverCard(s, onOpen, open) {
  const retry = s.state === 'failing' && s.nextRetryAt
    ? h('div', { class: 'sub' }, `next retry ${ago(s.nextRetryAt)} (${fmtTime(s.nextRetryAt)})`) : null;
  const btn = h('button', { type: 'button', class: 'small', 'aria-expanded': String(open) },
    open ? 'Hide tools' : 'Show tools');
  btn.addEventListener('click', () => onOpen(s.name));
  return h('article', { class: 'card', 'aria-label': `MCP server ${s.name}` },
    h('h3', null, s.name, ' ', stateBadge(s), ' ',
      h('span', { class: 'badge info' }, s.transport)),
    h('dl', { class: 'kv' },
      h('dt', null, 'Server'), h('dd', null, s.serverInfo && s.serverInfo.name
        ? `${s.serverInfo.name} ${s.serverInfo.version || ''}` : '—'),
      h('dt', null, 'Protocol'), h('dd', null, s.protocolVersion || '—'),
      h('dt', null, 'Session'), h('dd', { class: 'mono' }, s.session || '—'),
      h('dt', null, 'Connected'), h('dd', null, s.connectedAt ? ago(s.connectedAt) : 'never'),
      h('dt', null, 'Tools'), h('dd', null,
        `${s.tools} listed, ${s.offered} offered`, s.held ? [', ', h('strong', null, `${s.held} held`)] : null),
      h('dt', null, 'Calls'), h('dd', null, `${s.calls} (${s.callErrors} failed), ${s.inflight} in flight`),
      s.lastError ? [h('dt', null, 'Last error'), h('dd', null, h('span', { class: 'bad-text' }, s.lastError), retry)] : null),
    btn);
}

function decisionButtons(server, t, reload) {
  if (t.pin.status !== 'held' && t.pin.status !== 'rejected') return null;
  const accept = h('button', { type: 'button', class: 'small primary' }, 'Accept change');
  const reject = t.pin.status === 'held' ? h('button', { type: 'button', class: 'small deny' }, 'Reject') : null;
  const decide = async (what) => {
    const ok = await confirmDialog({
      title: `${what === 'accept' ? 'Accept' : 'Reject'} the new definition of ${t.name}?`,
      body: h('p', null, what === 'accept'
        ? 'The tool is offered to models again with the definition the server now gives.'
        : 'The tool stays held while the server offers this definition.'),
      confirm: what === 'accept' ? 'Accept' : 'Reject',
      danger: what !== 'accept',
    });
    if (!ok) return;
    try {
      await api(`/api/mcp/servers/${encodeURIComponent(server)}/tools/${encodeURIComponent(t.upstreamName)}/${what}`,
        { method: 'POST', body: { digest: t.pin.pendingDigest } });
      toast(`${what === 'accept' ? 'Accepted' : 'Rejected'} the change of ${t.name}`);
      await reload();
    } catch (err) {
      toast(`Could not ${what}: ${err.message}`, 'bad');
    }
  };
  accept.addEventListener('click', () => decide('accept'));
  if (reject) reject.addEventListener('click', () => decide('reject'));
  return h('div', { class: 'actions' }, accept, reject);
}

function toolRow(server, t, reload) {
  const changed = t.pin.pendingDigest ? h('details', { class: 'raw' },
    h('summary', null, 'Compare definitions'),
    h('div', { class: 'sub' }, `pinned ${t.pin.digest} · offered ${t.pin.pendingDigest}`,
      t.pin.pendingSince ? ` · changed ${ago(t.pin.pendingSince)}` : '',
      t.pin.rejectedBy ? ` · rejected by ${t.pin.rejectedBy}` : ''),
    h('h4', null, 'Accepted definition'),
    longValue(t.pin.acceptedDefinition, { label: `accepted definition of ${t.name}` }),
    h('h4', null, 'Offered definition'),
    longValue(t.pin.offeredDefinition, { label: `offered definition of ${t.name}` })) : null;
  return h('tr', null,
    h('td', null, h('code', null, t.name || t.upstreamName),
      t.title ? h('div', { class: 'sub' }, t.title) : null),
    h('td', null, t.description ? h('span', { class: 'trunc', title: t.description }, t.description) : '—'),
    h('td', null, hints(t.annotations), h('div', { class: 'sub' }, `approval ${t.approvalDefault}`)),
    h('td', null, pinBadge(t),
      t.offered ? null : h('div', { class: 'sub' }, t.reason || 'not offered'),
      changed, decisionButtons(server, t, reload)));
}

export async function render(main, ctx, { params }) {
  let open = params.get('server') || null;
  const list = h('div', { class: 'policies' });
  const tools = h('div');

  const loadTools = async () => {
    if (!open) {
      replace(tools);
      return;
    }
    const r = await api(`/api/mcp/servers/${encodeURIComponent(open)}/tools`);
    replace(tools,
      h('h2', null, `Tools of ${open}`, ' ', h('span', { class: 'sub' }, `exposed as ${r.prefix}…`)),
      r.tools.length ? h('div', { class: 'table-wrap mcp-tools' }, h('table', null,
        h('caption', { class: 'visually-hidden' }, `Tools of MCP server ${open}`),
        h('thead', null, h('tr', null, ['Tool', 'Description', 'Annotations', 'Pin'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', null, r.tools.map((t) => toolRow(open, t, reload)))))
        : h('p', { class: 'sub' }, 'No tools known yet: they are listed when the server first connects.'));
  };
  const loadServers = async () => {
    const r = await api('/api/mcp/servers');
    if (!r.servers.length) {
      replace(list, h('p', { class: 'sub' }, 'No MCP servers are configured (mcp_servers in the config).'));
    } else {
      replace(list, r.servers.map((s) => serverCard(s, (name) => {
        open = open === name ? null : name;
        reload().catch((err) => toast(err.message, 'bad'));
      }, open === s.name)));
    }
  };
  const reload = async () => {
    await loadServers();
    await loadTools();
  };

  replace(main,
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, 'MCP servers'),
      h('p', { class: 'sub' }, 'Upstream MCP servers whose tools gatehouse offers as its own, under the same policies. ',
        'A tool whose definition changed after it was pinned is held until you accept the change.'))),
    list, tools);
  await reload();
  // states change on their own; the tool list (which may be under review)
  // only when asked
  const timer = setInterval(() => { loadServers().catch(() => {}); }, 5000);
  return () => clearInterval(timer);
}

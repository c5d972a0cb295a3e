// Overview: what needs attention now and what happened in the last 24 h.

import { api } from './api.js';
import { ago, h, replace, routeQuery, svg } from './dom.js';

function stat(n, label, detail, href, attention) {
  const body = [h('span', { class: 'n' }, String(n)), h('span', { class: 'l' }, label),
    detail ? h('span', { class: 'd' }, detail) : null];
  return href
    ? h('a', { class: ['card', 'stat', attention && 'attention'], href }, body)
    : h('div', { class: ['card', 'stat', attention && 'attention'] }, body);
}

// Bars of tool calls per hour, drawn as SVG elements (no markup parsing).
function chart(counts, since) {
  const w = 720;
  const ht = 120;
  const n = counts.length;
  const max = Math.max(1, ...counts);
  const bw = w / n;
  const g = svg('svg', { class: 'chart', viewBox: `0 0 ${w} ${ht + 16}`, preserveAspectRatio: 'none', role: 'img',
    'aria-label': `Tool calls per hour over the last 24 hours; at most ${Math.max(...counts)} in one hour` });
  counts.forEach((c, i) => {
    const bh = c ? Math.max(2, (c / max) * ht) : 2;
    const start = new Date(new Date(since).getTime() + i * 3600e3);
    const bar = svg('rect', { class: c ? 'bar' : 'bar zero', x: i * bw + 2, y: ht - bh, width: bw - 4, height: bh, rx: 2 });
    bar.appendChild(svg('title', null, `${start.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })}: ${c} tool calls`));
    g.appendChild(bar);
  });
  return g;
}

// What /healthz says about the audit log, as a banner when it needs
// attention (the chain is not intact, gatehouse is read-only, or its
// witness is not being written); null when all is well.
function auditBanner(health) {
  const a = health && health.audit;
  if (!a) return null;
  const checked = a.checkedBy === 'verify' ? 'a full verify' : 'the check at start-up';
  let title = null;
  const lines = [];
  if (a.chain === 'behind_witness') {
    title = 'The audit log is behind its witness';
    lines.push('Signed checkpoints the witness saw are missing from the database: rows were removed or rewritten.');
  } else if (a.chain === 'broken') {
    title = 'The audit log is not intact';
  }
  if (title) {
    const msg = String(a.message || '');
    lines.push(msg.charAt(0).toUpperCase() + msg.slice(1) + (msg.endsWith('.') ? '' : '.'));
    lines.push([`Found by ${checked}${a.badSeq ? ` near row ${a.badSeq}` : ''}, `, ago(a.checkedAt), '.']);
  }
  if (a.readOnly) {
    title = title || 'gatehouse is read-only';
    lines.push('gatehouse is serving reads only: every write, tool calls included, is refused until the database is restored.');
  }
  const w = a.witness || {};
  if (w.state === 'failing') {
    title = title || 'The audit witness is not being written';
    lines.push('Signed checkpoints are not reaching the witness file; see the server log.');
  } else if (w.state === 'recreated') {
    title = title || 'The audit witness was missing';
    lines.push('The witness file was not found at start-up though this database\'s checkpoints were witnessed; a new one was started. If it lived on a disk that is not mounted, stop gatehouse and mount it.');
  }
  if (!title) return null;
  return h('div', { class: 'notice bad audit-banner', role: 'alert' },
    h('strong', null, title),
    ...lines.map((l) => h('p', null, l)),
    h('p', null, 'Run ', h('code', null, 'gatehouse audit verify'), ' for the full check, or ',
      h('a', { href: '#/audit' }, 're-verify on the Audit log page'), '.'));
}

export async function render(main, ctx) {
  const [o, health] = await Promise.all([api('/api/admin/overview'), api('/healthz').catch(() => null)]);
  const l = o.last24h;
  const pending = stat(o.pendingApprovals, 'Pending approvals',
    o.oldestPendingAt ? ['oldest asked ', ago(o.oldestPendingAt)] : 'nothing waiting', '#/approvals', o.pendingApprovals > 0);
  const since = o.since;
  const from = (ms) => new Date(Date.now() - ms).toISOString();
  replace(main,
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, 'Overview'),
      h('p', { class: 'sub' }, 'What needs attention and what happened in the last 24 hours.'))),
    auditBanner(health),
    h('div', { class: 'stats' },
      pending,
      stat(l.toolCalls, 'Tool calls', `${l.executed} ran, ${l.failed} failed`, routeQuery('audit', { from: from(86400e3) })),
      stat(l.denials, 'Denials', 'refused by policy or a reviewer', routeQuery('audit', { from: from(86400e3), event: 'denied' }), l.denials > 0),
      stat(l.rateLimited, 'Rate limited', 'tool calls over a limit', routeQuery('audit', { from: from(86400e3), event: 'rate_limited' })),
      stat(l.approvalsRequested, 'Approvals requested', `${l.approved} approved, ${l.expired} expired`, routeQuery('audit', { from: from(86400e3), event: 'approval_requested' })),
      stat(l.failedLogins, 'Failed admin logins', 'wrong user or password', routeQuery('audit', { from: from(86400e3), event: 'admin_login_failed' }), l.failedLogins > 0)),
    h('section', { class: 'card', 'aria-labelledby': 'chart-title' },
      h('h3', { id: 'chart-title' }, 'Tool calls per hour'),
      chart(o.toolCallsPerHour, since),
      h('div', { class: 'chart-legend' },
        h('span', null, new Date(since).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })),
        h('span', null, 'now'))));
  const onChange = () => {
    // keep the pending number live
    const n = ctx.live.pending.size;
    const num = pending.querySelector('.n');
    if (num) num.textContent = String(n);
    pending.classList.toggle('attention', n > 0);
  };
  ctx.live.addEventListener('change', onChange);
  return () => ctx.live.removeEventListener('change', onChange);
}

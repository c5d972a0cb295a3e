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

export async function render(main, ctx) {
  const o = await api('/api/admin/overview');
  const l = o.last24h;
  const pending = stat(o.pendingApprovals, 'Pending approvals',
    o.oldestPendingAt ? ['oldest asked ', ago(o.oldestPendingAt)] : 'nothing waiting', '#/approvals', o.pendingApprovals > 0);
  const since = o.since;
  const from = (ms) => new Date(Date.now() - ms).toISOString();
  replace(main,
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, 'Overview'),
      h('p', { class: 'sub' }, 'What needs attention and what happened in the last 24 hours.'))),
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

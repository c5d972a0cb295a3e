// Notifications: what became of the webhooks and e-mails sent about one
// approval (GET /api/admin/notifications?approval=), as a section of the
// approval's own page. Targets are named as the config names them; their
// addresses and secrets never reach the UI.

import { api, withQuery } from './api.js';
import { ago, fmtTime, h, replace } from './dom.js';

const STATE_BADGE = { delivered: 'ok', failed: 'bad', pending: 'warn' };
const EVENT_LABEL = {
  'approval-requested': 'requested',
  'approval-decided': 'decided',
  'approval-expired': 'expired',
};

function row(d) {
  const last = d.lastError
    ? h('span', { class: 'trunc', title: d.lastError.slice(0, 300) }, d.lastError)
    : (d.lastCode ? String(d.lastCode) : '—');
  const when = d.state === 'delivered'
    ? ago(d.deliveredAt)
    : d.state === 'pending' && d.nextAttemptAt ? `next try ${fmtTime(d.nextAttemptAt)}` : ago(d.updatedAt);
  return h('tr', { dataset: { delivery: String(d.id) } },
    h('td', null, h('code', null, d.target), ' ', h('span', { class: 'sub' }, d.kind)),
    h('td', null, EVENT_LABEL[d.event] || d.event),
    h('td', null, h('span', { class: `badge ${STATE_BADGE[d.state] || 'info'}` }, d.state)),
    h('td', { class: 'num' }, String(d.attempts)),
    h('td', null, last),
    h('td', { class: 'nowrap' }, when));
}

// A section listing the deliveries of approval id; refresh() reloads it.
export function deliveriesSection(id) {
  const body = h('div', null, h('p', { class: 'sub' }, 'Loading…'));
  const el = h('section', { class: 'card notifications', 'aria-label': 'Notifications' },
    h('h3', null, 'Notifications'), body);
  const refresh = async () => {
    let r;
    try {
      r = await api(withQuery('/api/admin/notifications', { approval: id }));
    } catch (err) {
      replace(body, h('p', { class: 'sub' }, `Could not load the notifications: ${err.message}`));
      return;
    }
    if (!r.targets.length) {
      replace(body, h('p', { class: 'sub' }, 'No notification targets are configured (notifications.targets).'));
      return;
    }
    if (!r.deliveries.length) {
      replace(body, h('p', { class: 'sub' }, `None sent about this approval yet (targets: ${r.targets.map((t) => t.name).join(', ')}).`));
      return;
    }
    replace(body, h('div', { class: 'table-wrap' },
      h('table', null,
        h('caption', { class: 'visually-hidden' }, 'Notification deliveries, newest first'),
        h('thead', null, h('tr', null,
          ['Target', 'Event', 'State', 'Attempts', 'Last answer', 'When'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, r.deliveries.map(row)))));
  };
  refresh();
  return { el, refresh };
}

// Approvals: what is waiting for a person, oldest first, kept live by the
// approvals stream; approve or deny with an optional reason, then watch the
// run carry on. The "Decided" tab lists recent decisions. #/approvals/<id>
// shows one approval (the link notifications carry) with the notifications
// sent about it.

import { api, withQuery } from './api.js';
import {
  ago, argsView, fmtTime, h, message, replace, route, routeQuery, shortId, tablist, threadRoute, toast, until,
} from './dom.js';
import { deliveriesSection } from './notifications.js';
import { checkArgs } from './schema.js';

const FOLLOW_MS = 60000;
const POLL_MS = 700;

const NOTIFY_REFRESH_MS = 3000;

export async function render(main, ctx, { match }) {
  if (match[0] && match[0].startsWith('apr_')) return single(main, ctx, match[0]);
  const tab = match[0] === 'decided' ? 'decided' : 'pending';
  await ctx.keysFor(keyIds(ctx.live.list()));

  const pendingCount = h('span', { class: 'count zero' }, String(ctx.live.pending.size));
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Approvals' },
    h('button', { type: 'button', role: 'tab', id: 'tab-pending', 'aria-controls': 'approvals-panel', 'aria-selected': String(tab === 'pending'), tabindex: tab === 'pending' ? '0' : '-1', onClick: () => { location.hash = '#/approvals'; } },
      'Pending ', pendingCount),
    h('button', { type: 'button', role: 'tab', id: 'tab-decided', 'aria-controls': 'approvals-panel', 'aria-selected': String(tab === 'decided'), tabindex: tab === 'decided' ? '0' : '-1', onClick: () => { location.hash = '#/approvals/decided'; } },
      'Decided'));
  tablist(tabs);
  const panel = h('div', { id: 'approvals-panel', role: 'tabpanel', 'aria-labelledby': `tab-${tab}` });
  replace(main,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Approvals'),
        h('p', { class: 'sub' }, tab === 'pending'
          ? 'Tool calls waiting for a decision, oldest first. New requests appear as they arrive.'
          : 'Recent decisions, newest first.'))),
    tabs, panel);

  const setCount = () => {
    const n = ctx.live.pending.size;
    pendingCount.textContent = String(n);
    pendingCount.className = n ? 'count' : 'count zero';
  };
  ctx.live.addEventListener('change', setCount);
  const stop = tab === 'pending' ? pendingPanel(panel, ctx) : await decidedPanel(panel, ctx);
  return () => {
    ctx.live.removeEventListener('change', setCount);
    stop();
  };
}

// ------------------------------------------------------------- one approval

async function single(main, ctx, id) {
  const head = (sub) => h('div', { class: 'page-head' },
    h('div', null,
      h('h1', null, 'Approval'),
      h('p', { class: 'sub' }, sub, ' · ', h('a', { href: '#/approvals' }, 'All pending approvals'))));
  let a;
  try {
    a = await api(`/api/approvals/${encodeURIComponent(id)}`);
  } catch (err) {
    replace(main, head(h('code', null, id)),
      h('div', { class: 'notice bad', role: 'alert' }, `Could not load the approval: ${err.message}`));
    return () => {};
  }
  await ctx.keysFor(keyIds([a]));
  const c = approvalCard(a, ctx, true);
  c.onDismiss = () => { location.hash = '#/approvals'; };
  const notes = deliveriesSection(id);
  replace(main, head(h('code', null, id)), h('div', { class: 'approvals' }, c.el), notes.el);
  if (a.status !== 'pending') c.decidedElsewhere(a);
  const onDecided = (ev) => {
    if (ev.detail.id === id) c.decidedElsewhere(ev.detail);
  };
  ctx.live.addEventListener('decided', onDecided);
  // deliveries go on in the background (retries): keep the list current
  const timer = setInterval(() => { notes.refresh(); }, NOTIFY_REFRESH_MS);
  return () => {
    clearInterval(timer);
    ctx.live.removeEventListener('decided', onDecided);
    c.stop();
  };
}

// ------------------------------------------------------------- pending

function pendingPanel(panel, ctx) {
  const list = h('div', { class: 'approvals' });
  const empty = h('div', { class: 'empty' },
    h('strong', null, 'Nothing is waiting for a decision'),
    'New approval requests appear here as they arrive.');
  const cards = new Map();
  panel.appendChild(list);
  panel.appendChild(empty);

  const refreshEmpty = () => { empty.hidden = cards.size > 0; };
  const add = (a, arrived) => {
    if (cards.has(a.id)) return;
    const c = approvalCard(a, ctx, cards.size < 5);
    if (arrived) c.el.classList.add('arrived');
    cards.set(a.id, c);
    // oldest first: insert before the first card created after this one
    const after = [...cards.values()].find((x) => x !== c && x.approval.createdAt > a.createdAt && x.el.isConnected);
    list.insertBefore(c.el, after ? after.el : null);
    c.onDismiss = () => { cards.delete(a.id); c.el.remove(); refreshEmpty(); };
    refreshEmpty();
  };
  for (const a of ctx.live.list()) add(a, false);
  refreshEmpty();

  const onRequested = async (ev) => {
    await ctx.keysFor(keyIds([ev.detail]));
    add(ev.detail, true);
    toast(`New approval request: ${ev.detail.toolName}`);
  };
  const onDecided = async (ev) => {
    const c = cards.get(ev.detail.id);
    if (!c) return;
    await ctx.keysFor(keyIds([ev.detail]));
    c.decidedElsewhere(ev.detail);
  };
  const onChange = (ev) => {
    if (ev.detail.reason !== 'snapshot') return;
    for (const a of ctx.live.list()) add(a, false);
    for (const [id, c] of cards) {
      if (!ctx.live.pending.has(id) && !c.decided) c.refreshDecided();
    }
  };
  ctx.live.addEventListener('requested', onRequested);
  ctx.live.addEventListener('decided', onDecided);
  ctx.live.addEventListener('change', onChange);
  return () => {
    ctx.live.removeEventListener('requested', onRequested);
    ctx.live.removeEventListener('decided', onDecided);
    ctx.live.removeEventListener('change', onChange);
    for (const c of cards.values()) c.stop();
  };
}

// Who decided, for people: "you", "admin:<user>", or an API key by name
// and prefix (decidedBy is "key:<id>").
function whoDecided(ctx, by) {
  if (!by) return 'someone';
  if (ctx.me.user && by === `admin:${ctx.me.user}`) return 'you';
  if (by.startsWith('key:')) return `key ${ctx.keyLabel(by.slice(4))}`;
  if (by === 'system') return 'expiry';
  return by;
}

// The key ids an approval mentions (who asked, who decided).
function keyIds(list) {
  const ids = new Set();
  for (const a of list) {
    if (a.keyId) ids.add(a.keyId);
    if (a.decidedBy && a.decidedBy.startsWith('key:')) ids.add(a.decidedBy.slice(4));
  }
  return ids;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// An approval is announced while its run is still going: the run (and the
// thread's new messages with it) is stored a moment later. Waits for that.
async function runStored(runId) {
  for (let i = 0; ; i++) {
    try {
      await api(`/api/runs/${encodeURIComponent(runId)}`);
      return;
    } catch (err) {
      if (err.status !== 404 || i >= 25) throw err;
      await sleep(400);
    }
  }
}

// The "tool" step of a decided card from the approval's execution, as the
// gateway recorded it with the call's audit row: [text, state], state ''
// while the call has not finished.
function toolStep(x) {
  const at = (t) => (t ? ` at ${fmtTime(t)}` : '');
  switch (x && x.status) {
    case 'succeeded':
      return [`Tool ran${at(x.finishedAt)}`, 'done'];
    case 'failed':
      return [`Tool failed${at(x.finishedAt)}${x.error ? `: ${x.error}` : ''}`, 'failed'];
    case 'not_run':
      return [`Tool not run${x.error ? `: ${x.error}` : ''}`, 'failed'];
    case 'released':
      return ['Handed to the client to run; waiting for its result…', ''];
    case 'running':
      return [`Tool running since ${fmtTime(x.startedAt)}…`, ''];
    default:
      return ['Waiting for the tool to run…', ''];
  }
}

function contextView(a, open) {
  const body = h('div', { class: 'messages' }, h('p', { class: 'sub' }, 'Loading…'));
  const details = h('details', { open },
    h('summary', null, 'Recent messages in the thread'), body);
  let loaded = false;
  const load = async () => {
    if (loaded) return;
    loaded = true;
    try {
      await runStored(a.runId);
      const r = await api(withQuery(`/api/admin/threads/${encodeURIComponent(a.threadId)}/messages`, { last: 6, owner: a.owner }));
      replace(body, r.messages.length ? r.messages.map(message) : h('p', { class: 'sub' }, 'No messages yet.'),
        r.hasMore ? h('p', { class: 'sub' }, `${r.total - r.messages.length} earlier messages not shown.`) : null);
    } catch (err) {
      replace(body, h('p', { class: 'sub' }, `Could not load the thread: ${err.message}`));
    }
  };
  details.addEventListener('toggle', () => { if (details.open) load(); });
  if (open) load();
  return details;
}

// "Edit arguments": a JSON editor for the call's arguments, checked
// against the tool's input schema (fetched with the approval) as one
// types. changed() is told when editing starts or stops and when the
// text's validity changes. Redacted values show as the audit log keeps
// them: an approver who edits must give them again.
function argsEditor(a, changed) {
  const id = `edit-${a.id}`;
  let schema = null;
  let open = false;
  let last = { error: 'not checked' };
  const text = h('textarea', { id, class: 'mono', rows: '6', spellcheck: 'false', 'aria-describedby': `${id}-check` });
  const check = h('p', { id: `${id}-check`, class: 'sub', 'aria-live': 'polite' });
  const box = h('div', { class: 'field args-editor', hidden: true },
    h('label', { for: id }, 'Edited arguments (JSON)'), text, check);
  const toggle = h('button', { type: 'button', class: 'small' }, 'Edit arguments');
  const recheck = () => {
    last = checkArgs(schema, text.value);
    check.textContent = last.error ? last.error : schema ? 'Valid for the tool’s input schema.' : 'Valid JSON (the tool declares no schema).';
    check.className = `sub ${last.error ? 'bad' : 'ok'}`;
    text.setAttribute('aria-invalid', String(!!last.error));
    changed();
  };
  text.addEventListener('input', recheck);
  toggle.addEventListener('click', async () => {
    if (open) {
      open = false;
      box.hidden = true;
      toggle.textContent = 'Edit arguments';
      changed();
      return;
    }
    toggle.disabled = true;
    try {
      const cur = await api(`/api/approvals/${encodeURIComponent(a.id)}`);
      schema = cur.inputSchema || null;
    } catch (err) {
      check.textContent = `Could not read the tool's schema: ${err.message}`;
    }
    toggle.disabled = false;
    open = true;
    box.hidden = false;
    toggle.textContent = 'Cancel edits';
    if (!text.value) text.value = JSON.stringify(a.args ?? {}, null, 2);
    recheck();
    text.focus();
  });
  return {
    el: h('div', { class: 'args-edit' }, toggle, box),
    editing: () => open,
    valid: () => !last.error,
    check: () => (open ? checkArgs(schema, text.value) : { error: 'not editing' }),
  };
}

function approvalCard(a, ctx, openContext) {
  const id = a.id;
  const reasonId = `reason-${id}`;
  const reason = h('textarea', { id: reasonId, rows: '2', maxlength: '2000', placeholder: 'Why (shown in the audit log)' });
  const approveBtn = h('button', { type: 'button', class: 'approve' }, 'Approve');
  const denyBtn = h('button', { type: 'button', class: 'deny' }, 'Deny');
  const error = h('div', { class: 'notice bad', role: 'alert', hidden: true });
  const decide = h('div', { class: 'decide' },
    h('div', { class: 'field' }, h('label', { for: reasonId }, 'Reason (optional)'), reason),
    h('div', { class: 'buttons' }, approveBtn, denyBtn));
  const outcome = h('div', { class: 'outcome', hidden: true, role: 'status', 'aria-live': 'polite' });
  const editor = argsEditor(a, () => {
    approveBtn.textContent = editor.editing() ? 'Approve with edits' : 'Approve';
    approveBtn.disabled = editor.editing() && !editor.valid();
  });
  const keyLabel = ctx.keyLabel(a.keyId);
  const card = h('article', { class: 'card approval', dataset: { approvalId: id }, 'aria-label': `Approval for ${a.toolName}` },
    h('div', { class: 'approval-head' },
      h('div', null,
        h('h3', null, a.toolName),
        h('div', { class: 'meta' },
          'agent ', h('strong', null, a.agentId), ' · asked by key ', h('strong', null, keyLabel),
          ' · owner ', h('strong', null, a.owner)),
        h('div', { class: 'meta' }, a.rule ? `Needs approval: ${a.rule}` : null,
          a.rule ? ' · ' : null, h('a', { href: route('approvals', id), class: 'permalink' }, 'Link to this approval'))),
      h('div', { class: 'timers' },
        h('span', { class: 'badge' }, 'asked ', ago(a.createdAt)),
        until(a.expiresAt))),
    h('div', { class: 'approval-body' },
      h('section', { 'aria-label': 'Arguments' },
        h('h4', null, 'Arguments'),
        argsView(a.args, a.toolName),
        h('p', { class: 'sub mono', title: 'SHA-256 of the exact arguments the tool will get' },
          `sha256 ${String(a.argsSha256 || '').slice(0, 16)}…`),
        editor.el),
      h('section', { 'aria-label': 'Context' },
        h('h4', null, 'Context'),
        h('dl', { class: 'kv' },
          h('dt', null, 'Run'), h('dd', null, h('a', { href: routeQuery('audit', { run: a.runId }) }, h('code', null, shortId(a.runId)))),
          h('dt', null, 'Thread'), h('dd', null, a.threadId ? h('a', { href: threadRoute(a.threadId, a.owner) }, h('code', null, shortId(a.threadId))) : '—'),
          h('dt', null, 'Policy'), h('dd', null, `${a.policy || 'default'} (${a.policyVersion || '—'})`),
          h('dt', null, 'Tool call'), h('dd', null, h('code', null, shortId(a.toolCallId)))),
        a.threadId ? contextView(a, openContext) : null)),
    error, decide, outcome);

  const c = {
    el: card,
    approval: a,
    decided: false,
    mine: false,
    timer: null,
    onDismiss: () => {},
    stop() { clearTimeout(this.timer); this.timer = null; },
  };

  const steps = {};
  const step = (key, text, state) => {
    if (!steps[key]) steps[key] = h('li');
    steps[key].textContent = text;
    steps[key].className = state || '';
    return steps[key];
  };

  // Shows the decision and then follows the run until it settles.
  const showOutcome = (ap, { mine, note }) => {
    if (c.decided) return;
    c.decided = true;
    c.mine = mine;
    card.classList.add('decided', ap.status);
    decide.remove();
    for (const t of card.querySelectorAll('[data-until]')) t.remove();
    error.hidden = true;
    const by = whoDecided(ctx, ap.decidedBy);
    const verb = ap.status === 'approved' ? 'Approved' : ap.status === 'denied' ? 'Denied' : ap.status === 'expired' ? 'Expired' : ap.status;
    const headline = ap.status === 'expired'
      ? 'Expired without a decision: treated as denied.'
      : `${verb} by ${by}${ap.decidedAt ? ` at ${fmtTime(ap.decidedAt)}` : ''}.`;
    const list = h('ul', { class: 'steps' },
      step('decision', 'Decision recorded in the audit log', 'done'),
      ap.status === 'approved'
        ? step('tool', ...toolStep(ap.execution))
        : step('tool', 'Tool not run; the model is told the call was refused', 'done'),
      step('run', 'Run continuing…', ''));
    const dismiss = h('button', { type: 'button', class: 'small', onClick: () => { c.stop(); c.onDismiss(); } }, 'Dismiss');
    replace(outcome,
      h('div', { class: `notice ${ap.status === 'approved' ? 'ok' : 'bad'}` },
        h('strong', null, headline),
        note ? h('p', null, note) : null,
        ap.reason ? h('p', null, 'Reason: ', ap.reason) : null,
        ap.editedArgs ? h('div', { class: 'edited' },
          h('p', null, 'Approved with edited arguments (the tool gets these):'),
          argsView(ap.editedArgs, ap.toolName),
          h('p', { class: 'sub mono', title: 'SHA-256 of the edited arguments the approval binds to' },
            `sha256 ${String(ap.editedArgsSha256 || '').slice(0, 16)}…`)) : null),
      list,
      h('p', { class: 'toolbar' },
        h('a', { href: routeQuery('audit', { run: ap.runId }) }, 'See the audit rows of this run'),
        dismiss));
    outcome.hidden = false;
    follow(ap);
  };

  // Polls the run and the approval (for how the tool call ended) until
  // both have settled.
  const follow = (ap) => {
    const t0 = Date.now();
    const tick = async () => {
      c.timer = null;
      let run = null;
      let toolSettled = ap.status !== 'approved';
      try {
        // the approval first, then the run: a client's result is recorded
        // after the run left "waiting", so a run read after a settled tool
        // is never the stale "waiting" for that very result
        const cur = await api(`/api/approvals/${encodeURIComponent(ap.id)}`);
        run = await api(`/api/runs/${encodeURIComponent(ap.runId)}`);
        if (cur.status === 'approved') {
          const [text, state] = toolStep(cur.execution);
          step('tool', text, state);
          toolSettled = state !== '';
          card.classList.toggle('tool-failed', state === 'failed');
        }
      } catch (err) {
        step('run', `Could not read the run: ${err.message}`, 'failed');
        return;
      }
      const st = run.status;
      const waitingOnThis = st === 'suspended' && (run.approvals || []).some((x) => x.id === ap.id);
      let settled = true;
      if (st === 'completed') {
        const text = run.output && typeof run.output.text === 'string' ? run.output.text : '';
        step('run', text ? `Run completed; the model answered: “${text.length > 200 ? `${text.slice(0, 200)}…` : text}”` : 'Run completed', 'done');
      } else if (st === 'failed' || st === 'cancelled' || st === 'expired') {
        step('run', `Run ${st}${run.error ? `: ${run.error}` : ''}`, 'failed');
      } else if (st === 'waiting') {
        step('run', 'Run continued; waiting for the client to run its tools', 'done');
      } else if (st === 'suspended' && !waitingOnThis) {
        step('run', 'Run continued and is waiting for another approval', 'done');
      } else {
        step('run', 'Run continuing…', '');
        settled = false;
      }
      if ((!settled || !toolSettled) && Date.now() - t0 < FOLLOW_MS) c.timer = setTimeout(tick, POLL_MS);
    };
    tick();
  };

  const decideAs = async (approve) => {
    approveBtn.disabled = true;
    denyBtn.disabled = true;
    error.hidden = true;
    const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
    if (approve && editor.editing()) {
      const checked = editor.check();
      if (checked.error) {
        error.textContent = `The edited arguments are not valid: ${checked.error}`;
        error.hidden = false;
        denyBtn.disabled = false;
        return;
      }
      body.args = checked.value;
    }
    try {
      const ap = await api(`/api/approvals/${encodeURIComponent(id)}/${approve ? 'approve' : 'deny'}`, { method: 'POST', body });
      showOutcome(ap, { mine: true });
      toast(`${approve ? 'Approved' : 'Denied'} ${a.toolName}`);
    } catch (err) {
      if (err.status === 409) {
        // someone else decided first: show what they decided
        try {
          const cur = await api(`/api/approvals/${encodeURIComponent(id)}`);
          showOutcome(cur, { mine: false, note: `Your decision was not recorded: ${err.message}` });
          return;
        } catch { /* fall through */ }
      }
      error.textContent = err.message;
      error.hidden = false;
      approveBtn.disabled = editor.editing() && !editor.valid();
      denyBtn.disabled = false;
    }
  };
  approveBtn.addEventListener('click', () => decideAs(true));
  denyBtn.addEventListener('click', () => decideAs(false));

  // Decided by someone else (or expired), seen on the stream.
  c.decidedElsewhere = (ap) => {
    if (c.decided) return;
    if (approveBtn.disabled && ap.decidedBy === `admin:${ctx.me.user}`) return; // our own, in flight
    showOutcome(ap, { mine: false });
  };
  // Gone from the pending set after a reconnect: fetch what happened.
  c.refreshDecided = async () => {
    try {
      const cur = await api(`/api/approvals/${encodeURIComponent(id)}`);
      if (cur.status !== 'pending') c.decidedElsewhere(cur);
    } catch { /* keep the card as it is */ }
  };
  return c;
}

// ------------------------------------------------------------- decided

// How an approved call ended, for the table: a badge, with the error (if
// any) as its tooltip; "—" for calls that were not approved.
function executionCell(x) {
  const ex = x.execution;
  if (!ex) return '—';
  const [text, state] = toolStep(ex);
  const label = { succeeded: 'ran', failed: 'failed', not_run: 'not run', released: 'sent to client', running: 'running' }[ex.status] || 'waiting';
  return h('span', { class: `badge ${state === 'done' ? 'ok' : state === 'failed' ? 'bad' : 'info'}`, title: text.slice(0, 300) }, label);
}

async function decidedPanel(panel, ctx) {
  const tbody = h('tbody');
  const table = h('div', { class: 'table-wrap' },
    h('table', null,
      h('caption', { class: 'visually-hidden' }, 'Decided approvals, newest first'),
      h('thead', null, h('tr', null,
        ['Decided', 'Tool', 'Agent', 'Asked by', 'Decision', 'By', 'Reason', 'Tool call'].map((t) => h('th', { scope: 'col' }, t)))),
      tbody));
  const empty = h('div', { class: 'empty', hidden: true }, h('strong', null, 'No decisions yet'));
  panel.appendChild(table);
  panel.appendChild(empty);

  const load = async () => {
    const r = await api(withQuery('/api/approvals', { limit: 200 }));
    const rows = r.approvals.filter((x) => x.status !== 'pending')
      .sort((x, y) => String(y.decidedAt || y.expiresAt).localeCompare(String(x.decidedAt || x.expiresAt)));
    await ctx.keysFor(keyIds(rows));
    replace(tbody, rows.map((x) => h('tr', null,
      h('td', { class: 'nowrap' }, x.decidedAt ? ago(x.decidedAt) : ago(x.expiresAt)),
      h('td', null, h('a', { href: route('approvals', x.id) }, h('code', null, x.toolName))),
      h('td', null, x.agentId),
      h('td', null, ctx.keyLabel(x.keyId)),
      h('td', null, h('span', { class: `badge ${x.status === 'approved' ? 'ok' : 'bad'}` }, x.status)),
      h('td', null, whoDecided(ctx, x.decidedBy || 'system')),
      h('td', null, x.reason ? h('span', { class: 'trunc', title: x.reason.slice(0, 300) }, x.reason) : '—'),
      h('td', null, executionCell(x)),
    )));
    table.hidden = rows.length === 0;
    empty.hidden = rows.length > 0;
  };
  await load();
  const onDecided = () => { load().catch(() => {}); };
  ctx.live.addEventListener('decided', onDecided);
  return () => ctx.live.removeEventListener('decided', onDecided);
}

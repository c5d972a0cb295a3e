// Policy change: before a reload, what the config file on disk would do to
// the tool calls recorded in the audit log (POST /api/admin/policy/test):
// the calls whose outcome would change, counted per rule, and the calls
// the log cannot decide. Then a button to reload the config
// (POST /api/admin/reload).

import { api, withQuery } from './api.js';
import { ago, fmtTime, h, replace, toast } from './dom.js';

const SINCE = [['1h', 'last hour'], ['24h', 'last 24 hours'], ['7d', 'last 7 days'], ['30d', 'last 30 days']];

function stat(n, label, detail, attention) {
  return h('div', { class: ['card', 'stat', attention && 'attention'] },
    h('span', { class: 'n' }, String(n)), h('span', { class: 'l' }, label),
    detail ? h('span', { class: 'd' }, detail) : null);
}

function outcome(word) {
  const cls = word === 'allowed' ? 'ok' : word === 'denied' ? 'bad' : 'warn';
  return h('span', { class: ['badge', cls] }, word === 'approval' ? 'needs approval' : word.replace('_', ' '));
}

function when(iso) {
  return h('td', { class: 'nowrap', title: fmtTime(iso) }, ago(iso));
}

function auditRow(seq) {
  return h('span', { class: 'mono', title: `audit log row ${seq}` }, String(seq));
}

function callsTable(caption, rows, cols, cells) {
  return h('div', { class: 'table-wrap' }, h('table', null,
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', null, h('tr', null, cols.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, rows.map(cells))));
}

function report(r, ctx) {
  const t = r.totals;
  const more = (n) => (n > r.listMax ? h('p', { class: 'sub' }, `The first ${r.listMax} of ${n} are listed.`) : null);
  const gone = r.gone || { agents: [], keys: [], policies: [] };
  const goneItems = [
    ...gone.agents.map((a) => h('li', null, 'Agent ', h('code', null, a.agent), `: ${a.calls} call${a.calls === 1 ? '' : 's'}; the config has no such agent, so its calls would be refused.`)),
    ...gone.keys.map((k) => h('li', null, 'Key ', ctx.keyLabel(k.key), `: ${k.calls} call${k.calls === 1 ? '' : 's'}; revoked or deleted since, not replayed.`)),
    ...gone.policies.map((p) => h('li', null, 'Key ', ctx.keyLabel(p.key), ' runs under policy ', h('code', null, p.policy), ', which the config does not have: no policy would apply to it.')),
  ];
  return [
    h('div', { class: 'stats' },
      stat(t.changed, 'Would change', Object.entries(r.transitions).map(([k, n]) => `${k}: ${n}`).join(', ') || 'no call', t.changed > 0),
      stat(t.undecidable, 'Undecidable', 'the log lacks what the rule reads', t.undecidable > 0),
      stat(t.unchanged, 'Unchanged', t.rateLimitedNotReplayed ? `${t.rateLimitedNotReplayed} rate limited (not replayed)` : null),
      stat(t.decisions, 'Decisions replayed', r.since ? ['recorded from ', ago(r.since)] : 'the whole log')),
    h('h2', null, 'Calls that would change'),
    t.changed ? [
      callsTable('Recorded calls whose outcome would change', r.changes,
        ['Row', 'When', 'Key', 'Agent', 'Tool', 'Was', 'Would be', 'Rule'],
        (c) => h('tr', { class: 'ptest-change' },
          h('td', null, auditRow(c.seq)), when(c.time), h('td', null, ctx.keyLabel(c.key)),
          h('td', null, c.agent), h('td', null, h('code', null, c.tool)),
          h('td', null, outcome(c.before)), h('td', null, outcome(c.after)),
          h('td', { class: 'ptest-rule-text' }, c.rule))),
      more(t.changed),
      h('h3', null, 'Per rule'),
      callsTable('Changes per rule', r.rules, ['Calls', 'Changes', 'Rule'],
        (x) => h('tr', { class: 'ptest-rule' },
          h('td', null, String(x.changed)),
          h('td', null, Object.entries(x.transitions).map(([k, n]) => `${k}: ${n}`).join(', ')),
          h('td', null, h('code', null, x.rule))))]
      : h('p', { class: 'notice ok' }, 'No recorded call would change outcome.'),
    t.undecidable ? [
      h('h2', null, 'Undecidable calls'),
      h('p', { class: 'sub' }, 'Their decision reads a value the audit log does not hold (redacted or truncated arguments, a client\'s own approval flag): never guessed.'),
      callsTable('Calls the log cannot decide', r.undecidable, ['Row', 'When', 'Key', 'Agent', 'Tool', 'Was', 'Why'],
        (c) => h('tr', { class: 'ptest-undecidable' },
          h('td', null, auditRow(c.seq)), when(c.time), h('td', null, ctx.keyLabel(c.key)),
          h('td', null, c.agent), h('td', null, h('code', null, c.tool)),
          h('td', null, outcome(c.before)), h('td', null, c.why))),
      more(t.undecidable)] : null,
    goneItems.length ? [h('h2', null, 'No longer there'), h('ul', { class: 'ptest-gone' }, goneItems)] : null,
    h('ul', { class: 'sub ptest-notes' }, (r.notes || []).map((n) => h('li', null, n))),
  ];
}

export async function render(main, ctx) {
  const since = h('select', { id: 'pt-since', 'aria-label': 'Calls recorded in the' },
    SINCE.map(([v, label]) => h('option', { value: v, selected: v === '7d' }, label)));
  const testBtn = h('button', { type: 'button' }, 'Test again');
  const reloadBtn = h('button', { type: 'button', class: 'primary' }, 'Reload');
  const out = h('div', { id: 'pt-report', 'aria-live': 'polite' });
  const reloaded = h('div', { id: 'pt-reload', role: 'status', 'aria-live': 'polite' });

  const test = async () => {
    testBtn.disabled = true;
    replace(out, h('p', { class: 'sub' }, 'Replaying the recorded calls…'));
    try {
      const r = await api(withQuery('/api/admin/policy/test', { since: since.value }), { method: 'POST' });
      await ctx.keysFor(new Set([...r.changes, ...r.undecidable].map((c) => c.key)));
      replace(out, h('p', { class: 'sub' }, 'Config ', h('code', null, r.candidate), ' as it is on disk now.'), report(r, ctx));
    } catch (err) {
      replace(out, h('div', { class: 'notice bad', role: 'alert' },
        h('strong', null, 'The config on disk could not be tested'), h('p', null, err.message)));
    } finally {
      testBtn.disabled = false;
    }
  };

  const reload = async () => {
    reloadBtn.disabled = true;
    try {
      const r = await api('/api/admin/reload', { method: 'POST', body: {} });
      const changed = r.changed || [];
      ctx.configCache = null;
      replace(reloaded, h('div', { class: 'notice ok' },
        h('strong', null, 'Config reloaded.'),
        h('p', null, 'Digest ', h('code', null, String(r.digest || '')),
          changed.length ? `; changed: ${changed.join(', ')}` : '; nothing changed.')));
      toast('Config reloaded');
      await test();
    } catch (err) {
      const cannot = err.status === 404 || err.status === 405;
      replace(reloaded, h('div', { class: 'notice bad', role: 'alert' },
        h('strong', null, cannot ? 'This gatehouse cannot reload its config' : 'The config was not reloaded'),
        h('p', null, err.message),
        h('p', null, cannot ? 'Restart gatehouse to apply the file.' : 'The running config stays in force.')));
    } finally {
      reloadBtn.disabled = false;
    }
  };

  testBtn.addEventListener('click', test);
  since.addEventListener('change', test);
  reloadBtn.addEventListener('click', reload);
  replace(main,
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, 'Policy change'),
      h('p', { class: 'sub' }, 'Before a reload: the tool calls recorded in the audit log, decided again under the config file on disk, with the gate\'s own rules.'))),
    h('div', { class: 'card form-row' },
      h('div', { class: 'field' }, h('label', { for: 'pt-since' }, 'Calls recorded in the'), since),
      testBtn, reloadBtn),
    reloaded,
    out);
  await test();
  return null;
}

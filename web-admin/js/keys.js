// Keys & policies: list API keys, create one (its secret is shown once, with
// a copy button), revoke; and the effective policies from the config.

import { api } from './api.js';
import { ago, confirmDialog, fmtTime, h, replace, toast, trunc } from './dom.js';

function chips(list, cls) {
  if (!list || !list.length) return h('span', { class: 'sub' }, 'none');
  return h('span', { class: 'chips' }, list.map((x) => h('span', { class: ['chip', cls] }, x)));
}

function policyCard(p) {
  const tl = Object.entries(p.rateLimits.toolCallsPerMinute || {});
  return h('article', { class: 'card policy', 'aria-label': `Policy ${p.name}` },
    h('h3', null, p.name, ' ', h('span', { class: 'badge', title: 'policy version (hash of its settings)' }, p.version)),
    h('dl', { class: 'kv' },
      h('dt', null, 'Agents'), h('dd', null, chips(p.agents)),
      h('dt', null, 'Tools allowed'), h('dd', null, chips(p.tools.allow)),
      h('dt', null, 'Tools denied'), h('dd', null, chips(p.tools.deny, 'deny')),
      h('dt', null, 'Client tools'), h('dd', null, p.clientTools.enabled
        ? [chips(p.clientTools.allow), p.clientTools.deny.length ? [' except ', chips(p.clientTools.deny, 'deny')] : null]
        : 'not allowed'),
      h('dt', null, 'Need approval'), h('dd', null, chips(p.approval.require),
        p.approval.require.length ? h('div', { class: 'sub' }, `decided by ${p.approval.approver === 'caller' ? 'the caller' : 'an admin'}, expire after ${p.approval.ttlSeconds} s`) : null),
      h('dt', null, 'Requests'), h('dd', null, p.rateLimits.requestsPerMinute ? `${p.rateLimits.requestsPerMinute}/min, burst ${p.rateLimits.burst}` : 'unlimited'),
      h('dt', null, 'Tool calls'), h('dd', null, tl.length ? tl.map(([g, n]) => `${g}: ${n}/min`).join(', ') : 'unlimited'),
      h('dt', null, 'Tokens'), h('dd', null, p.rateLimits.tokensPerMinute ? `${p.rateLimits.tokensPerMinute}/min` : 'unlimited')));
}

async function copy(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    input.select();
    return document.execCommand && document.execCommand('copy');
  }
}

export async function render(main, ctx) {
  const cfg = await ctx.config();
  const tbody = h('tbody');
  const created = h('div', { role: 'status', 'aria-live': 'polite' });

  const load = async () => {
    const keys = await ctx.keys(true);
    replace(tbody, [...keys.values()].map((k) => {
      const revoke = k.revokedAt ? null : h('button', { type: 'button', class: 'small deny', 'aria-label': `Revoke key ${k.name}` }, 'Revoke');
      if (revoke) {
        revoke.addEventListener('click', async () => {
          const ok = await confirmDialog({
            title: `Revoke key ${k.name}?`,
            body: h('p', null, 'Apps using ', h('code', null, `${k.prefix}…`), ' stop working at once. This cannot be undone.'),
            confirm: 'Revoke key',
            danger: true,
          });
          if (!ok) return;
          try {
            await api(`/api/keys/${encodeURIComponent(k.id)}/revoke`, { method: 'POST', body: {} });
            toast(`Revoked ${k.name}`);
            await load();
          } catch (err) {
            toast(`Could not revoke: ${err.message}`, 'bad');
          }
        });
      }
      return h('tr', { class: k.revokedAt ? 'revoked' : null },
        h('td', { class: 'mono nowrap', title: k.id }, `${k.prefix}…`),
        h('td', null, trunc(k.name)),
        h('td', null, trunc(k.owner)),
        h('td', null, k.policy, k.role === 'admin' ? [' ', h('span', { class: 'badge info' }, 'admin')] : null),
        h('td', { class: 'nowrap', title: fmtTime(k.createdAt) }, ago(k.createdAt)),
        h('td', { class: 'nowrap' }, k.lastUsedAt ? ago(k.lastUsedAt) : 'never'),
        h('td', { class: 'nowrap' }, k.revokedAt ? h('span', { class: 'badge bad', title: fmtTime(k.revokedAt) }, 'revoked') : revoke));
    }));
  };

  const name = h('input', { id: 'k-name', required: true, maxlength: '128', autocomplete: 'off' });
  const owner = h('input', { id: 'k-owner', maxlength: '128', autocomplete: 'off', placeholder: 'same as the name' });
  const policy = h('select', { id: 'k-policy' }, cfg.policies.map((p) => h('option', { value: p.name, selected: p.name === 'default' }, p.name)));
  const admin = h('input', { id: 'k-admin', type: 'checkbox' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create key');
  const form = h('form', { class: 'card', 'aria-label': 'Create an API key' },
    h('h3', null, 'Create a key'),
    h('p', { class: 'sub' }, 'Keys of one owner share threads and memory. An admin key may use this API for automation.'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field' }, h('label', { for: 'k-name' }, 'Name'), name),
      h('div', { class: 'field' }, h('label', { for: 'k-owner' }, 'Owner'), owner),
      h('div', { class: 'field' }, h('label', { for: 'k-policy' }, 'Policy'), policy),
      h('label', { class: 'check', for: 'k-admin' }, admin, 'Admin role (for automation)'),
      submit),
    created);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!name.value.trim()) {
      name.focus();
      return;
    }
    submit.disabled = true;
    try {
      const r = await api('/api/keys', {
        method: 'POST',
        body: { name: name.value.trim(), owner: owner.value.trim() || undefined, policy: policy.value, admin: admin.checked },
      });
      const secret = h('input', { id: 'k-secret', readOnly: true, value: r.secret, 'aria-label': 'The new key' });
      const copyBtn = h('button', { type: 'button' }, 'Copy');
      copyBtn.addEventListener('click', async () => {
        const ok = await copy(r.secret, secret);
        copyBtn.textContent = ok ? 'Copied' : 'Copy failed: select and copy it';
      });
      replace(created, h('div', { class: 'notice ok' },
        h('strong', null, `Key ${r.key.name} created.`),
        h('p', null, 'Copy it now: it is not shown again.'),
        h('div', { class: 'secret' }, secret, copyBtn)));
      secret.focus();
      secret.select();
      name.value = '';
      owner.value = '';
      admin.checked = false;
      await load();
    } catch (err) {
      replace(created, h('div', { class: 'notice bad', role: 'alert' }, err.message));
    } finally {
      submit.disabled = false;
    }
  });

  replace(main,
    h('div', { class: 'page-head' }, h('div', null,
      h('h1', null, 'Keys & policies'),
      h('p', { class: 'sub' }, 'API keys and the policies they run under. Only a hash of each key is stored.'))),
    form,
    h('h2', null, 'API keys'),
    h('div', { class: 'table-wrap' }, h('table', null,
      h('caption', { class: 'visually-hidden' }, 'API keys, newest first'),
      h('thead', null, h('tr', null, ['Prefix', 'Name', 'Owner', 'Policy', 'Created', 'Last used', 'State'].map((t) => h('th', { scope: 'col' }, t)))),
      tbody)),
    h('h2', null, 'Effective policies'),
    h('p', { class: 'sub' }, 'From the config file. Anything a policy does not allow is denied; deny wins over allow.'),
    h('div', { class: 'policies' }, cfg.policies.map(policyCard)),
    h('h2', null, 'Agents'),
    h('div', { class: 'table-wrap' }, h('table', null,
      h('thead', null, h('tr', null, ['Agent', 'Model', 'Tools', 'Need approval', 'Memory'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, cfg.agents.map((a) => h('tr', null,
        h('td', null, h('strong', null, a.id), a.name && a.name !== a.id ? h('div', { class: 'sub' }, a.name) : null),
        h('td', null, `${a.provider} / ${a.model}`),
        h('td', null, chips(a.tools)),
        h('td', null, chips(a.requireApproval)),
        h('td', null, a.memory ? 'on' : 'off')))))),
    cfg.tools.length ? [
      h('h2', null, 'Server tools'),
      h('div', { class: 'table-wrap' }, h('table', null,
        h('thead', null, h('tr', null, ['Tool', 'Description', 'Always needs approval'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, cfg.tools.map((t) => h('tr', null,
          h('td', null, h('code', null, t.name)),
          h('td', null, t.description || '—'),
          h('td', null, t.requireApproval ? 'yes' : 'no'))))))] : null);
  await load();
  return null;
}

// The official MCP clients against gatehouse's /mcp, unchanged:
// @modelcontextprotocol/client (v2) in its default (legacy, 2025-11-25
// sessions) and `auto` (2026-07-28, stateless) modes, and the v1 SDK's
// Client with StreamableHTTPClientTransport. Each lists the tools its key's
// policy allows, calls one (audited), has one refused (audited, with the
// rule), and gets an approval by elicitation and one by an admin, each
// executing its tool exactly once. Then a revoked key's session ends, and a
// restart sends clients 404 until they initialize again.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
const keys = {};

function gatehouseConfig() {
  const tool = (name, extra = {}) => ({
    type: 'http', description: `The ${name} tool`, url: `${fake.url}/tools/${name}`,
    input_schema: { type: 'object' }, ...extra,
  });
  return config(fake, {
    server: { listen: '127.0.0.1:0', approval_wait_ms: 1500, heartbeat_ms: 500 },
    agents: {
      assistant: { provider: 'offline', model: 'm', tools: ['memory_*', 'get_*', 'send_*', 'delete_*'],
        memory: { enabled: true }, max_steps: 4 },
    },
    tools: {
      get_weather: tool('weather', { annotations: { readOnlyHint: true, destructiveHint: false } }),
      send_mail: tool('mail'),
      send_note: tool('note'),
      delete_all: tool('delete'),
    },
    policies: {
      // admin approves send_*; delete_all is not allowed
      default: { agents: ['*'], tools: { allow: ['memory_*', 'get_*', 'send_*'] },
        approval: { require: ['send_*'], approver: 'admin' } },
      // the caller approves its own send_*
      self: { agents: ['*'], tools: { allow: ['get_*', 'send_*'] },
        approval: { require: ['send_*'], approver: 'caller' } },
      narrow: { agents: ['*'], tools: { allow: ['get_*'] } },
    },
  });
}

before(async () => {
  fake = await startFake();
  gw = await startGateway(gatehouseConfig());
  keys.admin = gw.createKey('ops', { admin: true });
  for (const name of ['legacy', 'auto', 'v1']) {
    keys[name] = gw.createKey(name, { owner: name });
    keys[`${name}Self`] = gw.createKey(`${name}-self`, { owner: `${name}-self`, policy: 'self' });
  }
  keys.narrow = gw.createKey('narrow', { policy: 'narrow' });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

const url = () => new URL(`${gw.url}/mcp`);

// A connected client of the given kind for key, answering elicitations with
// `answer` (null: it declares no elicitation capability).
async function connect(kind, key, answer = null) {
  const headers = { Authorization: `Bearer ${key}` };
  const caps = answer ? { elicitation: { form: {} } } : {};
  const onElicit = async (req) => {
    const params = req.params ?? req;
    answer.asked.push(params);
    return answer.reply(params);
  };
  if (kind === 'v1') {
    const c = new V1Client({ name: 'gh-test-v1', version: '1.0.0' }, { capabilities: caps });
    if (answer) c.setRequestHandler(ElicitRequestSchema, onElicit);
    const t = new V1Transport(url(), { requestInit: { headers } });
    await c.connect(t);
    assert.equal(t.protocolVersion, '2025-11-25');
    return { c, t };
  }
  const opts = { capabilities: caps };
  if (kind === 'auto') opts.versionNegotiation = { mode: 'auto' };
  const c = new Client({ name: `gh-test-${kind}`, version: '2.0.0' }, opts);
  if (answer) c.setRequestHandler('elicitation/create', onElicit);
  const t = new StreamableHTTPClientTransport(url(), { requestInit: { headers } });
  await c.connect(t);
  // what each mode negotiated with gatehouse
  assert.equal(c.getNegotiatedProtocolVersion(), kind === 'auto' ? '2026-07-28' : '2025-11-25');
  assert.equal(c.getProtocolEra(), kind === 'auto' ? 'modern' : 'legacy');
  return { c, t };
}

// The audit rows about tool made with the key named keyName, oldest first.
async function audit(tool, keyName) {
  const out = gw.cli('audit', 'query', '--config', gw.configPath, '--tool', tool, '--key', keyName,
    '--format', 'ndjson');
  return out.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    .filter((r) => r.event).reverse();
}

async function toolCalls(name) {
  const r = await fetch(`${fake.url}/_requests?tool=${name}`);
  return r.json();
}

const text = (res) => res.content.map((c) => c.text).join('');

for (const kind of ['legacy', 'auto', 'v1']) {
  test(`${kind}: tools/list shows what the key's policy allows, with annotations`, async () => {
    const { c } = await connect(kind, keys[kind]);
    const { tools } = await c.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.deepEqual(Object.keys(byName).sort(),
      ['get_weather', 'memory_delete', 'memory_save', 'memory_search', 'send_mail', 'send_note']);
    assert.equal(byName.get_weather.annotations.readOnlyHint, true);
    assert.equal(byName.memory_delete.annotations.destructiveHint, true);
    assert.equal(byName.get_weather.inputSchema.type, 'object');
    await c.close();
    const n = await connect(kind, keys.narrow);
    assert.deepEqual((await n.c.listTools()).tools.map((t) => t.name), ['get_weather']);
    await n.c.close();
  });

  test(`${kind}: an allowed call runs and is audited; a denied one is refused with the rule`, async () => {
    const { c } = await connect(kind, keys[kind]);
    await fake.toolScript('weather', { body: { temp: 21, by: kind } });
    const res = await c.callTool({ name: 'get_weather', arguments: { city: 'Oslo' } });
    assert.equal(res.isError, false);
    assert.deepEqual(res.structuredContent, { temp: 21, by: kind });
    const rows = await audit('get_weather', kind);
    assert.deepEqual(rows.slice(-2).map((r) => r.event), ['allowed', 'executed']);

    const denied = await c.callTool({ name: 'delete_all', arguments: {} });
    assert.equal(denied.isError, true);
    assert.match(text(denied), /denied by policy "default": .*tools\.allow/);
    assert.equal((await toolCalls('delete')).length, 0);
    const drows = await audit('delete_all', kind);
    assert.equal(drows.at(-1).event, 'denied');
    assert.match(drows.at(-1).reason, /tools\.allow/);
    await c.close();
  });

  test(`${kind}: the caller approves by elicitation; the tool runs once`, async () => {
    const answer = { asked: [], reply: () => ({ action: 'accept', content: { approve: true } }) };
    const { c } = await connect(kind, keys[`${kind}Self`], answer);
    const before = (await toolCalls('note')).length;
    await fake.toolScript('note', { body: { noted: kind } });
    const res = await c.callTool({ name: 'send_note', arguments: { text: kind } });
    assert.equal(res.isError, false, text(res));
    assert.deepEqual(res.structuredContent, { noted: kind });
    assert.equal(answer.asked.length, 1);
    assert.match(answer.asked[0].message, /send_note/);
    assert.match(answer.asked[0].message, /sha256:[0-9a-f]{64}/);
    assert.equal((await toolCalls('note')).length, before + 1);
    const rows = await audit('send_note', `${kind}-self`);
    assert.deepEqual(rows.map((r) => r.event), ['approval_requested', 'approved', 'executed']);

    // declined: it never runs
    answer.reply = () => ({ action: 'decline' });
    const no = await c.callTool({ name: 'send_note', arguments: { text: 'no' } });
    assert.equal(no.isError, true);
    assert.match(text(no), /denied by/);
    assert.equal((await toolCalls('note')).length, before + 1);
    await c.close();
  });

  test(`${kind}: an admin approves; the call repeated runs once`, async () => {
    const { c } = await connect(kind, keys[kind]);
    const before = (await toolCalls('mail')).length;
    await fake.toolScript('mail', { body: { sent: kind } });
    let res;
    if (kind === 'auto') {
      // 2026-07-28: input_required rounds carry the approval in
      // requestState; the client retries until the admin has decided
      const pending = c.callTool({ name: 'send_mail', arguments: { to: kind } });
      let apr;
      for (let i = 0; i < 100 && !apr; i++) {
        const r = await fetch(`${gw.url}/api/approvals?status=pending`,
          { headers: { Authorization: `Bearer ${keys.admin}` } });
        apr = (await r.json()).approvals.find((a) => a.toolName === 'send_mail')?.id;
        if (!apr) await new Promise((r2) => setTimeout(r2, 100));
      }
      assert.ok(apr);
      await fetch(`${gw.url}/api/approvals/${apr}/approve`, {
        method: 'POST', headers: { Authorization: `Bearer ${keys.admin}`, 'content-type': 'application/json' },
        body: '{"reason":"ok"}',
      });
      res = await pending;
    } else {
      const first = await c.callTool({ name: 'send_mail', arguments: { to: kind } });
      assert.equal(first.isError, true);
      const apr = text(first).match(/apr_[0-9a-z]+/)[0];
      assert.equal((await toolCalls('mail')).length, before);
      const r = await fetch(`${gw.url}/api/approvals/${apr}/approve`, {
        method: 'POST', headers: { Authorization: `Bearer ${keys.admin}`, 'content-type': 'application/json' },
        body: '{"reason":"ok"}',
      });
      assert.equal(r.status, 200);
      for (let i = 0; i < 50; i++) {
        res = await c.callTool({ name: 'send_mail', arguments: { to: kind } });
        if (!res.isError) break;
        await new Promise((r2) => setTimeout(r2, 100));
      }
    }
    assert.equal(res.isError, false, text(res));
    assert.deepEqual(res.structuredContent, { sent: kind });
    assert.equal((await toolCalls('mail')).length, before + 1);
    const rows = await audit('send_mail', kind);
    assert.deepEqual(rows.map((r) => r.event), ['approval_requested', 'approved', 'executed']);
    await c.close();
  });
}

test('a revoked key ends its sessions', async () => {
  const key = gw.createKey('short-lived');
  const { c, t } = await connect('legacy', key);
  await c.listTools();
  const sid = t.sessionId;
  assert.ok(sid);
  const list = await (await fetch(`${gw.url}/api/keys`,
    { headers: { Authorization: `Bearer ${keys.admin}` } })).json();
  const id = list.keys.find((k) => k.name === 'short-lived').id;
  const r = await fetch(`${gw.url}/api/keys/${id}/revoke`, {
    method: 'POST', headers: { Authorization: `Bearer ${keys.admin}` },
  });
  assert.equal(r.status, 200);
  await assert.rejects(c.listTools());
  await c.close().catch(() => {});
});

test('a restart ends every session: 404, then the client initializes again', async () => {
  const { c, t } = await connect('legacy', keys.legacy);
  await c.listTools();
  const sid = t.sessionId;
  await c.close().catch(() => {});
  // same directory, same database, same port (restart keeps the one bound)
  await gw.restart();
  const r = await fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${keys.legacy}`, 'Mcp-Session-Id': sid,
      'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(r.status, 404);
  const again = await connect('legacy', keys.legacy);
  assert.notEqual(again.t.sessionId, sid);
  assert.ok((await again.c.listTools()).tools.length > 0);
  await again.c.close();
});

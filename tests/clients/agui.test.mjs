// Browser agent UIs against gatehouse's AG-UI surface (POST /ag-ui/:agentId),
// with the real clients, unchanged: @ag-ui/client's HttpAgent.runAgent (the
// AG-UI reference client, CopilotKit's transport) and @tanstack/ai-client's
// ChatClient with fetchServerSentEvents. Text and reasoning streaming; a server tool and a
// client tool in one run, continued by the client's tool message; caller
// approvals as interrupts answered from the client (approved, denied with a
// reason the model sees, approved with edited arguments); reasoning; an admin's
// approval waited for; a stream broken mid-run and resumed, and a second
// client joining a run, each receiving every event once and in order.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let key;        // decides its own approvals (policy "self")
let reviewed;   // its approvals are an admin's (policy "reviewed")
let admin;

const MODELS = ['ag-text', 'ag-tools', 'ag-tan', 'ag-approve', 'ag-deny', 'ag-edit',
  'ag-slow', 'ag-admin', 'ag-sms'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

before(async () => {
  fake = await startFake();
  const agents = {};
  for (const m of MODELS) {
    agents[m] = { provider: 'fake', model: m, instructions: 'Be brief.',
      tools: ['lookup', 'send_email'], memory: { enabled: true }, max_steps: 6 };
  }
  const tools = {
    lookup: { type: 'http', description: 'Looks a word up', url: `${fake.url}/tools/lookup`,
      input_schema: { type: 'object', properties: { word: { type: 'string' } },
        required: ['word'] } },
    send_email: { type: 'http', description: 'Sends an email', url: `${fake.url}/tools/send-email`,
      input_schema: { type: 'object', properties: { to: { type: 'string' },
        body: { type: 'string' } }, required: ['to'] } },
  };
  agents['ag-think'] = { provider: 'fake_anthropic', model: 'ag-think', max_steps: 2 };
  gw = await startGateway(config(fake, {
    server: { approval_wait_ms: 1500 },
    agents,
    tools,
    policies: {
      self: { agents: ['*'], tools: { allow: ['*'] }, client_tools: { allow: ['*'],
        deny: ['wipe_*'] }, approval: { require: ['send_*'], approver: 'caller' } },
      reviewed: { agents: ['*'], tools: { allow: ['*'] }, client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'admin' } },
    },
  }));
  key = gw.createKey('ui', { owner: 'ui', policy: 'self' });
  reviewed = gw.createKey('ui2', { owner: 'ui2', policy: 'reviewed' });
  admin = gw.createKey('root', { admin: true });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

const auth = (k = key) => ({ Authorization: `Bearer ${k}` });

function agent(id, threadId, k = key) {
  return new HttpAgent({ url: `${gw.url}/ag-ui/${id}`, headers: auth(k), threadId });
}

// Runs the agent, collecting its events (each checked against the AG-UI 1.0
// schema) and what the run ended with.
async function run(a, params = {}) {
  const events = [];
  let finished = null;
  await a.runAgent(params, {
    onEvent({ event }) {
      EventSchemas.parse(event);
      events.push(event);
    },
    onRunFinishedEvent(p) { finished = p; },
  });
  return { events, finished, types: events.map((e) => e.type) };
}

function chat(id, threadId, opts = {}) {
  const chunks = [];
  const client = new ChatClient({
    threadId,
    connection: fetchServerSentEvents(`${gw.url}/ag-ui/${id}`, {
      headers: auth(opts.key), ...(opts.fetchClient ? { fetchClient: opts.fetchClient } : {}),
    }),
    tools: opts.tools,
    onChunk: (c) => chunks.push(c),
  });
  return { client, chunks };
}

const texts = (client) => client.getMessages().filter((m) => m.role === 'assistant')
  .flatMap((m) => m.parts.filter((p) => p.type === 'text').map((p) => p.content)).join('|');

// The tool results the model was sent in its last request.
async function lastToolResults(model) {
  const reqs = await fake.requests(model);
  return reqs.at(-1).body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
}

test('HttpAgent: text streams as TEXT_MESSAGE events between RUN_STARTED and RUN_FINISHED',
  async () => {
    await fake.script('ag-text', { text: 'Hello from the gateway.', stream: { words_per_chunk: 1 } });
    const a = agent('ag-text', 'th-text');
    a.addMessage({ id: 'u1', role: 'user', content: 'Say hello' });
    const { events, types, finished } = await run(a, { runId: 'run-text-1' });
    assert.equal(types[0], 'RUN_STARTED');
    assert.equal(events[0].threadId, 'th-text');
    assert.equal(events[0].runId, 'run-text-1');
    assert.equal(types.at(-1), 'RUN_FINISHED');
    assert.equal(finished.outcome, 'success');
    const deltas = events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT');
    assert.ok(deltas.length >= 3, 'streamed in several pieces');
    assert.equal(deltas.map((d) => d.delta).join(''), 'Hello from the gateway.');
    const start = events.find((e) => e.type === 'TEXT_MESSAGE_START');
    assert.equal(start.role, 'assistant');
    assert.ok(deltas.every((d) => d.messageId === start.messageId));
    assert.deepEqual(a.messages.at(-1), { id: start.messageId, role: 'assistant',
      content: 'Hello from the gateway.' });
    assert.ok(events.at(-1).usage[0].outputTokens > 0);

    // the thread is the key's: the next turn resends the conversation, and
    // the model gets it once
    await fake.script('ag-text', { text: 'Still here.' });
    a.addMessage({ id: 'u2', role: 'user', content: 'Again' });
    await run(a, { runId: 'run-text-2' });
    const sent = (await fake.requests('ag-text')).at(-1).body.messages;
    assert.deepEqual(sent.filter((m) => m.role !== 'system').map((m) => m.content),
      ['Say hello', 'Hello from the gateway.', 'Again']);
    const th = await fetch(`${gw.url}/api/memory/threads/th-text/messages`, { headers: auth() });
    assert.equal(th.status, 200);
    const stored = (await th.json()).messages;
    assert.equal(stored.length, 4, 'each message stored once');
    const other = await fetch(`${gw.url}/api/memory/threads/th-text/messages`,
      { headers: auth(reviewed) });
    assert.equal(other.status, 404, 'another owner does not see the thread');
  });

test('HttpAgent: the model\'s reasoning streams as a reasoning message before the text',
  async () => {
    await fake.script('ag-think', { thinking: 'The user greets me.', text: 'Hello.' });
    const a = agent('ag-think', 'th-think');
    a.addMessage({ id: 'u1', role: 'user', content: 'Hi' });
    const { events, types } = await run(a, { runId: 'run-think-1' });
    const r = types.indexOf('REASONING_START');
    assert.ok(r > 0, types.join());
    assert.deepEqual(types.slice(r, r + 2), ['REASONING_START', 'REASONING_MESSAGE_START']);
    assert.ok(types.indexOf('REASONING_END') < types.indexOf('TEXT_MESSAGE_START'), types.join());
    assert.equal(events.filter((e) => e.type === 'REASONING_MESSAGE_CONTENT')
      .map((e) => e.delta).join(''), 'The user greets me.');
    assert.equal(a.messages.find((m) => m.role === 'reasoning').content, 'The user greets me.');
    assert.equal(a.messages.at(-1).content, 'Hello.');
  });

test('HttpAgent: a server tool runs inside, a client tool ends the run, the tool message ' +
  'continues it', async () => {
  await fake.script('ag-tools',
    { tool_calls: [{ id: 'c1', name: 'lookup', arguments: { word: 'gate' } },
      { id: 'c2', name: 'get-location', arguments: { precise: true } }] },
    { text: 'You are in Paris; a gate is a door.' });
  const a = agent('ag-tools', 'th-tools');
  a.addMessage({ id: 'u1', role: 'user', content: 'Where am I, and what is a gate?' });
  const tools = [
    { name: 'get-location', description: 'Where the user is',
      parameters: { type: 'object', properties: { precise: { type: 'boolean' } } } },
    { name: 'wipe_disk', description: 'Refused by the policy', parameters: { type: 'object' } },
  ];
  const first = await run(a, { runId: 'run-tools-1', tools });
  const starts = first.events.filter((e) => e.type === 'TOOL_CALL_START');
  assert.deepEqual(starts.map((s) => s.toolCallName), ['lookup', 'get-location']);
  const [server, client] = starts;
  const result = first.events.find((e) => e.type === 'TOOL_CALL_RESULT');
  assert.equal(result.toolCallId, server.toolCallId);
  assert.equal(JSON.parse(result.content).args.word, 'gate');
  const args = first.events.filter((e) => e.type === 'TOOL_CALL_ARGS' &&
    e.toolCallId === client.toolCallId);
  assert.deepEqual(JSON.parse(args.map((x) => x.delta).join('')), { precise: true });
  assert.equal(first.finished.outcome, 'success');
  assert.deepEqual(first.finished.pendingToolCallIds, [client.toolCallId]);
  assert.deepEqual(first.events.at(-1).outcome,
    { type: 'success', pendingToolCallIds: [client.toolCallId] });
  // the refused tool was never offered to the model
  const offered = (await fake.requests('ag-tools'))[0].body.tools.map((t) => t.function.name);
  assert.ok(offered.includes('get-location') && !offered.includes('wipe_disk'), offered.join());

  a.addMessage({ id: 't1', role: 'tool', toolCallId: client.toolCallId,
    content: JSON.stringify({ city: 'Paris' }) });
  const second = await run(a, { runId: 'run-tools-2', tools });
  assert.equal(second.finished.outcome, 'success');
  assert.equal(second.events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT')
    .map((e) => e.delta).join(''), 'You are in Paris; a gate is a door.');
  assert.deepEqual(await lastToolResults('ag-tools').then((r) => r.length), 2);
  assert.equal((await fake.requests()).filter((r) => r.path === '/tools/lookup').length, 1,
    'the server tool ran once');
  // the same tool message again answers nothing
  const again = await fetch(`${gw.url}/ag-ui/ag-tools`, { method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({ threadId: 'th-tools', runId: 'run-tools-3', messages: a.messages.slice(0, -1)
      .concat([{ id: 't1', role: 'tool', toolCallId: client.toolCallId, content: '{}' }]) }) });
  assert.equal(again.status, 409);
});

test('ChatClient: text, and a client tool it runs itself before the run goes on', async () => {
  await fake.script('ag-tan',
    { tool_calls: [{ id: 'k1', name: 'get_time', arguments: { zone: 'UTC' } }] },
    { text: 'It is noon.' });
  let ran = 0;
  const { client, chunks } = chat('ag-tan', 'th-tan', { tools: [{
    name: 'get_time', description: 'The time in a zone',
    inputSchema: { type: 'object', properties: { zone: { type: 'string' } } },
    execute: async ({ zone }) => { ran++; return { zone, time: '12:00' }; },
  }] });
  await client.sendMessage('What time is it?');
  await until('the answer after the tool', () => !client.getIsLoading() && /noon/.test(texts(client)));
  assert.equal(ran, 1);
  assert.equal(texts(client), 'It is noon.');
  assert.deepEqual(await lastToolResults('ag-tan'), [JSON.stringify({ zone: 'UTC', time: '12:00' })]);
  assert.ok(chunks.some((c) => c.type === 'RUN_FINISHED'));
});

// A run stopped on a caller's approval, as the client's interrupt.
async function interrupted(client) {
  return until('the interrupt', () => !client.getIsLoading() &&
    client.getInterrupts().find((i) => i.canResolve));
}

test('ChatClient: an approval the caller gives with addToolApprovalResponse', async () => {
  await fake.script('ag-approve',
    { tool_calls: [{ id: 'a1', name: 'send_email', arguments: { to: 'ann@example.com' } }] },
    { text: 'Sent to Ann.' });
  const { client } = chat('ag-approve', 'th-approve');
  await client.sendMessage('Mail Ann');
  const it = await interrupted(client);
  assert.equal(it.reason, 'approval_required');
  assert.match(it.interruptId, /^apr_/);
  assert.equal(it.metadata.toolName, 'send_email');
  assert.deepEqual(it.metadata.input, { to: 'ann@example.com' });
  assert.match(it.metadata.argsDigest, /^[0-9a-f]{64}$/);
  assert.ok(Date.parse(it.expiresAt) > Date.now());
  assert.equal((await fake.requests()).filter((r) => r.path === '/tools/send-email').length, 0);

  await client.addToolApprovalResponse({ id: it.interruptId, approved: true });
  await until('the answer', () => !client.getIsLoading() && /Ann\./.test(texts(client)));
  const sends = (await fake.requests()).filter((r) => r.path === '/tools/send-email');
  assert.equal(sends.length, 1);
  assert.deepEqual(sends[0].body, { to: 'ann@example.com' });
  const ap = await (await fetch(`${gw.url}/api/approvals/${it.interruptId}`,
    { headers: auth() })).json();
  assert.equal(ap.status, 'approved');
});

test('ChatClient: a client tool that needs the caller\'s approval runs in the page once ' +
  'approved', async () => {
  await fake.script('ag-sms',
    { tool_calls: [{ id: 's1', name: 'send_sms', arguments: { to: '+100' } }] },
    { text: 'Texted.' });
  const sent = [];
  const { client } = chat('ag-sms', 'th-sms', { tools: [{
    name: 'send_sms', description: 'Sends a text message',
    inputSchema: { type: 'object', properties: { to: { type: 'string' } } },
    execute: async (input) => { sent.push(input); return { ok: true }; },
  }] });
  await client.sendMessage('Text +100');
  const it = await interrupted(client);
  assert.equal(it.metadata.toolName, 'send_sms');
  assert.deepEqual(sent, [], 'not run before the approval');
  await client.addToolApprovalResponse({ id: it.interruptId, approved: true });
  await until('the answer', () => !client.getIsLoading() && /Texted/.test(texts(client)));
  assert.deepEqual(sent, [{ to: '+100' }]);
  assert.deepEqual(await lastToolResults('ag-sms'), [JSON.stringify({ ok: true })]);
});

test('HttpAgent: a denial with a reason reaches the model; the tool never runs', async () => {
  await fake.script('ag-deny',
    { tool_calls: [{ id: 'd1', name: 'send_email', arguments: { to: 'bob@example.com' } }] },
    { text: 'I did not mail Bob.' });
  const a = agent('ag-deny', 'th-deny');
  a.addMessage({ id: 'u1', role: 'user', content: 'Mail Bob' });
  const first = await run(a, { runId: 'run-deny-1' });
  assert.equal(first.finished.outcome, 'interrupt');
  const [it] = first.finished.interrupts;
  assert.equal(it.reason, 'approval_required');
  assert.equal(it.toolCallId, first.events.find((e) => e.type === 'TOOL_CALL_START').toolCallId);
  const second = await run(a, { runId: 'run-deny-2', parentRunId: 'run-deny-1',
    resume: [{ interruptId: it.id, status: 'resolved',
      payload: { approved: false, reason: 'Bob asked not to be mailed' } }] });
  assert.equal(second.finished.outcome, 'success');
  const denied = second.events.find((e) => e.type === 'TOOL_CALL_RESULT');
  assert.match(denied.content, /Bob asked not to be mailed/);
  assert.match((await lastToolResults('ag-deny')).join(), /Bob asked not to be mailed/);
  assert.equal((await fake.requests()).filter((r) => r.path === '/tools/send-email' &&
    r.body.to === 'bob@example.com').length, 0);
  // an interrupt is answered once
  const again = await fetch(`${gw.url}/ag-ui/ag-deny`, { method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({ threadId: 'th-deny', runId: 'run-deny-3', messages: [],
      resume: [{ interruptId: it.id, status: 'resolved', payload: { approved: true } }] }) });
  assert.equal(again.status, 409);
});

// SHA-256 of canonical JSON (sorted keys, no spaces), as approvals bind.
function canonSha(v) {
  const canon = (x) => (Array.isArray(x) ? `[${x.map(canon).join(',')}]`
    : x && typeof x === 'object' ? `{${Object.keys(x).sort()
      .map((k) => `${JSON.stringify(k)}:${canon(x[k])}`).join(',')}}` : JSON.stringify(x));
  return createHash('sha256').update(canon(v)).digest('hex');
}

test('ChatClient: approved with edited arguments: the tool runs once with them, the audit ' +
  'log keeps both digests', async () => {
  const asked = { to: 'bob@example.com', body: 'hi' };
  const edited = { to: 'carol@example.com', body: 'hi, from the editor' };
  await fake.script('ag-edit',
    { tool_calls: [{ id: 'e1', name: 'send_email', arguments: asked }] },
    { text: 'Sent to Carol.' });
  const { client } = chat('ag-edit', 'th-edit');
  await client.sendMessage('Mail Bob');
  const it = await interrupted(client);
  assert.equal(it.metadata.argsDigest, canonSha(asked));
  assert.equal(it.responseSchema.properties.editedArgs.type, 'object');
  it.resolveInterrupt({ approved: true, editedArgs: edited });
  await until('the answer', () => !client.getIsLoading() && /Carol/.test(texts(client)));
  const sends = (await fake.requests()).filter((r) => r.path === '/tools/send-email' &&
    [asked.to, edited.to].includes(r.body.to));
  assert.deepEqual(sends.map((r) => r.body), [edited], 'ran once, with the edited arguments');
  const audit = await (await fetch(`${gw.url}/api/audit?tool=send_email&limit=100`,
    { headers: auth(admin) })).json();
  const rows = (audit.events ?? audit.rows ?? audit).filter((r) => r.approvalId === it.interruptId ||
    JSON.stringify(r).includes(it.interruptId));
  const det = (r) => (typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail) ?? {};
  const ran = rows.find((r) => r.event === 'executed');
  assert.ok(ran, JSON.stringify(rows).slice(0, 2000));
  assert.equal(det(ran).args_edited.original_sha256, canonSha(asked));
  assert.equal(det(ran).args_edited.edited_sha256, canonSha(edited));
  assert.match(det(ran).args_edited.edited_by, /^key:/);
});

test('an admin\'s approval is waited for, then reported pending with its id', async () => {
  await fake.script('ag-admin',
    { tool_calls: [{ id: 'm1', name: 'send_email', arguments: { to: 'cy@example.com' } }] },
    { text: 'Mailed Cy.' });
  const a = agent('ag-admin', 'th-admin', reviewed);
  a.addMessage({ id: 'u1', role: 'user', content: 'Mail Cy' });
  const first = await run(a, { runId: 'run-admin-1' });
  assert.equal(first.finished.outcome, 'interrupt');
  const [it] = first.finished.interrupts;
  assert.equal(it.reason, 'admin_approval_pending');
  assert.match(it.id, /^apr_/);
  assert.equal(it.metadata.approver, 'admin');
  // the admin approves; resuming the interrupt waits for the run and tells how it went
  const ok = await fetch(`${gw.url}/api/approvals/${it.id}/approve`, { method: 'POST',
    headers: { ...auth(admin), 'content-type': 'application/json' }, body: '{}' });
  assert.equal(ok.status, 200);
  const second = await run(a, { runId: 'run-admin-2', resume: [{ interruptId: it.id,
    status: 'resolved', payload: { approved: true } }] });
  assert.equal(second.finished.outcome, 'success');
  assert.equal(second.events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT')
    .map((e) => e.delta).join(''), 'Mailed Cy.');
});

// A fetch whose first response stops after `cut` events (a dropped
// connection); later requests are left alone.
function flakyFetch(cut, log) {
  let first = true;
  return async (url, init) => {
    log.push({ url: String(url), method: init.method, lastEventId: init.headers?.['Last-Event-ID'] });
    const res = await fetch(url, init);
    if (!first) return res;
    first = false;
    const reader = res.body.getReader();
    let seen = 0;
    const dec = new TextDecoder();
    const body = new ReadableStream({
      async pull(ctl) {
        const { done, value } = await reader.read();
        if (done) { ctl.close(); return; }
        seen += (dec.decode(value).match(/\n\n/g) || []).length;
        ctl.enqueue(value);
        if (seen >= cut) {
          reader.cancel().catch(() => {});
          ctl.error(new TypeError('network connection lost'));
        }
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
}

test('a stream broken mid-run is resumed from its last offset; a second client joins from ' +
  'the start: every event once and in order', async () => {
  const words = Array.from({ length: 12 }, (_, i) => `w${i}`).join(' ');
  await fake.script('ag-slow', { text: words, stream: { words_per_chunk: 1, chunk_delay_ms: 120 } });
  const log = [];
  const { client, chunks } = chat('ag-slow', 'th-slow', { fetchClient: flakyFetch(4, log) });
  const sending = client.sendMessage('Count');
  // a second client joins the same run while it streams
  await until('the run to start', () => chunks.length >= 2);
  const runId = chunks[0].runId;
  const joined = [];
  const join = (async () => {
    const conn = fetchServerSentEvents(`${gw.url}/ag-ui/ag-slow`, { headers: auth() });
    for await (const c of conn.joinRun(runId)) joined.push(c);
  })();
  await sending;
  await until('the answer', () => !client.getIsLoading() && texts(client) === words);
  await join;
  assert.ok(log.length >= 2, 'the client reconnected');
  assert.equal(log[1].method, 'POST');
  assert.match(log[1].lastEventId, /^\d+$/);
  const seq = (list) => list.map((c) => `${c.type}:${c.delta ?? ''}`);
  const all = seq(chunks);
  assert.equal(all[0], 'RUN_STARTED:');
  assert.equal(all.at(-1), 'RUN_FINISHED:');
  assert.equal(chunks.filter((c) => c.type === 'TEXT_MESSAGE_CONTENT').map((c) => c.delta)
    .join(''), words);
  assert.equal(new Set(chunks.map((c) => c.timestamp + c.type + (c.delta ?? ''))).size,
    chunks.length, 'no event twice');
  assert.deepEqual(seq(joined), all, 'the joining client got the same events');
  // the run is over: joining it now replays it whole
  const replay = await fetch(`${gw.url}/ag-ui/ag-slow?runId=${encodeURIComponent(runId)}&offset=-1`,
    { headers: auth() });
  const ids = [...(await replay.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(ids, ids.map((_, i) => i));
  assert.equal(ids.length, chunks.length);
  // another owner cannot join it
  const other = await fetch(`${gw.url}/ag-ui/ag-slow?runId=${encodeURIComponent(runId)}`,
    { headers: auth(reviewed) });
  assert.equal(other.status, 404);
});

test('errors: bad input, unknown agent and missing key are plain HTTP errors', async () => {
  const post = (id, body, k = key) => fetch(`${gw.url}/ag-ui/${id}`, { method: 'POST',
    headers: { ...(k ? auth(k) : {}), 'content-type': 'application/json' },
    body: JSON.stringify(body) });
  let r = await post('ag-text', { runId: 'x', messages: [{ id: 'u', role: 'user', content: 'hi' }] });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /threadId/);
  r = await post('nope', { threadId: 't', runId: 'x', messages: [{ id: 'u', role: 'user', content: 'hi' }] });
  assert.equal(r.status, 404);
  r = await post('ag-text', { threadId: 't', runId: 'x', messages: [] }, null);
  assert.equal(r.status, 401);
  r = await post('ag-text', { threadId: 't', runId: 'x', messages: [{ id: 'u', role: 'user',
    content: 'hi' }], resume: [{ interruptId: 'apr_x', status: 'resolved', payload: { approved: false,
    editedArgs: {} } }] });
  assert.equal(r.status, 400);
});

// @mastra/client-js 1.x against gatehouse, unchanged: the routes a UI uses
// to find and pick up runs that wait on someone (listSuspendedRuns,
// resumeStream, sendToolApproval), approving and declining a call with a
// reason the model sees, approving with edited arguments, and observe
// (reconnecting to a running stream from an offset), against the real
// binary and the scripted fake upstream.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MastraClient } from '@mastra/client-js';
import { z } from 'zod';
import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let key;
let other;

before(async () => {
  fake = await startFake();
  const agent = (model, tools = []) => ({ provider: 'fake', model, tools,
    memory: { enabled: true, last_messages: 20 }, max_steps: 6 });
  gw = await startGateway(config(fake, {
    agents: {
      mailer: agent('m1-mail', ['send_email']),
      sender: agent('m1-send', ['send_email']),
      helper: agent('m1-client'),
      talker: agent('m1-talk'),
    },
    tools: {
      send_email: { type: 'http', description: 'Send an email', url: `${fake.url}/tools/send_email`,
        timeout_ms: 5000,
        input_schema: { type: 'object', properties: { to: { type: 'string' }, body: { type: 'string' } },
          required: ['to'], additionalProperties: false } },
    },
    policies: {
      default: { agents: ['*'], tools: { allow: ['*'] }, client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'caller', ttl_seconds: 600 } },
    },
  }));
  key = gw.createKey('mastra-ui');
  other = gw.createKey('someone-else', { owner: 'other' });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

function client(k = key) {
  return new MastraClient({ baseUrl: gw.url, headers: { Authorization: `Bearer ${k}` }, retries: 0 });
}

async function chunksOf(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (c) => { chunks.push(c); } });
  return chunks;
}

async function toolCalls(name) {
  return (await fake.requests()).filter((r) => r.path === `/tools/${name}`);
}

// A streamed turn that stops on send_email waiting for the caller's approval.
async function suspendedMail(agentId, model, thread, args) {
  await fake.script(model, { tool_calls: [{ name: 'send_email', arguments: args }] },
    { text: 'Done.' });
  const res = await client().getAgent(agentId).stream([{ role: 'user', content: 'mail it' }],
    { memory: { thread, resource: 'user-1' } });
  const chunks = await chunksOf(res);
  const finish = chunks.find((c) => c.type === 'finish');
  assert.ok(finish, 'the turn finished');
  const runId = chunks[0].runId;
  assert.ok(runId);
  return { runId, chunks };
}

test('listSuspendedRuns finds the waiting call; approveToolCall runs it once and streams the rest', async () => {
  const { runId } = await suspendedMail('mailer', 'm1-mail', 'th-approve', { to: 'bob@example.com', body: 'hi' });
  const agent = client().getAgent('mailer');
  const list = await agent.listSuspendedRuns();
  const run = list.runs.find((r) => r.runId === runId);
  assert.ok(run, JSON.stringify(list));
  assert.equal(run.status, 'suspended');
  assert.equal(run.threadId, 'th-approve');
  assert.equal(run.toolCalls.length, 1);
  const call = run.toolCalls[0];
  assert.equal(call.toolName, 'send_email');
  assert.deepEqual(call.args, { to: 'bob@example.com', body: 'hi' });
  assert.equal(call.requiresApproval, true);
  assert.equal(call.suspendPayload.waitingOn, 'approval');
  // filters and paging
  assert.equal((await agent.listSuspendedRuns({ threadId: 'th-approve' })).runs.length, 1);
  assert.equal((await agent.listSuspendedRuns({ threadId: 'no-such-thread' })).runs.length, 0);
  const paged = await agent.listSuspendedRuns({ perPage: 1, page: 5 });
  assert.equal(paged.runs.length, 0);
  assert.ok(paged.total >= 1);
  // another owner's key sees none of them
  const theirs = await client(other).getAgent('mailer').listSuspendedRuns();
  assert.equal(theirs.runs.length, 0);

  const chunks = await chunksOf(await agent.approveToolCall({ runId, toolCallId: call.toolCallId }));
  // the continuation shows the call before its result (the client refuses a result it did not see called)
  const types = chunks.map((c) => c.type);
  assert.ok(types.indexOf('tool-call') >= 0 && types.indexOf('tool-call') < types.indexOf('tool-result'), types.join());
  const text = chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
  assert.equal(text, 'Done.');
  const sent = await toolCalls('send_email');
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0].body, { to: 'bob@example.com', body: 'hi' });
  const after = await agent.listSuspendedRuns();
  assert.equal(after.runs.find((r) => r.runId === runId), undefined);
});

test('declineToolCall with a reason: the tool does not run and the model reads the reason', async () => {
  const before = (await toolCalls('send_email')).length;
  const { runId } = await suspendedMail('mailer', 'm1-mail', 'th-decline', { to: 'all@example.com' });
  const agent = client().getAgent('mailer');
  const call = (await agent.listSuspendedRuns({ threadId: 'th-decline' })).runs[0].toolCalls[0];
  const chunks = await chunksOf(await agent.declineToolCall({ runId, toolCallId: call.toolCallId,
    reason: 'never mail the whole company' }));
  assert.ok(chunks.some((c) => c.type === 'finish'));
  assert.equal((await toolCalls('send_email')).length, before);
  const reqs = await fake.requests('m1-mail');
  const tool = reqs.at(-1).body.messages.at(-1);
  assert.equal(tool.role, 'tool');
  assert.match(tool.content, /never mail the whole company/);
});

test('resumeStream answers the approval with edited arguments: the tool runs once with them', async () => {
  const before = (await toolCalls('send_email')).length;
  const { runId } = await suspendedMail('mailer', 'm1-mail', 'th-edit', { to: 'everyone@example.com', body: 'x' });
  const agent = client().getAgent('mailer');
  const call = (await agent.listSuspendedRuns({ threadId: 'th-edit' })).runs[0].toolCalls[0];
  // edited arguments the tool's schema refuses are refused before anything runs
  await assert.rejects(agent.resumeStream({ approved: true, args: { to: 'a@example.com', cc: 'b' } },
    { runId, toolCallId: call.toolCallId }), /cc/);
  const edited = { to: 'team@example.com', body: 'x' };
  const chunks = await chunksOf(await agent.resumeStream({ approved: true, args: edited },
    { runId, toolCallId: call.toolCallId }));
  const text = chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
  assert.equal(text, 'Done.');
  const sent = await toolCalls('send_email');
  assert.equal(sent.length, before + 1);
  assert.deepEqual(sent.at(-1).body, edited);
  const apr = await (await fetch(`${gw.url}/api/approvals/${call.suspendPayload.approvalId}`,
    { headers: { Authorization: `Bearer ${key}` } })).json();
  assert.deepEqual(apr.editedArgs, edited);
  assert.equal(apr.args.to, 'everyone@example.com');
  assert.equal(apr.editedArgsSha256.length, 64);
});

test('sendToolApproval decides the call; the run goes on in the background', async () => {
  const before = (await toolCalls('send_email')).length;
  const { runId } = await suspendedMail('sender', 'm1-send', 'th-send', { to: 'carol@example.com' });
  const agent = client().getAgent('sender');
  const call = (await agent.listSuspendedRuns({ threadId: 'th-send' })).runs[0].toolCalls[0];
  // the call is not of another thread
  await assert.rejects(agent.sendToolApproval({ threadId: 'th-other', resourceId: 'user-1',
    toolCallId: call.toolCallId, approved: true }), /409|thread/);
  const res = await agent.sendToolApproval({ threadId: 'th-send', resourceId: 'user-1',
    toolCallId: call.toolCallId, approved: true });
  assert.equal(res.accepted, true);
  assert.equal(res.runId, runId);
  assert.equal(res.toolCallId, call.toolCallId);
  let status;
  for (let i = 0; i < 100; i++) {
    const r = await (await fetch(`${gw.url}/api/runs/${runId}`, { headers: { Authorization: `Bearer ${key}` } })).json();
    status = r.status;
    if (status === 'completed') break;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  assert.equal(status, 'completed');
  assert.equal((await toolCalls('send_email')).length, before + 1);
});

test('sendToolApproval declines with the reason in resumeData; the model reads it', async () => {
  const before = (await toolCalls('send_email')).length;
  const { runId } = await suspendedMail('sender', 'm1-send', 'th-send-no', { to: 'dan@example.com' });
  const agent = client().getAgent('sender');
  const call = (await agent.listSuspendedRuns({ threadId: 'th-send-no' })).runs[0].toolCalls[0];
  const res = await agent.sendToolApproval({ threadId: 'th-send-no', resourceId: 'user-1',
    toolCallId: call.toolCallId, approved: false, resumeData: { reason: 'dan left the company' } });
  assert.equal(res.accepted, true);
  for (let i = 0; i < 100; i++) {
    const r = await (await fetch(`${gw.url}/api/runs/${runId}`, { headers: { Authorization: `Bearer ${key}` } })).json();
    if (r.status === 'completed') break;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  assert.equal((await toolCalls('send_email')).length, before);
  const tool = (await fake.requests('m1-send')).at(-1).body.messages.at(-1);
  assert.equal(tool.role, 'tool');
  assert.match(tool.content, /dan left the company/);
});

test('a client tool left to the UI: listed as suspended, resumeStream sends its result', async () => {
  await fake.script('m1-client', { tool_calls: [{ name: 'pick_date', arguments: { month: 'May' } }] },
    { text: 'You picked the 4th.' });
  const agent = client().getAgent('helper');
  const pickDate = { id: 'pick_date', description: 'Ask the user for a date',
    inputSchema: z.object({ month: z.string() }) };
  const first = await chunksOf(await agent.stream([{ role: 'user', content: 'book a day' }],
    { clientTools: { pick_date: pickDate }, memory: { thread: 'th-client', resource: 'user-1' } }));
  const runId = first[0].runId;
  const run = (await agent.listSuspendedRuns({ threadId: 'th-client' })).runs[0];
  assert.equal(run.runId, runId);
  assert.equal(run.toolCalls[0].toolName, 'pick_date');
  assert.equal(run.toolCalls[0].requiresApproval, false);
  assert.equal(run.toolCalls[0].suspendPayload.waitingOn, 'client');
  const chunks = await chunksOf(await agent.resumeStream({ day: 4 }, { runId,
    memory: { thread: 'th-client', resource: 'user-1' } }));
  const text = chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
  assert.equal(text, 'You picked the 4th.');
  const last = (await fake.requests('m1-client')).at(-1).body.messages.at(-1);
  assert.equal(last.role, 'tool');
  assert.deepEqual(JSON.parse(last.content), { day: 4 });
  assert.equal((await agent.listSuspendedRuns({ threadId: 'th-client' })).runs.length, 0);
});

test('observe reconnects to a running stream from an offset: every event once, in order', async () => {
  const words = Array.from({ length: 30 }, (_, i) => `w${i}`).join(' ');
  await fake.script('m1-talk', { text: words, stream: { chunk_delay_ms: 40 } });
  const agent = client().getAgent('talker');
  const res = await agent.stream([{ role: 'user', content: 'talk' }],
    { memory: { thread: 'th-talk', resource: 'user-1' } });
  const original = [];
  let observed = null;
  await res.processDataStream({
    onChunk: async (c) => {
      original.push(c);
      if (original.length === 5) {
        // a second connection joins mid-run, from event 3 on
        observed = agent.observe({ runId: c.runId, offset: 3 }).then(chunksOf);
      }
    },
  });
  assert.ok(observed, 'observed mid-run');
  const again = await observed;
  assert.ok(original.length > 20, `the stream had ${original.length} events`);
  assert.deepEqual(again, original.slice(3));
  assert.equal(again.at(-1).type, 'finish');
  // after the end, the whole stream again from the start
  const whole = await chunksOf(await agent.observe({ runId: original[0].runId }));
  assert.deepEqual(whole, original);
  // nobody else's runs
  await assert.rejects(client(other).getAgent('talker').observe({ runId: original[0].runId }), /404|no stream/);
});

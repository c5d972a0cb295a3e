// The official A2A JavaScript SDK (@a2a-js/sdk) against gatehouse, unchanged:
// it resolves the agent card, picks the JSON-RPC 1.0 interface from it and
// talks to /a2a/:agentId with an API key passed through a custom fetch.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let key;

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    agents: {
      assistant: {
        provider: 'fake', model: 'm-a2a-sdk', description: 'Answers briefly.',
        instructions: 'Be brief.', tools: ['memory_*'],
        memory: { enabled: true, last_messages: 20 }, max_steps: 6,
      },
    },
  }));
  key = gw.createKey('sdk-user', { owner: 'alice' });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

// Every request the SDK makes goes through this fetch: the key, and a log of
// what was sent so the test can check the wire.
const sent = [];
function authFetch(url, init = {}) {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${key}`);
  sent.push({ url: String(url), headers, body: init.body });
  return fetch(url, { ...init, headers });
}

async function client() {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }));
  return factory.createFromUrl(gw.url);
}

function userMessage(text, extra = {}) {
  return {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    role: Role.ROLE_USER,
    parts: [{
      content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '',
    }],
    contextId: '',
    taskId: '',
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

const textOf = (parts) => parts
  .filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

test('the SDK resolves the card and picks the JSON-RPC 1.0 interface', async () => {
  const resolver = new DefaultAgentCardResolver();
  const card = await resolver.resolve(gw.url);
  assert.equal(card.name, 'assistant');
  assert.equal(card.description, 'Answers briefly.');
  assert.equal(card.capabilities.streaming, true);
  const ext = card.capabilities.extensions.find((e) => e.uri.includes('client-tools'));
  assert.ok(ext, 'the client-tools extension is declared');
  assert.equal(ext.required, false);
  const iface = card.supportedInterfaces.find((i) => i.protocolVersion === '1.0');
  assert.equal(iface.url, `${gw.url}/a2a/assistant`);
  assert.equal(iface.protocolBinding, 'JSONRPC');
  assert.equal(card.securitySchemes.bearer.scheme.$case, 'httpAuthSecurityScheme');
  assert.equal(card.skills[0].id, 'assistant');

  const c = await client();
  assert.equal(c.protocolVersion, '1.0');
});

test('sendMessage returns a completed task with the answer as an artifact', async () => {
  await fake.script('m-a2a-sdk', { text: 'Paris is the capital.' });
  const c = await client();
  const task = await c.sendMessage({ message: userMessage('What is the capital of France?') });
  assert.ok(task.id, 'a task, not a message');
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(task.artifacts.length, 1);
  assert.equal(textOf(task.artifacts[0].parts), 'Paris is the capital.');
  assert.equal(task.history.at(-1).role, Role.ROLE_AGENT);
  assert.ok(task.contextId);

  // what went over the wire: the 1.0 method and version header
  const last = sent.at(-1);
  assert.equal(JSON.parse(last.body).method, 'SendMessage');
  assert.equal(last.headers.get('A2A-Version'), '1.0');

  // the model saw the user's words
  const reqs = await fake.requests('m-a2a-sdk');
  const body = reqs.at(-1).body;
  assert.ok(JSON.stringify(body.messages).includes('What is the capital of France?'));

  // getTask reads it back, history trimmed by historyLength
  const got = await c.getTask({ id: task.id, historyLength: 1, tenant: '' });
  assert.equal(got.id, task.id);
  assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(got.history.length, 1);
  assert.equal(got.history[0].role, Role.ROLE_AGENT);
  assert.equal(textOf(got.artifacts[0].parts), 'Paris is the capital.');
});

test('sendMessageStream yields the task, text chunks and the final status', async () => {
  await fake.script('m-a2a-sdk', { text: 'one two three four', stream: { chunk_delay_ms: 5 } });
  const c = await client();
  const events = [];
  for await (const ev of c.sendMessageStream({ message: userMessage('Count to four') })) {
    events.push(ev);
  }
  const kinds = events.map((e) => e.payload.$case);
  assert.equal(kinds[0], 'task');
  assert.equal(kinds.at(-1), 'statusUpdate');
  assert.ok(kinds.filter((k) => k === 'artifactUpdate').length >= 2, `chunks: ${kinds}`);
  const taskId = events[0].payload.value.id;
  assert.equal(events[0].payload.value.status.state, TaskState.TASK_STATE_WORKING);
  const chunks = events.filter((e) => e.payload.$case === 'artifactUpdate')
    .map((e) => e.payload.value);
  assert.equal(chunks[0].append, false);
  assert.ok(chunks.slice(1).every((ch) => ch.append));
  assert.equal(chunks.at(-1).lastChunk, true);
  assert.equal(chunks.map((ch) => textOf(ch.artifact.parts)).join(''), 'one two three four');
  const final = events.at(-1).payload.value;
  assert.equal(final.taskId, taskId);
  assert.equal(final.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(JSON.parse(sent.at(-1).body).method, 'SendStreamingMessage');

  // the stored task carries the streamed artifact under the same id
  const got = await c.getTask({ id: taskId, tenant: '' });
  assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(got.artifacts[0].artifactId, chunks[0].artifact.artifactId);
  assert.equal(textOf(got.artifacts[0].parts), 'one two three four');
});

test('a follow-up message in the same context sees the first one', async () => {
  await fake.script('m-a2a-sdk', { text: 'Noted.' }, { text: 'Your name is Ada.' });
  const c = await client();
  const first = await c.sendMessage({ message: userMessage('My name is Ada.') });
  const second = await c.sendMessage({
    message: userMessage('What is my name?', { contextId: first.contextId }),
  });
  assert.equal(second.contextId, first.contextId);
  assert.notEqual(second.id, first.id);
  const body = (await fake.requests('m-a2a-sdk')).at(-1).body;
  assert.ok(JSON.stringify(body.messages).includes('My name is Ada.'));
});

test('getTask of an unknown task is a TaskNotFoundError', async () => {
  const c = await client();
  await assert.rejects(c.getTask({ id: 'task_nope', tenant: '' }), (err) => {
    assert.equal(err.name, 'TaskNotFoundError');
    return true;
  });
});

test('the SDK in 0.3 compatibility mode speaks message/send and message/stream', async () => {
  // a 0.3-only view of the card: what a 0.3 client reads without A2A-Version
  const raw = await (await fetch(`${gw.url}/a2a/assistant/.well-known/agent-card.json`)).json();
  assert.equal(raw.protocolVersion, '0.3.0');
  delete raw.supportedInterfaces;
  const legacy = { enabled: true };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch, legacyCompat: legacy })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch, legacyCompat: legacy }),
  }));
  const c = await factory.createFromAgentCard(raw);
  assert.equal(c.protocolVersion, '0.3');

  await fake.script('m-a2a-sdk', { text: 'Old but gold.' },
    { text: 'still streaming', stream: { chunk_delay_ms: 2 } });
  const task = await c.sendMessage({ message: userMessage('Hello, 0.3') });
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(textOf(task.artifacts[0].parts), 'Old but gold.');
  assert.equal(JSON.parse(sent.at(-1).body).method, 'message/send');
  assert.equal(sent.at(-1).headers.get('A2A-Version'), '0.3');

  const events = [];
  for await (const ev of c.sendMessageStream({ message: userMessage('Stream, 0.3') })) {
    events.push(ev);
  }
  assert.equal(JSON.parse(sent.at(-1).body).method, 'message/stream');
  assert.equal(events[0].payload.$case, 'task');
  assert.equal(events.at(-1).payload.$case, 'statusUpdate');
  assert.equal(events.at(-1).payload.value.status.state, TaskState.TASK_STATE_COMPLETED);
  const chunks = events.filter((e) => e.payload.$case === 'artifactUpdate');
  assert.equal(chunks.map((e) => textOf(e.payload.value.artifact.parts)).join(''),
    'still streaming');

  const got = await c.getTask({ id: task.id, tenant: '' });
  assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(JSON.parse(sent.at(-1).body).method, 'tasks/get');
});

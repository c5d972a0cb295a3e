// The official `@anthropic-ai/sdk` client against gatehouse's Anthropic
// Messages surface, unchanged: baseURL = gatehouse, apiKey = a gatehouse key.
// create, stream (thinking, text), client tools and tool results, a tool the
// policy refuses (left out of what the model is offered; a call to it never
// reaches the client), count_tokens, and the API's error shapes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let client;
let key;

const weather = {
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const deleter = {
  name: 'delete_file',
  description: 'Deletes a file',
  input_schema: { type: 'object', properties: { path: { type: 'string' } } },
};

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    agents: {
      claude: { provider: 'fake_anthropic', passthrough: true, models: ['claude-*'], max_steps: 6 },
    },
    policies: {
      default: { agents: ['*'], tools: { allow: ['*'] },
        client_tools: { allow: ['*'], deny: ['delete_*'] } },
    },
  }));
  key = gw.createKey('sdk', { owner: 'sdk' });
  client = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

test('messages.create: text, usage, and what passes through to an Anthropic upstream', async () => {
  await fake.script('claude-create', { text: 'Hello from gatehouse.',
    usage: { input_tokens: 9, output_tokens: 4 } });
  const system = [{ type: 'text', text: 'Be nice.', cache_control: { type: 'ephemeral' } }];
  const r = await client.messages.create({
    model: 'claude-create', max_tokens: 1024, system,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi!',
      cache_control: { type: 'ephemeral' } }] }],
    thinking: { type: 'enabled', budget_tokens: 512 },
    context_management: { edits: [] },
    metadata: { user_id: 'dev-1' },
  }, { headers: { 'anthropic-beta': 'context-management-2025-06-27',
    'anthropic-version': '2023-06-01' } });
  assert.equal(r.type, 'message');
  assert.match(r.id, /^msg_/);
  assert.equal(r.role, 'assistant');
  assert.equal(r.model, 'claude-create');
  assert.equal(r.stop_reason, 'end_turn');
  assert.deepEqual(r.content, [{ type: 'text', text: 'Hello from gatehouse.' }]);
  assert.equal(r.usage.input_tokens, 9);
  assert.equal(r.usage.output_tokens, 4);

  const [sent] = await fake.requests('claude-create');
  assert.equal(sent.path, '/v1/messages');
  assert.equal(sent.headers['x-api-key'], 'sk-ant-test');          // the provider's key, not ours
  assert.equal(sent.headers['anthropic-version'], '2023-06-01');
  assert.equal(sent.headers['anthropic-beta'], 'context-management-2025-06-27');
  assert.equal(sent.body.model, 'claude-create');
  assert.equal(sent.body.max_tokens, 1024);
  assert.deepEqual(sent.body.system, system);                       // as sent, cache_control too
  assert.deepEqual(sent.body.thinking, { type: 'enabled', budget_tokens: 512 });
  assert.deepEqual(sent.body.context_management, { edits: [] });
  assert.deepEqual(sent.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'Hi!',
    cache_control: { type: 'ephemeral' } }] }]);
});

test('messages.stream: thinking with its signature, then text, as named events', async () => {
  await fake.script('claude-stream', { thinking: { text: 'Let me think about it.',
    signature: 'EqQBCkYIBxgCKkDsig+/==' }, text: 'Streaming works fine.' });
  const stream = client.messages.stream({
    model: 'claude-stream', max_tokens: 256,
    messages: [{ role: 'user', content: 'Stream please' }],
  });
  const types = [];
  let text = '';
  let thinking = '';
  stream.on('streamEvent', (ev) => {
    types.push(ev.type === 'content_block_delta' ? ev.delta.type : ev.type);
  });
  stream.on('text', (t) => { text += t; });
  stream.on('thinking', (t) => { thinking += t; });
  const msg = await stream.finalMessage();
  assert.equal(text, 'Streaming works fine.');
  assert.equal(thinking, 'Let me think about it.');
  assert.equal(msg.stop_reason, 'end_turn');
  assert.deepEqual(msg.content[0], { type: 'thinking', thinking: 'Let me think about it.',
    signature: 'EqQBCkYIBxgCKkDsig+/==' });
  assert.deepEqual(msg.content[1], { type: 'text', text: 'Streaming works fine.' });
  for (const t of ['message_start', 'content_block_start', 'thinking_delta', 'signature_delta',
    'content_block_stop', 'text_delta', 'message_delta', 'message_stop']) {
    assert.ok(types.includes(t), `${t} in ${types.join(',')}`);
  }
  assert.ok(types.indexOf('signature_delta') < types.indexOf('text_delta'));
});

test('client tools: tool_use comes back, the tool_result continues the run', async () => {
  await fake.script('claude-tools',
    { thinking: { text: 'I need the weather.', signature: 'sig-tools-1' },
      tool_calls: [{ id: 'toolu_up_1', name: 'get_weather', arguments: { city: 'Oslo' } }] },
    { text: 'It is 21 degrees in Oslo.' });
  const first = await client.messages.create({
    model: 'claude-tools', max_tokens: 256, tools: [weather, deleter],
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  assert.equal(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Oslo' });
  assert.match(use.id, /^call_/);                                    // gatehouse's id
  const think = first.content.find((b) => b.type === 'thinking');
  assert.equal(think.signature, 'sig-tools-1');

  // the policy denies delete_*: the model was never offered it
  const [req1] = await fake.requests('claude-tools');
  assert.deepEqual(req1.body.tools.map((t) => t.name), ['get_weather']);

  const second = await client.messages.create({
    model: 'claude-tools', max_tokens: 256, tools: [weather, deleter],
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id,
        content: [{ type: 'text', text: '{"temp":21}' }] }] },
    ],
  });
  assert.equal(second.stop_reason, 'end_turn');
  assert.equal(second.content[0].text, 'It is 21 degrees in Oslo.');
  const reqs = await fake.requests('claude-tools');
  const last = reqs[reqs.length - 1].body.messages;
  // the assistant turn goes back with its thinking block, signature byte for byte
  const asst = last.find((m) => m.role === 'assistant');
  assert.deepEqual(asst.content[0], { type: 'thinking', thinking: 'I need the weather.',
    signature: 'sig-tools-1' });
  const result = last[last.length - 1].content[0];
  assert.equal(result.type, 'tool_result');
  assert.deepEqual(result.content, [{ type: 'text', text: '{"temp":21}' }]);
});

test('a streamed call to a refused tool never reaches the client', async () => {
  await fake.script('claude-refused',
    { tool_calls: [{ name: 'delete_file', arguments: { path: '/etc/passwd' } }] },
    { text: 'I may not delete files.' });
  const stream = client.messages.stream({
    model: 'claude-refused', max_tokens: 256, tools: [weather, deleter],
    messages: [{ role: 'user', content: 'Delete /etc/passwd' }],
  });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'end_turn');
  assert.ok(!msg.content.some((b) => b.type === 'tool_use'));
  assert.equal(msg.content.map((b) => b.text).join(''), 'I may not delete files.');
  // gatehouse answered the model itself, saying why
  const reqs = await fake.requests('claude-refused');
  assert.equal(reqs.length, 2);
  const msgs = reqs[1].body.messages;
  const res = msgs[msgs.length - 1].content[0];
  assert.equal(res.type, 'tool_result');
  assert.equal(res.is_error, true);
  assert.match(res.content, /denied by policy \\"default\\": client_tools.deny \\"delete_\*\\"/);
});

test('count_tokens answers input_tokens', async () => {
  const r = await client.messages.countTokens({
    model: 'claude-count', messages: [{ role: 'user', content: 'How many tokens is this?' }],
  });
  assert.equal(typeof r.input_tokens, 'number');
  assert.ok(r.input_tokens > 0);
});

test('Authorization: Bearer works as well as x-api-key', async () => {
  await fake.script('claude-bearer', { text: 'bearer ok' });
  const c = new Anthropic({ authToken: key, apiKey: null, baseURL: gw.url, maxRetries: 0 });
  const r = await c.messages.create({ model: 'claude-bearer', max_tokens: 16,
    messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.content[0].text, 'bearer ok');
});

test('errors have the API shape and status; upstream errors keep their wording', async () => {
  const bad = new Anthropic({ apiKey: 'gh_wrong', baseURL: gw.url, maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'claude-x', max_tokens: 8,
    messages: [{ role: 'user', content: 'hi' }] }), (err) => {
    assert.ok(err instanceof Anthropic.AuthenticationError);
    assert.equal(err.status, 401);
    assert.equal(err.error.type, 'error');
    assert.equal(err.error.error.type, 'authentication_error');
    return true;
  });
  await assert.rejects(client.messages.create({ model: 'claude-x',
    messages: [{ role: 'user', content: 'hi' }] }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.error.error.type, 'invalid_request_error');
    assert.match(err.error.error.message, /max_tokens/);
    return true;
  });
  await assert.rejects(client.messages.create({ model: 'gpt-unknown', max_tokens: 8,
    messages: [{ role: 'user', content: 'hi' }] }), (err) => {
    assert.ok(err instanceof Anthropic.NotFoundError);
    assert.equal(err.error.error.type, 'not_found_error');
    return true;
  });
  await fake.script('claude-overloaded', { status: 529, repeat: true });
  await assert.rejects(client.messages.create({ model: 'claude-overloaded', max_tokens: 8,
    messages: [{ role: 'user', content: 'hi' }] }), (err) => {
    assert.equal(err.status, 529);
    assert.equal(err.error.error.type, 'overloaded_error');
    assert.doesNotMatch(err.error.error.message, /127\.0\.0\.1|:\d{4,5}/);
    return true;
  });
});

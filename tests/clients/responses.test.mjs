// The official `openai` npm client's responses API against gatehouse's
// /v1/responses, unchanged: baseURL = gatehouse + '/v1', apiKey = a gatehouse
// key. responses.create and responses.stream, function tools whose calls
// come back as function_call items, their results sent as
// function_call_output (by previous_response_id and by resending the whole
// input), stored responses and their owner, a call held for approval, and
// the SDK's error classes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let client;
let other;
let caller;           // a key whose policy lets it decide its own approvals
const MODELS = ['rsp-plain', 'rsp-stream', 'rsp-tools', 'rsp-tools-stream', 'rsp-resend',
  'rsp-approval', 'rsp-hidden'];

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const emailTool = {
  type: 'function',
  name: 'send_email',
  description: 'Send an email',
  parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
};

const agent = (model) => ({ provider: 'fake', model, instructions: 'Be brief.', max_steps: 6 });

// The audit rows of a run, as the CLI exports them.
function auditRows(run) {
  const out = gw.cli('audit', 'query', '--config', gw.configPath, '--run', run,
    '--format', 'ndjson');
  return out.split('\n').filter(Boolean).map((l) => JSON.parse(l)).sort((a, b) => a.seq - b.seq);
}

before(async () => {
  fake = await startFake();
  const agents = Object.fromEntries(MODELS.map((m) => [m, agent(m)]));
  gw = await startGateway(config(fake, {
    agents,
    policies: {
      default: { agents: MODELS.filter((m) => m !== 'rsp-hidden'), tools: { allow: ['*'] },
        client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'admin' } },
      self: { agents: ['rsp-approval'], client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'caller' } },
    },
  }));
  client = new OpenAI({ apiKey: gw.createKey('node', { owner: 'node' }),
    baseURL: `${gw.url}/v1`, maxRetries: 0 });
  other = new OpenAI({ apiKey: gw.createKey('other', { owner: 'other' }),
    baseURL: `${gw.url}/v1`, maxRetries: 0 });
  caller = new OpenAI({ apiKey: gw.createKey('self', { owner: 'self', policy: 'self' }),
    baseURL: `${gw.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

test('responses.create, non-streaming, and retrieve', async () => {
  await fake.script('rsp-plain', { text: 'Hello from gatehouse.',
    usage: { prompt_tokens: 9, completion_tokens: 4 } });
  const { data: r, response } = await client.responses.create({
    model: 'rsp-plain',
    instructions: 'Answer in English.',
    input: [{ role: 'developer', content: 'Be nice.' },
      { role: 'user', content: [{ type: 'input_text', text: 'Hi!' }] }],
  }).withResponse();
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed');
  assert.equal(r.model, 'rsp-plain');
  assert.equal(r.output_text, 'Hello from gatehouse.');
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.equal(r.usage.input_tokens, 9);
  assert.equal(r.usage.output_tokens, 4);
  assert.equal(r.usage.total_tokens, 13);
  assert.match(response.headers.get('x-gatehouse-run'), /^run_/);
  // the agent's instructions, the request's, then the input
  const sent = (await fake.requests('rsp-plain')).at(-1).body.messages;
  assert.deepEqual(sent, [
    { role: 'system', content: 'Be brief.' },
    { role: 'system', content: 'Answer in English.' },
    { role: 'system', content: 'Be nice.' },
    { role: 'user', content: 'Hi!' },
  ]);
  // stored: the same response back, and only for its own key
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output_text, 'Hello from gatehouse.');
  await assert.rejects(other.responses.retrieve(r.id), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.status, 404);
    return true;
  });
});

test('responses.stream: the event sequence, text deltas and the final response', async () => {
  await fake.script('rsp-stream', { text: 'one two three four', stream: { chunk_delay_ms: 5 } });
  const stream = client.responses.stream({ model: 'rsp-stream', input: 'Count.' });
  const types = [];
  const seqs = [];
  let text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    seqs.push(ev.sequence_number);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.equal(text, 'one two three four');
  assert.equal(final.output_text, 'one two three four');
  assert.equal(final.status, 'completed');
  assert.ok(final.usage.total_tokens > 0);
  assert.deepEqual(seqs, seqs.map((_, i) => i));
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress',
    'response.output_item.added', 'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
    'response.output_item.done', 'response.completed']);
  assert.equal(types.filter((t) => t === 'response.output_text.delta').length, 4);
});

test('function tools: a function_call, then function_call_output by previous_response_id',
  async () => {
    await fake.script('rsp-tools',
      { tool_calls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] },
      { text: 'It is 21 degrees in Oslo.' });
    const first = await client.responses.create({
      model: 'rsp-tools', input: 'Weather in Oslo?',
      tools: [weatherTool, { type: 'web_search' }],
    });
    assert.equal(first.status, 'completed');
    const calls = first.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Oslo' });
    assert.match(calls[0].call_id, /^call_/);
    // the hosted tool is not offered to the model; the function tool is
    const offered = (await fake.requests('rsp-tools')).at(-1).body.tools
      .map((t) => t.function.name);
    assert.deepEqual(offered, ['get_weather']);

    const { data: second, response } = await client.responses.create({
      model: 'rsp-tools', previous_response_id: first.id, tools: [weatherTool],
      input: [{ type: 'function_call_output', call_id: calls[0].call_id,
        output: '{"temp":21}' }],
    }).withResponse();
    assert.equal(second.output_text, 'It is 21 degrees in Oslo.');
    assert.equal(second.previous_response_id, first.id);
    // the model saw its call and the client's result
    const msgs = (await fake.requests('rsp-tools')).at(-1).body.messages;
    const tool = msgs.find((m) => m.role === 'tool');
    assert.equal(tool.tool_call_id, calls[0].call_id);
    assert.equal(tool.content, '{"temp":21}');
    // the decision and the client's result are audited, linked to the call
    const rows = auditRows(response.headers.get('x-gatehouse-run'));
    const forCall = rows.filter((r) => r.toolCallId === calls[0].call_id);
    assert.deepEqual(forCall.map((r) => r.event), ['allowed', 'client_result']);
    assert.equal(forCall[0].reason, 'policy "default": client_tools.allow "*"');
    assert.equal(forCall[1].outcome, 'ok');
    assert.equal(forCall[0].detail.surface, 'responses');

    // another key cannot continue from this response
    await assert.rejects(other.responses.create({ model: 'rsp-tools', previous_response_id:
      second.id, input: 'and tomorrow?' }), (e) => e instanceof OpenAI.NotFoundError);
  });

test('responses.stream with tools; the whole input resent with store: false', async () => {
  await fake.script('rsp-tools-stream',
    { text: 'Checking.', tool_calls: [{ name: 'get_weather', arguments: { city: 'Rome' } }],
      stream: { chunk_delay_ms: 2 } },
    { text: 'Sunny in Rome.', stream: { chunk_delay_ms: 2 } });
  const input = [{ role: 'user', content: 'Weather in Rome?' }];
  const stream = client.responses.stream({ model: 'rsp-tools-stream', input,
    tools: [weatherTool], store: false });
  const argDeltas = [];
  let argsDone = null;
  for await (const ev of stream) {
    if (ev.type === 'response.function_call_arguments.delta') argDeltas.push(ev.delta);
    if (ev.type === 'response.function_call_arguments.done') argsDone = ev.arguments;
  }
  const first = await stream.finalResponse();
  assert.equal(first.output[0].type, 'message');
  assert.equal(first.output_text, 'Checking.');
  const call = first.output.find((o) => o.type === 'function_call');
  assert.deepEqual(JSON.parse(argDeltas.join('')), { city: 'Rome' });
  assert.equal(argsDone, call.arguments);
  // not stored: no retrieve
  await assert.rejects(client.responses.retrieve(first.id),
    (e) => e instanceof OpenAI.NotFoundError);

  // the client resends everything, with its result at the end
  const again = client.responses.stream({
    model: 'rsp-tools-stream', tools: [weatherTool], store: false,
    input: [...input, ...first.output.map(({ parsed_arguments: _p, ...o }) => o),
      { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 24C' }],
  });
  const second = await again.finalResponse();
  assert.equal(second.output_text, 'Sunny in Rome.');
  const msgs = (await fake.requests('rsp-tools-stream')).at(-1).body.messages;
  assert.equal(msgs.filter((m) => m.role === 'user').length, 1);
  assert.equal(msgs.find((m) => m.role === 'tool').content, 'sunny, 24C');
});

test('a call held for approval: an mcp_approval_request item and a message naming it',
  async () => {
    await fake.script('rsp-approval',
      { tool_calls: [{ name: 'send_email', arguments: { to: 'bob@example.com' } }] });
    const r = await client.responses.create({ model: 'rsp-approval', input: 'Mail Bob.',
      tools: [emailTool] });
    const req = r.output.find((o) => o.type === 'mcp_approval_request');
    assert.ok(req, JSON.stringify(r.output));
    assert.match(req.id, /^apr_/);
    assert.equal(req.name, 'send_email');
    assert.deepEqual(JSON.parse(req.arguments), { to: 'bob@example.com' });
    assert.match(r.output_text, new RegExp(`Waiting for approval ${req.id}`));
    assert.equal(r.output.filter((o) => o.type === 'function_call').length, 0);
  });

test('an mcp_approval_response item decides the caller\'s own approval', async () => {
  await fake.script('rsp-approval',
    { tool_calls: [{ name: 'send_email', arguments: { to: 'ann@example.com' } }] });
  const r = await caller.responses.create({ model: 'rsp-approval', input: 'Mail Ann.',
    tools: [emailTool] });
  const req = r.output.find((o) => o.type === 'mcp_approval_request');
  assert.match(r.output_text, /needs your approval/);
  const next = await caller.responses.create({ model: 'rsp-approval', tools: [emailTool],
    previous_response_id: r.id,
    input: [{ type: 'mcp_approval_response', approval_request_id: req.id, approve: true }] });
  const call = next.output.find((o) => o.type === 'function_call');
  assert.equal(call.name, 'send_email');
  assert.deepEqual(JSON.parse(call.arguments), { to: 'ann@example.com' });
});

test('errors: the SDK error classes, with OpenAI error bodies', async () => {
  await assert.rejects(client.responses.create({ model: 'no-such-agent', input: 'x' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.error.type, 'not_found_error');
    assert.match(e.message, /no-such-agent/);
    return true;
  });
  await assert.rejects(client.responses.create({ model: 'rsp-hidden', input: 'x' }),
    (e) => e instanceof OpenAI.PermissionDeniedError);
  await assert.rejects(client.responses.create({ model: 'rsp-plain',
    input: [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }),
  (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.error.type, 'invalid_request_error');
    assert.match(e.message, /input\[0\]\.content\[0\]: "input_image" parts are not supported/);
    return true;
  });
  await assert.rejects(client.responses.create({ model: 'rsp-plain', input: 'x',
    previous_response_id: 'resp_nope' }), (e) => e instanceof OpenAI.NotFoundError);
  const bad = new OpenAI({ apiKey: 'gh_wrong', baseURL: `${gw.url}/v1`, maxRetries: 0 });
  await assert.rejects(bad.responses.create({ model: 'rsp-plain', input: 'x' }), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.error.type, 'authentication_error');
    return true;
  });
});

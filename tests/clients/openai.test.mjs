// The official `openai` npm client against gatehouse's OpenAI-compatible
// surface, unchanged: baseURL = gatehouse + '/v1', apiKey = a gatehouse key.
// Non-streaming, streaming, client tool calls answered with role "tool"
// messages (by hand and by the SDK's own runTools loop), models.list() and
// the SDK's error classes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let client;
const MODELS = ['oai-plain', 'oai-stream', 'oai-tools', 'oai-tools-stream', 'oai-runner',
  'oai-hidden'];

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

const agent = (model) => ({
  provider: 'fake', model, instructions: 'Be brief.', tools: ['memory_*'],
  memory: { enabled: true, last_messages: 20 }, max_steps: 6,
});

before(async () => {
  fake = await startFake();
  const agents = Object.fromEntries(MODELS.map((m) => [m, agent(m)]));
  gw = await startGateway(config(fake, {
    agents,
    policies: {
      default: { agents: MODELS.filter((m) => m !== 'oai-hidden'), tools: { allow: ['*'] },
        client_tools: { allow: ['*'] } },
    },
  }));
  client = new OpenAI({ apiKey: gw.createKey('node', { owner: 'node' }),
    baseURL: `${gw.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

test('chat.completions.create, non-streaming', async () => {
  await fake.script('oai-plain', { text: 'Hello from gatehouse.',
    usage: { prompt_tokens: 9, completion_tokens: 4 } });
  const { data: r, response } = await client.chat.completions.create({
    model: 'oai-plain',
    messages: [{ role: 'system', content: 'Be nice.' }, { role: 'user', content: 'Hi!' }],
  }).withResponse();
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'oai-plain');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, 'Hello from gatehouse.');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.deepEqual(r.usage, { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 });
  assert.equal(r.id, `chatcmpl-${response.headers.get('x-gatehouse-run')}`);
});

test('chat.completions.create, streaming', async () => {
  await fake.script('oai-stream', { text: 'one two three four', stream: { chunk_delay_ms: 5 } });
  const stream = await client.chat.completions.create({
    model: 'oai-stream',
    messages: [{ role: 'user', content: 'Count.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let n = 0;
  for await (const chunk of stream) {
    n++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, 'one two three four');
  assert.equal(finish, 'stop');
  assert.ok(n >= 6, `text came in pieces (${n} chunks)`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.ok(usage.completion_tokens > 0);
});

test('tool calls: the client runs the tool and sends role "tool" messages', async () => {
  await fake.script('oai-tools',
    { tool_calls: [{ name: 'get_weather', arguments: { city: 'Lyon' } }] },
    { text: 'It is 18 degrees in Lyon.' });
  const messages = [{ role: 'user', content: 'Weather in Lyon?' }];
  const first = await client.chat.completions.create({ model: 'oai-tools', messages,
    tools: [weatherTool] });
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  const msg = first.choices[0].message;
  assert.equal(msg.tool_calls.length, 1);
  const call = msg.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(args, { city: 'Lyon' });

  messages.push(msg, { role: 'tool', tool_call_id: call.id,
    content: JSON.stringify({ city: args.city, celsius: 18 }) });
  const second = await client.chat.completions.create({ model: 'oai-tools', messages,
    tools: [weatherTool] });
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.equal(second.choices[0].message.content, 'It is 18 degrees in Lyon.');
  assert.equal(second.id, first.id, 'the same run continued');
  // the model got the tool's result under the id it was handed out with
  const sent = await fake.requests('oai-tools');
  const toolMsg = sent[1].body.messages.at(-1);
  assert.equal(toolMsg.role, 'tool');
  assert.equal(toolMsg.tool_call_id, call.id);
  assert.deepEqual(JSON.parse(toolMsg.content), { city: 'Lyon', celsius: 18 });
});

test('tool calls while streaming, accumulated by the SDK stream helper', async () => {
  await fake.script('oai-tools-stream',
    { text: 'Let me check.', tool_calls: [{ name: 'get_weather', arguments: { city: 'Nice' } }] },
    { text: 'Sunny in Nice.' });
  const messages = [{ role: 'user', content: 'Weather in Nice?' }];
  const s1 = client.chat.completions.stream({ model: 'oai-tools-stream', messages,
    tools: [weatherTool] });
  const c1 = await s1.finalChatCompletion();
  assert.equal(c1.choices[0].finish_reason, 'tool_calls');
  const msg = c1.choices[0].message;
  assert.equal(msg.content, 'Let me check.');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'Nice' });

  messages.push(msg, { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'sunny' });
  const s2 = client.chat.completions.stream({ model: 'oai-tools-stream', messages,
    tools: [weatherTool] });
  const c2 = await s2.finalChatCompletion();
  assert.equal(c2.choices[0].finish_reason, 'stop');
  assert.equal(c2.choices[0].message.content, 'Sunny in Nice.');
});

test('the SDK runTools loop drives a client tool to the final answer', async () => {
  await fake.script('oai-runner',
    { tool_calls: [{ name: 'get_weather', arguments: { city: 'Bern' } }] },
    { text: 'Snow in Bern.' });
  const seen = [];
  const runner = client.chat.completions.runTools({
    model: 'oai-runner',
    messages: [{ role: 'user', content: 'Weather in Bern?' }],
    tools: [{
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: weatherTool.function.parameters,
        parse: JSON.parse,
        function: (args) => { seen.push(args); return { city: args.city, sky: 'snow' }; },
      },
    }],
  });
  assert.equal(await runner.finalContent(), 'Snow in Bern.');
  assert.deepEqual(seen, [{ city: 'Bern' }]);
});

test('models.list() and models.retrieve() show the agents the key may use', async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'gatehouse');
    ids.push(m.id);
  }
  assert.deepEqual(ids.sort(), MODELS.filter((m) => m !== 'oai-hidden').sort());
  const m = await client.models.retrieve('oai-plain');
  assert.equal(m.id, 'oai-plain');
});

test('errors arrive as the SDK error classes', async () => {
  const bad = new OpenAI({ apiKey: 'gh_not_a_key', baseURL: `${gw.url}/v1`, maxRetries: 0 });
  await assert.rejects(bad.models.list(), OpenAI.AuthenticationError);
  await assert.rejects(client.chat.completions.create({ model: 'no-such-agent',
    messages: [{ role: 'user', content: 'x' }] }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.match(err.message, /no-such-agent/);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'oai-hidden',
    messages: [{ role: 'user', content: 'x' }] }), OpenAI.PermissionDeniedError);
  await assert.rejects(client.chat.completions.create({ model: 'oai-plain',
    messages: [{ role: 'user', content: [{ type: 'image_url',
      image_url: { url: 'https://example.com/cat.png' } }] }] }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.match(err.message, /image_url/);
    return true;
  });
});

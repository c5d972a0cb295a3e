// @mastra/client-js against gatehouse, unchanged: generate and stream with
// client tools (the client runs them and sends results back), memory
// threads, and the generate round trip backed by the fake OpenAI upstream.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MastraClient } from '@mastra/client-js';
import { z } from 'zod';
import { startFake, startGateway, config } from './lib.mjs';

let fake;
let gw;
let key;

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    agents: {
      assistant: { provider: 'fake', model: 'mastra-gen', tools: ['memory_*'],
        memory: { enabled: true, last_messages: 20 }, max_steps: 6 },
      streamer: { provider: 'fake', model: 'mastra-stream', tools: ['memory_*'],
        memory: { enabled: true, last_messages: 20 }, max_steps: 6 },
    },
  }));
  key = gw.createKey('mastra-app');
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
});

function client() {
  return new MastraClient({ baseUrl: gw.url, headers: { Authorization: `Bearer ${key}` },
    retries: 0 });
}

const weatherCalls = [];
const weatherTool = {
  id: 'get_weather',
  description: 'Current weather for a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async (args) => {
    const city = args?.city ?? args?.context?.city;
    weatherCalls.push(city);
    return { city, sky: 'sunny', temp: 22 };
  },
};

test('generate with a client tool completes the round trip', async () => {
  await fake.script('mastra-gen',
    { tool_calls: [{ id: 'up1', name: 'get_weather', arguments: { city: 'Lisbon' } }] },
    { text: 'It is sunny and 22 degrees in Lisbon.' });
  const agent = client().getAgent('assistant');
  const res = await agent.generate([{ role: 'user', content: 'Weather in Lisbon?' }], {
    clientTools: { get_weather: weatherTool },
    memory: { thread: 'mastra-thread-1', resource: 'user-1' },
  });
  assert.equal(res.text, 'It is sunny and 22 degrees in Lisbon.');
  assert.equal(res.finishReason, 'stop');
  assert.deepEqual(weatherCalls, ['Lisbon']);
  const reqs = await fake.requests('mastra-gen');
  assert.equal(reqs.length, 2);
  // the client tool's schema reached the model as a function
  const fn = reqs[0].body.tools.find((t) => t.function.name === 'get_weather');
  assert.ok(fn, 'get_weather offered to the model');
  assert.equal(fn.function.parameters.properties.city.type, 'string');
  // its result came back as a tool message, once
  const last = reqs[1].body.messages.at(-1);
  assert.equal(last.role, 'tool');
  assert.deepEqual(JSON.parse(last.content), { city: 'Lisbon', sky: 'sunny', temp: 22 });
  const userTurns = reqs[1].body.messages.filter((m) => m.role === 'user');
  assert.equal(userTurns.length, 1, 'the user message is not duplicated');
});

test('memory threads through the client', async () => {
  const c = client();
  const list = await c.listMemoryThreads({ resourceId: 'user-1', agentId: 'assistant' });
  assert.ok(list.threads.some((t) => t.id === 'mastra-thread-1'));
  const thread = c.getMemoryThread({ threadId: 'mastra-thread-1', agentId: 'assistant' });
  const t = await thread.get();
  assert.equal(t.resourceId, 'user-1');
  const msgs = await thread.listMessages({ page: 0, perPage: 50 });
  assert.deepEqual(msgs.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
});

test('stream with a client tool, processDataStream sees every chunk', async () => {
  await fake.script('mastra-stream',
    { tool_calls: [{ id: 's1', name: 'get_weather', arguments: { city: 'Oslo' } }] },
    { text: 'Oslo is sunny today.', stream: { words_per_chunk: 1 } });
  const agent = client().getAgent('streamer');
  const res = await agent.stream([{ role: 'user', content: 'Weather in Oslo?' }], {
    clientTools: { get_weather: weatherTool },
    memory: { thread: 'mastra-thread-2', resource: 'user-1' },
  });
  const types = [];
  let text = '';
  let finishes = [];
  await res.processDataStream({
    onChunk: async (chunk) => {
      types.push(chunk.type);
      assert.ok(chunk.runId, 'every chunk names its run');
      if (chunk.type === 'text-delta') text += chunk.payload.text;
      if (chunk.type === 'finish') finishes.push(chunk.payload.stepResult.reason);
    },
  });
  assert.ok(weatherCalls.includes('Oslo'), 'the client ran its tool');
  assert.equal(text, 'Oslo is sunny today.');
  assert.ok(types.includes('tool-call'));
  assert.ok(types.includes('step-start'));
  assert.deepEqual(finishes, ['tool-calls', 'stop']);
  const reqs = await fake.requests('mastra-stream');
  assert.equal(reqs.length, 2);
  assert.equal(reqs[1].body.stream, true);
  assert.equal(reqs[1].body.messages.at(-1).role, 'tool');
});

test('a client tool result that does not match its outputSchema is a tool error', async () => {
  await fake.script('mastra-gen',
    { tool_calls: [{ id: 'o1', name: 'count_rows', arguments: { table: 'users' } }] },
    { text: 'The tool failed.' });
  const ran = [];
  const countTool = {
    id: 'count_rows',
    description: 'Count the rows of a table',
    inputSchema: z.object({ table: z.string() }),
    outputSchema: z.object({ rows: z.number().int(), table: z.string() }),
    // the wrong shape: rows as a string
    execute: async (args) => {
      ran.push(args?.table ?? args?.context?.table);
      return { rows: 'many', table: 'users' };
    },
  };
  const agent = client().getAgent('assistant');
  const res = await agent.generate([{ role: 'user', content: 'How many users?' }], {
    clientTools: { count_rows: countTool },
  });
  assert.deepEqual(ran, ['users']);
  assert.equal(res.text, 'The tool failed.');
  assert.equal(res.finishReason, 'stop');
  const reqs = await fake.requests('mastra-gen');
  const last = reqs.at(-1).body.messages.at(-1);
  assert.equal(last.role, 'tool');
  const seen = JSON.parse(last.content);
  assert.match(seen.error, /does not match the output schema: \$\.rows: expected integer, got string/);
  assert.ok(!last.content.includes('many'), 'the wrong result is not passed on');
  // the output schema reached gatehouse as JSON Schema (zod converted by the client)
  const admin = gw.createKey('mastra-admin', { admin: true });
  const r = await fetch(`${gw.url}/api/audit?tool=count_rows&limit=10`,
    { headers: { Authorization: `Bearer ${admin}` } });
  assert.equal(r.status, 200);
  const rows = (await r.json()).rows;
  const failed = rows.find((x) => x.event === 'failed');
  assert.ok(failed, JSON.stringify(rows));
  assert.equal(failed.reason, 'invalid result');
  assert.match(failed.error, /\$\.rows: expected integer, got string/);
  // a conforming result goes on as the structured value it is
  await fake.script('mastra-gen',
    { tool_calls: [{ id: 'o2', name: 'count_rows', arguments: { table: 'users' } }] },
    { text: 'There are 3 users.' });
  countTool.execute = async () => ({ rows: 3, table: 'users' });
  const ok = await agent.generate([{ role: 'user', content: 'How many users?' }], {
    clientTools: { count_rows: countTool },
  });
  assert.equal(ok.text, 'There are 3 users.');
  const again = (await fake.requests('mastra-gen')).at(-1).body.messages.at(-1);
  assert.deepEqual(JSON.parse(again.content), { rows: 3, table: 'users' });
});

test('errors reach the client with their status', async () => {
  const agent = client().getAgent('no-such-agent');
  await assert.rejects(() => agent.generate('hi'), (err) => {
    assert.match(String(err.message), /404/);
    return true;
  });
});

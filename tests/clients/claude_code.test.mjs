// The Claude Code CLI (`claude -p`, the pinned @anthropic-ai/claude-code)
// through gatehouse, unchanged: ANTHROPIC_BASE_URL = gatehouse,
// ANTHROPIC_API_KEY = a gatehouse key, offline against the scripted fake
// model. The model asks for shell commands; the key's policy has argument
// conditions on Bash. An allowed command runs (its file appears), a denied
// one never runs (the model hears why, the developer sees a normal answer),
// both are in the audit log with the rule that decided. (A command held for
// approval and decided in the admin UI: tests/browser/claude_code_approval.)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { startFake, startGateway, config, runClaude } from './lib.mjs';

let fake;
let gw;
let key;
let scratch;

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    agents: {
      claude: { provider: 'fake_anthropic', passthrough: true, models: ['claude-*'], max_steps: 8 },
    },
    policies: {
      default: {
        agents: ['claude'], tools: { allow: [] }, client_tools: { allow: ['*'] },
        arguments: [
          { name: 'no-sudo-rm', tool: 'Bash', pointer: '/command',
            regex: '(^|[;&|]\\s*)(sudo|rm\\s+-rf)', effect: 'deny' },
        ],
      },
    },
  }));
  key = gw.createKey('laptop', { owner: 'dev' });
  scratch = mkdtempSync(join(tmpdir(), 'gh-claude-'));
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const claude = (model, prompt, opts = {}) => runClaude(gw, key, model, prompt, { scratch, ...opts });
const auditRows = (tool) => gw.auditRows({ tool });

test('claude -p: the allowed command runs, the denied one never does, both audited', async () => {
  await fake.script('claude-run',
    { thinking: { text: 'I will create the file.', signature: 'sig-cc-1' },
      tool_calls: [{ name: 'Bash', arguments: { command: 'touch allowed.txt',
        description: 'Create a file' } }] },
    { tool_calls: [{ name: 'Bash', arguments: { command: 'mkdir -p keep && rm -rf keep && touch denied.txt',
      description: 'Clean up' } }] },
    { text: 'All done here.' });
  const r = await claude('claude-run', 'Create allowed.txt, then clean up.', {
    onStart: (child, work) => mkdirSync(join(work, 'keep')),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /All done here\./);
  assert.ok(existsSync(join(r.work, 'allowed.txt')), 'the allowed command ran');
  assert.ok(!existsSync(join(r.work, 'denied.txt')), 'the denied command never ran');
  assert.ok(existsSync(join(r.work, 'keep')), 'nothing of the denied command ran');

  // the model heard why; the thinking block went back with its signature
  const reqs = (await fake.requests('claude-run')).filter((q) => q.body.tools);
  assert.equal(reqs.length, 3);
  const second = reqs[1].body.messages;
  const asst = second.filter((m) => m.role === 'assistant').pop();
  assert.deepEqual(asst.content[0], { type: 'thinking', thinking: 'I will create the file.',
    signature: 'sig-cc-1' });
  const third = reqs[2].body.messages;
  const refusal = third[third.length - 1].content.find((b) => b.type === 'tool_result');
  assert.equal(refusal.is_error, true);
  assert.match(JSON.parse(refusal.content).error,
    /^denied by policy "default": arguments "no-sudo-rm"/);

  const all = auditRows('Bash');
  const runId = all.find((y) => JSON.stringify(y.args).includes('allowed.txt')).runId;
  const rows = all.filter((x) => x.runId === runId);
  const allowed = rows.find((x) => x.event === 'allowed');
  const denied = rows.find((x) => x.event === 'denied');
  assert.ok(allowed && denied, JSON.stringify(rows));
  assert.match(JSON.stringify(allowed.args), /touch allowed\.txt/);
  assert.match(allowed.reason, /client_tools\.allow/);
  assert.match(JSON.stringify(denied.args), /rm -rf keep/);
  assert.match(denied.reason, /arguments "no-sudo-rm" \(Bash \/command matches regex/);
  // the client's result is audited, linked to the call
  const result = rows.find((x) => x.event === 'client_result');
  assert.equal(result.toolCallId, allowed.toolCallId);
  assert.equal(typeof result.detail.result_bytes, 'number');
  assert.match(result.detail.result_sha256, /^[0-9a-f]{64}$/);
  assert.equal(result.detail.is_error, false);
  // the session is one thread
  assert.ok(allowed.threadId, 'the session names a thread');
  assert.equal(denied.threadId, allowed.threadId);
});

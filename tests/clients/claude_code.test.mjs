// The Claude Code CLI (`claude -p`, the pinned @anthropic-ai/claude-code)
// through gatehouse, unchanged: ANTHROPIC_BASE_URL = gatehouse,
// ANTHROPIC_API_KEY = a gatehouse key, offline against the scripted fake
// model. The model asks for shell commands; the key's policy has argument
// conditions on Bash. An allowed command runs (its file appears), a denied
// one never runs (the model hears why, the developer sees a normal answer),
// both are in the audit log with the rule that decided. A command that needs
// approval is held until an admin approves it through the admin API, then
// runs once; a different command is not covered by that approval.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { startFake, startGateway, config } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const CLAUDE = join(here, '../node_modules/@anthropic-ai/claude-code/bin/claude.exe');

let fake;
let gw;
let key;
let admin;
let scratch;

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    server: { listen: '127.0.0.1:0', threads: 24, max_streams: 8, heartbeat_ms: 1000,
      approval_wait_ms: 6000 },
    agents: {
      claude: { provider: 'fake_anthropic', passthrough: true, models: ['claude-*'], max_steps: 8 },
    },
    policies: {
      default: {
        agents: ['claude'], tools: { allow: [] }, client_tools: { allow: ['*'] },
        arguments: [
          { name: 'no-sudo-rm', tool: 'Bash', pointer: '/command',
            regex: '(^|[;&|]\\s*)(sudo|rm\\s+-rf)', effect: 'deny' },
          { name: 'hold-deploys', tool: 'Bash', pointer: '/command', regex: '^touch deploy-',
            effect: 'approval' },
        ],
      },
    },
  }));
  key = gw.createKey('laptop', { owner: 'dev' });
  admin = gw.createKey('reviewer', { admin: true });
  scratch = mkdtempSync(join(tmpdir(), 'gh-claude-'));
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// Runs `claude -p prompt` in a fresh working directory; resolves with
// {code, stdout, stderr, work}. onStart(child) runs once it is spawned.
function claude(model, prompt, { onStart } = {}) {
  const home = mkdtempSync(join(scratch, 'home-'));
  const work = mkdtempSync(join(scratch, 'work-'));
  return new Promise((resolve, reject) => {
    const child = spawn(CLAUDE, ['-p', prompt, '--allowedTools', 'Bash', '--model', model], {
      cwd: work,
      env: {
        PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: gw.url,
        ANTHROPIC_API_KEY: key, ANTHROPIC_MODEL: model,
        ANTHROPIC_SMALL_FAST_MODEL: 'claude-small', DISABLE_TELEMETRY: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, work });
    });
    if (onStart) onStart(child, work);
  });
}

function auditRows(tool) {
  const out = gw.cli('audit', 'query', '--config', gw.configPath, '--tool', tool,
    '--format', 'ndjson', '--limit', '100');
  return out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

const api = async (method, path, body) => {
  const r = await fetch(gw.url + path, {
    method, headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: await r.json() };
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

test('a held command runs once approved; a different command is not covered', async () => {
  await fake.script('claude-held',
    { tool_calls: [{ name: 'Bash', arguments: { command: 'touch deploy-1.txt',
      description: 'Deploy' } }] },
    { tool_calls: [{ name: 'Bash', arguments: { command: 'touch deploy-2.txt',
      description: 'Deploy again' } }] });
  let approved = null;
  const r = await claude('claude-held', 'Deploy twice.', {
    onStart: async () => {
      // the reviewer approves the first held call in the admin API
      for (let i = 0; i < 100 && !approved; i++) {
        const { body } = await api('GET', '/api/approvals?status=pending');
        const list = body.approvals || body.data || body;
        const mine = (Array.isArray(list) ? list : []).find((a) => a.toolName === 'Bash' &&
          JSON.stringify(a.args).includes('deploy-1'));
        if (mine) {
          const res = await api('POST', `/api/approvals/${mine.id}/approve`, { reason: 'ok' });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          approved = mine;
        } else {
          await sleep(100);
        }
      }
    },
  });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(approved, 'the held call showed up as a pending approval');
  assert.ok(existsSync(join(r.work, 'deploy-1.txt')), 'the approved command ran');
  assert.ok(!existsSync(join(r.work, 'deploy-2.txt')), 'the other command did not');
  // the turn ended naming the approval the second command waits for
  const { body } = await api('GET', '/api/approvals?status=pending');
  const list = body.approvals || body.data || body;
  const second = list.find((a) => JSON.stringify(a.args).includes('deploy-2'));
  assert.ok(second, 'the second command waits for its own approval');
  assert.notEqual(second.id, approved.id);
  assert.match(r.stdout, new RegExp(second.id));
});

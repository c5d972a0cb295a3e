// The Codex CLI (`@openai/codex`, `codex exec`) unchanged, with gatehouse as
// its model provider: a temporary CODEX_HOME whose config.toml names a
// provider with wire_api "responses", base_url gatehouse + '/v1' and env_key
// holding a gatehouse key. Offline: the agent's model is the scripted fake.
//
// A first run discovers Codex's shell tool (its name and the argument that
// holds the command) from what Codex declared, as gatehouse passed it on to
// the model. Then the scripted model asks for one command the policy allows
// and one it refuses: the first runs (its file appears), the second never
// reaches Codex, and the audit log has both with the rule that decided.
// Last, a command held for an admin's approval: Codex shows the message that
// names the approval, and the command does not run.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { startFake, startGateway, config } from './lib.mjs';

const CODEX = fileURLToPath(new URL('../node_modules/@openai/codex/bin/codex.js', import.meta.url));

let fake;
let gw;
let home;
let key;
let heldKey;
let shell;            // {name, arg}: Codex's shell tool, as it declared it

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    server: { approval_wait_ms: 1500 },
    agents: {
      'codex-agent': { provider: 'fake', model: 'cx', max_steps: 6 },
      'codex-held': { provider: 'fake', model: 'cx-held', max_steps: 6 },
    },
    policies: {
      // Codex declares its whole tool set, so the policy allows every
      // client tool and governs the shell tool's calls: one per minute
      default: { agents: ['codex-agent'], client_tools: { allow: ['*'] },
        rate_limits: { tool_calls_per_minute: { exec_command: 1 } } },
      held: { agents: ['codex-held'], client_tools: { allow: ['*'] },
        approval: { require: ['exec_command'], approver: 'admin' } },
    },
  }));
  key = gw.createKey('codex', { owner: 'dev' });
  heldKey = gw.createKey('codex-held', { owner: 'dev', policy: 'held' });
  home = mkdtempSync(join(tmpdir(), 'gh-codex-home-'));
});

after(async () => {
  await gw?.stop();
  await fake?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

// One `codex exec` in a fresh working directory; resolves to its exit
// status, its output and the directory (the caller removes it). Not
// spawnSync: the event loop must stay free meanwhile, or the fake's control
// connection, closed while idle, is only noticed when it is reused.
async function codexExec(model, apiKey, prompt) {
  writeFileSync(join(home, 'config.toml'), [
    `model = "${model}"`,
    'model_provider = "gatehouse"',
    '[model_providers.gatehouse]',
    'name = "gatehouse"',
    `base_url = "${gw.url}/v1"`,
    'env_key = "GATEHOUSE_KEY"',
    'wire_api = "responses"',
    '',
  ].join('\n'));
  const work = mkdtempSync(join(tmpdir(), 'gh-codex-work-'));
  const p = spawn(process.execPath, [CODEX, 'exec', '--skip-git-repo-check',
    '--sandbox', 'workspace-write', prompt], {
    cwd: work, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, CODEX_HOME: home, HOME: home, GATEHOUSE_KEY: apiKey,
      RUST_LOG: 'error', NO_COLOR: '1' },
  });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { out += d; });
  const timer = setTimeout(() => p.kill('SIGKILL'), 120000);
  const status = await new Promise((resolve, reject) => {
    p.once('error', reject);
    p.once('close', (code) => resolve(code));
  }).finally(() => clearTimeout(timer));
  return { status, out, work };
}

function auditRows(run) {
  const out = gw.cli('audit', 'query', '--config', gw.configPath, '--run', run,
    '--format', 'ndjson');
  return out.split('\n').filter(Boolean).map((l) => JSON.parse(l)).sort((a, b) => a.seq - b.seq);
}

test('codex exec: discover the shell tool Codex declares', async (t) => {
  const before = (await fake.requests('cx')).length;
  const r = await codexExec('codex-agent', key, 'Say hello.');
  rmSync(r.work, { recursive: true, force: true });
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /echo: Say hello\./);
  const sent = (await fake.requests('cx')).slice(before);
  assert.equal(sent.length, 1);
  const tools = sent[0].body.tools.map((x) => x.function);
  t.diagnostic(`Codex declared: ${tools.map((f) => f.name).join(', ')}`);
  const sh = tools.find((f) => /exec|shell/.test(f.name) &&
    ['cmd', 'command'].some((a) => f.parameters?.properties?.[a]));
  assert.ok(sh, 'a shell tool among Codex\'s tools');
  shell = { name: sh.name, arg: ['cmd', 'command'].find((a) => sh.parameters.properties[a]) };
  t.diagnostic(`shell tool: ${JSON.stringify(sh)}`);
  // the policy below is written for the name Codex uses
  assert.equal(shell.name, 'exec_command');
});

test('codex exec: the allowed command runs, the refused one never reaches Codex',
  async () => {
    assert.ok(shell, 'discovered by the test before');
    const call = (id, file) => ({ id, name: shell.name,
      arguments: { [shell.arg]: `touch ${file}` } });
    await fake.script('cx',
      { tool_calls: [call('call_up_1', 'allowed.txt')] },
      { tool_calls: [call('call_up_2', 'denied.txt')] },
      { text: 'One file made, the other refused.' });
    const before = (await fake.requests('cx')).length;
    const r = await codexExec('codex-agent', key, 'Make two files.');
    try {
      assert.equal(r.status, 0, r.out);
      assert.ok(existsSync(join(r.work, 'allowed.txt')), r.out);
      assert.ok(!existsSync(join(r.work, 'denied.txt')), r.out);
      assert.match(r.out, /One file made, the other refused\./);
      assert.doesNotMatch(r.out, /touch denied\.txt/);
    } finally {
      rmSync(r.work, { recursive: true, force: true });
    }
    // the model was told why, by gatehouse, in place of Codex
    const sent = (await fake.requests('cx')).slice(before);
    const last = sent.at(-1).body.messages;
    const refused = last.filter((m) => m.role === 'tool').at(-1);
    assert.match(refused.content, /rate limited/);

    // both calls in the audit log, with the rule that decided
    const admin = gw.cli('audit', 'query', '--config', gw.configPath, '--tool', shell.name,
      '--format', 'ndjson').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const runId = admin[0].runId;
    const rows = auditRows(runId).filter((x) => x.toolName === shell.name);
    const byFile = (f) => rows.filter((x) => x.args?.[shell.arg] === `touch ${f}`);
    assert.deepEqual(byFile('allowed.txt').map((x) => x.event), ['allowed', 'client_result']);
    assert.equal(byFile('allowed.txt')[0].reason, 'policy "default": client_tools.allow "*"');
    assert.deepEqual(byFile('denied.txt').map((x) => x.event), ['rate_limited']);
    assert.match(byFile('denied.txt')[0].reason, /tool_calls_per_minute/);
    assert.ok(rows.every((x) => x.detail?.surface === 'responses' || x.detail?.surface == null));
  });

test('codex exec: a command held for approval does not run; Codex shows the approval id',
  async (t) => {
    assert.ok(shell, 'discovered by the test before');
    await fake.script('cx-held',
      { tool_calls: [{ name: shell.name, arguments: { [shell.arg]: 'touch held.txt' } }] });
    const r = await codexExec('codex-held', heldKey, 'Make a file.');
    try {
      assert.equal(r.status, 0, r.out);
      assert.ok(!existsSync(join(r.work, 'held.txt')), r.out);
      assert.match(r.out, /Waiting for approval apr_[0-9a-z]+ \(tool exec_command needs an admin's approval\)/);
      t.diagnostic(`Codex showed: ${r.out.split('\n').filter((l) => /approval/i.test(l)).join(' | ')}`);
    } finally {
      rmSync(r.work, { recursive: true, force: true });
    }
  });

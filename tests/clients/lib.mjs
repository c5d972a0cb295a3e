// Shared harness for the client-compatibility and browser tests: starts the
// real gatehouse binary and the scripted fake upstream on loopback, the same
// way tests/integration/harness.py does. Node's standard library only.
// With GH_TEST_BACKEND=pg and GH_TEST_PG_URL (tests/pg/with_pg.sh) every
// gateway gets a database of its own on that PostgreSQL server.
//
//   const fake = await startFake();
//   const gw = await startGateway(config(fake, {...}));
//   const key = gw.createKey('alice');
//   ... drive gw.url with a real npm client ...
//   await gw.stop(); await fake.stop();

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const GH_BIN = process.env.GH_BIN || join(here, '../../build/gatehouse');
export const GH_FAKE = process.env.GH_FAKE || join(here, '../../build/tests/fake_upstream');
export const GH_SRC = process.env.GH_SRC || join(here, '../..');
export const CLAUDE = join(here, '../node_modules/@anthropic-ai/claude-code/bin/claude.exe');

const SANITIZER = ['ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:',
  'ThreadSanitizer'];

// The backend every gateway runs on: a SQLite file in its directory, or
// (GH_TEST_BACKEND=pg) a fresh database on the server GH_TEST_PG_URL names.
export const ON_PG = process.env.GH_TEST_BACKEND === 'pg';
const PG_URL = process.env.GH_TEST_PG_URL;
if (ON_PG && !PG_URL) throw new Error('GH_TEST_BACKEND=pg needs GH_TEST_PG_URL (tests/pg/with_pg.sh)');

function psql(url, sql) {
  const p = spawnSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-X', '-q', '-At', '-c', sql],
    { encoding: 'utf8', timeout: 60000 });
  if (p.status !== 0) throw new Error(`psql: ${sql}\n${p.stderr}`);
  return p.stdout;
}

// url with its database replaced by name (postgresql://u:p@/db?host=...:
// no host part, which WHATWG URL refuses).
const withDb = (url, name) => url.replace(/^(postgres(?:ql)?:\/\/[^/?]*)\/?[^?]*/, `$1/${name}`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(fn, what, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

function checkSanitizers(text, who) {
  for (const m of SANITIZER) {
    if (text.includes(m)) throw new Error(`${who} sanitizer report:\n${text.slice(-4000)}`);
  }
}

export async function startFake() {
  const dir = mkdtempSync(join(tmpdir(), 'gh-fake-'));
  const portFile = join(dir, 'port');
  let err = '';
  const proc = spawn(GH_FAKE, ['--listen', '127.0.0.1:0', '--port-file', portFile], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  proc.stderr.on('data', (d) => { err += d; });
  const port = await waitFor(() => existsSync(portFile) && readFileSync(portFile, 'utf8').trim(),
    'the fake upstream');
  const url = `http://127.0.0.1:${port}`;
  const control = async (path, body) => {
    const r = await fetch(url + path, body ? {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    } : undefined);
    if (!r.ok) throw new Error(`fake ${path}: ${r.status} ${await r.text()}`);
    return r.json();
  };
  return {
    url,
    port: Number(port),
    script: (model, ...replies) => control('/_script', { model, replies }),
    toolScript: (tool, ...replies) => control('/_script', { tool, replies }),
    requests: (model) => control('/_requests' + (model ? `?model=${encodeURIComponent(model)}` : '')),
    reset: () => control('/_reset', {}),
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      rmSync(dir, { recursive: true, force: true });
      checkSanitizers(err, 'fake upstream');
    },
  };
}

// A config for tests: provider "fake" (OpenAI wire) points at the fake.
export function config(fake, extra = {}) {
  const cfg = {
    server: { listen: '127.0.0.1:0', threads: 24, max_streams: 8, heartbeat_ms: 1000,
      approval_wait_ms: 3000 },
    database: { path: 'gatehouse.db' },
    providers: {
      offline: { type: 'mock' },
      fake: { type: 'openai', base_url: `${fake.url}/v1`, api_key: 'sk-test-provider-secret',
        timeout_ms: 5000, max_retries: 1, retry_base_ms: 20 },
      fake_anthropic: { type: 'anthropic', base_url: fake.url, api_key: 'sk-ant-test',
        timeout_ms: 5000, max_retries: 1, retry_base_ms: 20 },
    },
    agents: {
      assistant: { provider: 'fake', model: 'm', instructions: 'Be brief.',
        tools: ['memory_*'], memory: { enabled: true, last_messages: 20 }, max_steps: 6 },
    },
    policies: {
      default: { agents: ['*'], tools: { allow: ['*'] }, client_tools: { allow: ['*'] } },
    },
    audit: { checkpoint_rows: 50, checkpoint_seconds: 2 },
  };
  for (const [k, v] of Object.entries(extra)) {
    cfg[k] = (typeof v === 'object' && !Array.isArray(v) && typeof cfg[k] === 'object')
      ? { ...cfg[k], ...v } : v;
  }
  return cfg;
}

// dir: an existing directory to run in (a database prepared beforehand);
// by default a fresh one. Either way stop() removes it. On PostgreSQL the
// config names a new database as "${GH_TEST_DB_URL}" (keeping its other
// database options), and stop() drops it.
export async function startGateway(cfg, { env = {}, dir = mkdtempSync(join(tmpdir(), 'gh-test-')) } = {}) {
  let pgName = null;
  const url = cfg.database && cfg.database.url;
  if (ON_PG && (!url || (url === '${GH_TEST_DB_URL}' && !env.GH_TEST_DB_URL))) {
    pgName = `gh_t_${randomBytes(6).toString('hex')}`;
    psql(PG_URL, `CREATE DATABASE ${pgName}`);
    const { path, ...rest } = cfg.database || {};
    cfg = { ...cfg, database: { ...rest, url: '${GH_TEST_DB_URL}' } };
    env = { ...env, GH_TEST_DB_URL: withDb(PG_URL, pgName) };
  }
  const dropDb = () => {
    if (pgName) psql(PG_URL, `DROP DATABASE IF EXISTS ${pgName} WITH (FORCE)`);
    pgName = null;
  };
  const configPath = join(dir, 'gatehouse.json');
  writeFileSync(configPath, JSON.stringify(cfg, null, 2));
  let out = '';
  let err = '';
  let proc = spawn(GH_BIN, ['serve', '--config', configPath], {
    cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  let port;
  try {
    port = await waitFor(() => {
      if (proc.exitCode !== null) throw new Error(`gatehouse exited ${proc.exitCode}:\n${err}`);
      const m = out.match(/listening on https?:\/\/[^:]+:(\d+)/);
      return m && Number(m[1]);
    }, 'gatehouse to listen', 30000);
  } catch (e) {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
    }
    dropDb();
    throw e;
  }
  const cli = (...args) => {
    const p = spawnSync(GH_BIN, args, { cwd: dir, encoding: 'utf8', env: { ...process.env, ...env } });
    checkSanitizers(p.stderr || '', 'gatehouse CLI');
    if (p.status !== 0) throw new Error(`gatehouse ${args.join(' ')} failed:\n${p.stdout}${p.stderr}`);
    return p.stdout;
  };
  return {
    dir,
    port,
    url: `http://127.0.0.1:${port}`,
    configPath,
    logs: () => err,
    cli,
    createKey(name, { owner, policy, admin } = {}) {
      const args = ['keys', 'create', '--config', configPath, '--name', name];
      if (owner) args.push('--owner', owner);
      if (policy) args.push('--policy', policy);
      if (admin) args.push('--admin');
      return cli(...args).trim().split('\n').pop();
    },
    // The audit log's rows as the CLI exports them, oldest first; filter
    // names query options: {tool: 'Bash'}, {run: 'run_…', event: 'approved'}.
    auditRows(filter = {}) {
      const args = ['audit', 'query', '--config', configPath, '--format', 'ndjson', '--limit', '1000'];
      for (const [k, v] of Object.entries(filter)) args.push(`--${k}`, String(v));
      return cli(...args).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
        .sort((a, b) => a.seq - b.seq);
    },
    createAdmin(user, password) {
      const p = spawnSync(GH_BIN, ['admin', 'create', '--config', configPath, '--user', user], {
        cwd: dir, input: `${password}\n`, encoding: 'utf8', env: { ...process.env, ...env },
      });
      if (p.status !== 0) throw new Error(`admin create failed: ${p.stderr}`);
    },
    // Stops the server and starts it again on the same directory, config
    // and address: a config that asked for any port (":0") is given the
    // one the first start bound.
    async restart() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      checkSanitizers(err, 'gatehouse');
      const listen = cfg.server && cfg.server.listen;
      if (typeof listen === 'string' && listen.endsWith(':0')) {
        const again = { ...cfg, server: { ...cfg.server, listen: `${listen.slice(0, -2)}:${port}` } };
        writeFileSync(configPath, JSON.stringify(again, null, 2));
      }
      out = '';
      proc = spawn(GH_BIN, ['serve', '--config', configPath], {
        cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      proc.stdout.on('data', (d) => { out += d; });
      proc.stderr.on('data', (d) => { err += d; });
      await waitFor(() => {
        if (proc.exitCode !== null) throw new Error(`gatehouse exited ${proc.exitCode}:\n${err}`);
        return /listening on https?:\/\//.test(out);
      }, 'gatehouse to listen again', 30000);
    },
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      try {
        checkSanitizers(err, 'gatehouse');
        if (proc.exitCode !== 0) throw new Error(`gatehouse exited ${proc.exitCode}:\n${err.slice(-3000)}`);
        rmSync(dir, { recursive: true, force: true });
      } finally {
        dropDb();
      }
    },
  };
}

// Runs the Claude Code CLI, `claude -p prompt` with Bash allowed, offline
// against gw with key: a fresh HOME and working directory under scratch.
// Resolves with {code, stdout, stderr, work} once it exits (killed after
// two minutes); onStart(child, work) runs once it is spawned.
export function runClaude(gw, key, model, prompt, { scratch, onStart } = {}) {
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

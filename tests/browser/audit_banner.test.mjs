// The Overview warns about the audit log: a database tampered with while
// gatehouse was stopped starts with a broken chain, and the first page an
// admin sees says so (and /healthz reports "degraded").

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { GH_BIN, startFake, startGateway } from '../clients/lib.mjs';
import { ADMIN_PASSWORD, adminConfig, launchBrowser, login } from './setup.mjs';

const T = { timeout: 120000 };
let fake;
let gw;
let browser;

function run(dir, args, input) {
  const p = spawnSync(args[0], args.slice(1), { cwd: dir, input, encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`${args.join(' ')} failed:\n${p.stdout}${p.stderr}`);
  return p.stdout;
}

before(async () => {
  fake = await startFake();
  const cfg = adminConfig(fake);
  const dir = mkdtempSync(join(tmpdir(), 'gh-banner-'));
  const conf = join(dir, 'gatehouse.json');
  writeFileSync(conf, JSON.stringify(cfg, null, 2));
  // a log written by the CLI (each command signs what it wrote) ...
  run(dir, [GH_BIN, 'admin', 'create', '--config', conf, '--user', 'alice'], `${ADMIN_PASSWORD}\n`);
  run(dir, [GH_BIN, 'keys', 'create', '--config', conf, '--name', 'app']);
  // ... then edited in SQLite while no gatehouse runs: the newest row
  run(dir, ['sqlite3', join(dir, 'gatehouse.db'),
    "UPDATE audit_events SET owner = 'someone else' WHERE seq = (SELECT max(seq) FROM audit_events)"]);
  gw = await startGateway(cfg, { dir });
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
});

test('a broken audit chain is on the Overview and in /healthz', T, async () => {
  const health = await (await fetch(`${gw.url}/healthz`)).json();
  assert.equal(health.status, 'degraded');
  assert.equal(health.audit.chain, 'broken');
  assert.match(health.audit.message, /row \d+ was modified/);
  assert.match(gw.logs(), /AUDIT LOG NOT INTACT/);

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await login(page, gw, 'alice');
  await page.goto(`${gw.url}/admin/#/overview`);
  const banner = page.getByRole('alert').filter({ hasText: 'The audit log is not intact' });
  await banner.waitFor();
  await banner.getByText(/Row \d+ was modified/).first().waitFor();
  await banner.getByText('the check at start-up', { exact: false }).waitFor();
  await banner.getByRole('link', { name: 're-verify on the Audit log page' }).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

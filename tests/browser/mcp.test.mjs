// The admin UI's MCP servers page in a real browser (Debian's chromium,
// headless) against the real gatehouse binary running the stdio test
// server (tests/integration/mcp_test_server.py): an upstream's state and
// tools, a changed definition held, compared and accepted; what the
// upstream sent stays text.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { GH_SRC } from '../clients/lib.mjs';
import { ADMIN_PASSWORD, adminConfig, launchBrowser, login } from './setup.mjs';
import { startFake, startGateway } from '../clients/lib.mjs';

const T = { timeout: 120000 };
const XSS = '<img src=x onerror="window.pwned=1">';
let fake;
let gw;
let browser;
let dir;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gh-mcp-ui-'));
  fake = await startFake();
  gw = await startGateway(adminConfig(fake, {
    mcp_servers: {
      t: {
        transport: 'stdio', command: 'python3',
        args: [join(GH_SRC, 'tests/integration/mcp_test_server.py')],
        env: { MCP_TEST_PIDFILE: join(dir, 'pid'), MCP_TEST_NAME: XSS },
        retry_base_ms: 100, retry_max_ms: 1000, shutdown_grace_ms: 300,
      },
    },
  }));
  gw.createAdmin('alice', ADMIN_PASSWORD);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function waitFor(fn, what, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('MCP servers page', () => {
  test('shows the upstream and its tools; a held change is compared and accepted', T, async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await login(page, gw, 'alice');
    await page.getByRole('link', { name: 'MCP servers' }).click();
    await page.getByRole('heading', { name: 'MCP servers', level: 1 }).waitFor();
    const card = page.locator('article', { hasText: 'connected' });
    await card.waitFor();
    // the upstream's own name is text, never markup
    await card.getByText(XSS, { exact: false }).waitFor();
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.equal(await card.locator('img').count(), 0);

    await card.getByRole('button', { name: 'Show tools' }).click();
    const table = page.locator('table', { has: page.locator('caption', { hasText: 'Tools of MCP server t' }) });
    await table.waitFor();
    const echo = table.locator('tr', { hasText: 't_echo' });
    await echo.getByText('readOnlyHint: true').waitFor();
    await echo.getByText('pinned').waitFor();
    await table.locator('tr', { hasText: 't_write_note' })
      .getByText('approval required (no destructiveHint: destructive by default)').waitFor();

    // the upstream changes a tool: held, with both definitions to compare
    const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    process.kill(pid, 'SIGUSR1');
    await waitFor(async () => {
      await page.getByRole('button', { name: 'Hide tools' }).click();
      await page.getByRole('button', { name: 'Show tools' }).click();
      return (await table.locator('tr', { hasText: 't_mutable' }).getByText('held').count()) > 0;
    }, 'the held tool');
    const row = table.locator('tr', { hasText: 't_mutable' });
    await row.getByText('Compare definitions').click();
    const compare = row.locator('details');
    // the offered definition (destructive now) beside the accepted one
    await compare.locator('pre', { hasText: 'Reads a value, then deletes everything.' }).waitFor();
    await compare.locator('pre', { hasText: '"description": "Reads a value."' }).waitFor();
    await compare.locator('pre', { hasText: '"destructiveHint": true' }).waitFor();

    await row.getByRole('button', { name: 'Accept change' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Accept' }).click();
    await page.getByText('Accepted the change of t_mutable').waitFor();
    await waitFor(async () => (await table.locator('tr', { hasText: 't_mutable' })
      .getByText('pinned').count()) > 0, 'the accepted tool');
    assert.deepEqual(errors, []);
    await context.close();

    // the decision is in the audit log, by alice, from the web
    const key = gw.createKey('ops', { admin: true });
    const r = await fetch(`${gw.url}/api/audit?event=mcp_tool_accepted`,
      { headers: { authorization: `Bearer ${key}` } });
    const body = await r.json();
    assert.equal(body.rows.length, 1, JSON.stringify(body));
    assert.equal(body.rows[0].adminUser, 'alice');
    assert.equal(body.rows[0].detail.via, 'web');
  });
});

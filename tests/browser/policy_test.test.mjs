// The admin UI's "Policy change" page in a real browser (Debian's chromium,
// headless) against the real gatehouse binary: calls recorded under the
// running config, a tightened config written to disk, and the page showing
// which recorded calls it would refuse (per rule), which it cannot decide
// (a redacted argument), and what its Reload button answers.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { ADMIN_PASSWORD, adminConfig, askForTool, launchBrowser, login } from './setup.mjs';
import { startFake, startGateway } from '../clients/lib.mjs';

const T = { timeout: 120000 };
const AUDIT = { checkpoint_rows: 5, checkpoint_seconds: 2, redact: ['token'] };
let fake;
let gw;
let browser;
let key;
let cfg;

before(async () => {
  fake = await startFake();
  cfg = adminConfig(fake, { audit: AUDIT });
  gw = await startGateway(cfg);
  gw.createAdmin('alice', ADMIN_PASSWORD);
  key = gw.createKey('app');
  for (const args of [{ city: 'Oslo' }, { city: 'Paris' }]) {
    await askForTool(gw, fake, key, { tool: 'get_weather', args, thread: 't-weather' });
  }
  // needs an admin's approval; its token is stored redacted
  await askForTool(gw, fake, key, { tool: 'send_email', args: { to: 'bob@example.com', token: 'tok-1' }, thread: 't-mail' });
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
});

describe('Policy change page', () => {
  test('shows what the config on disk would change, then reloads or says why not', T, async () => {
    // a tightened config on disk: Paris denied; a rule on the redacted token
    const tight = structuredClone(cfg);
    tight.policies.default.arguments = [
      { name: 'no-paris', tool: 'get_weather', pointer: '/city', glob: 'Paris', effect: 'deny' },
      { name: 'no-tok', tool: 'send_email', pointer: '/token', glob: 'tok-*', effect: 'deny' },
    ];
    writeFileSync(gw.configPath, JSON.stringify(tight, null, 2));
    const recorded = gw.auditRows({ event: 'allowed' });
    const paris = recorded.find((r) => r.toolName === 'get_weather' && r.args.city === 'Paris');
    assert.ok(paris, 'the Paris call was recorded as allowed');

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await login(page, gw, 'alice');
    await page.getByRole('link', { name: 'Policy change' }).click();
    await page.getByRole('heading', { name: 'Policy change', level: 1 }).waitFor();

    const changes = page.locator('table', { has: page.locator('caption', { hasText: 'Recorded calls whose outcome would change' }) });
    await changes.waitFor();
    const rows = changes.locator('tbody tr');
    assert.equal(await rows.count(), 1);
    const row = rows.first();
    assert.equal(await row.locator('td').first().innerText(), String(paris.seq));
    await row.getByText('get_weather', { exact: true }).waitFor();
    await row.getByText('allowed', { exact: true }).waitFor();
    await row.getByText('denied', { exact: true }).waitFor();
    await row.getByText('arguments "no-paris"', { exact: false }).waitFor();
    // counted per rule
    const perRule = page.locator('table', { has: page.locator('caption', { hasText: 'Changes per rule' }) });
    const ruleRow = perRule.locator('tbody tr');
    assert.equal(await ruleRow.count(), 1);
    await ruleRow.getByText('allowed -> denied: 1').waitFor();
    // the call with a redacted token is undecidable, never guessed
    const undec = page.locator('table', { has: page.locator('caption', { hasText: 'Calls the log cannot decide' }) });
    await undec.waitFor();
    const undecRows = undec.locator('tbody tr');
    assert.equal(await undecRows.count(), 1);
    await undecRows.getByText('send_email', { exact: true }).waitFor();
    await undecRows.getByText('needs approval').waitFor();
    await undecRows.getByText('arguments "no-tok" reads /token, which the audit log stores redacted', { exact: false }).waitFor();
    await page.locator('.stat', { hasText: 'Would change' }).getByText('1', { exact: true }).waitFor();

    // Reload: applied by a gatehouse that can reload; otherwise said why not
    await page.getByRole('button', { name: 'Reload' }).click();
    const notice = page.locator('#pt-reload .notice');
    await notice.waitFor();
    const text = await notice.innerText();
    if ((await notice.getAttribute('class')).includes('ok')) {
      assert.match(text, /Config reloaded/);
      assert.match(text, /Digest/);
    } else {
      assert.equal(await notice.getAttribute('role'), 'alert');
      assert.match(text, /cannot reload its config|was not reloaded/);
      // the report stays on the page
      assert.equal(await rows.count(), 1);
    }
    assert.deepEqual(errors, []);
    await context.close();
  });
});

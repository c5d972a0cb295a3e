// Changing one's own admin password in the UI (Debian's chromium, headless,
// driven by playwright-core, against the real binary): the form checks what
// it can before sending, says when the current password is wrong, and on
// success keeps this session while the admin's other session ends; the new
// password then signs in and the old one does not.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ADMIN_PASSWORD, launchBrowser, login, startAdminGateway } from './setup.mjs';

const T = { timeout: 120000 };
const NEW_PASSWORD = 'a much better passphrase';
let fake;
let gw;
let browser;

before(async () => {
  ({ fake, gw } = await startAdminGateway());
  gw.createAdmin('carol', ADMIN_PASSWORD);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
});

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  return page;
}

async function signIn(page, password) {
  await page.goto(`${gw.url}/admin/`);
  await page.getByLabel('User name').fill('carol');
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

describe('change password', () => {
  test('a signed-in admin changes their password; their other session ends', T, async () => {
    const page = await newPage();
    const other = await newPage();
    await login(page, gw, 'carol');
    await login(other, gw, 'carol');

    await page.getByRole('button', { name: 'Change password' }).click();
    const dlg = page.getByRole('dialog', { name: 'Change password' });
    await dlg.waitFor();
    // focus starts in the first field; Escape closes without a change
    assert.equal(await page.evaluate(() => document.activeElement.id), 'pw-current');
    await page.keyboard.press('Escape');
    await dlg.waitFor({ state: 'detached' });

    await page.getByRole('button', { name: 'Change password' }).click();
    await dlg.getByText('At least 10 characters.').waitFor();
    const current = dlg.getByLabel('Current password');
    const fresh = dlg.getByLabel('New password', { exact: true });
    const again = dlg.getByLabel('New password again');
    const submit = dlg.getByRole('button', { name: 'Change password' });

    // checked in the page before anything is sent
    await current.fill(ADMIN_PASSWORD);
    await fresh.fill('short');
    await again.fill('short');
    await submit.click();
    await dlg.getByRole('alert').filter({ hasText: 'The new password needs at least 10 characters.' }).waitFor();
    await fresh.fill(NEW_PASSWORD);
    await again.fill(`${NEW_PASSWORD}!`);
    await submit.click();
    await dlg.getByRole('alert').filter({ hasText: 'The new passwords differ.' }).waitFor();

    // the server refuses a wrong current password, and the session goes on
    await current.fill('not my password');
    await again.fill(NEW_PASSWORD);
    await submit.click();
    await dlg.getByRole('alert').filter({ hasText: 'The current password is wrong.' }).waitFor();
    assert.equal(await current.inputValue(), '');

    await current.fill(ADMIN_PASSWORD);
    await submit.click();
    await dlg.waitFor({ state: 'detached' });
    await page.getByText('Password changed. 1 other session ended.').waitFor();

    // this session goes on; the other one is sent to the sign-in page
    await page.reload();
    await page.getByText('Signed in as carol').waitFor();
    await other.reload();
    await other.getByRole('button', { name: 'Sign in' }).waitFor();

    // the old password no longer signs in, the new one does
    const fresh1 = await newPage();
    await signIn(fresh1, ADMIN_PASSWORD);
    await fresh1.getByRole('alert').filter({ hasText: 'Wrong user name or password' }).waitFor();
    await signIn(fresh1, NEW_PASSWORD);
    await fresh1.getByText('Signed in as carol').waitFor();

    for (const p of [page, other, fresh1]) {
      assert.deepEqual(p.errors, []);
      await p.context().close();
    }
  });
});

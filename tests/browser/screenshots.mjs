// Regenerates the README's screenshots of the admin UI with the same browser
// setup as the browser tests:
//
//   cd tests && npm ci
//   GH_BIN=../build/gatehouse GH_FAKE=../build/tests/fake_upstream node browser/screenshots.mjs
//
// Writes tests/browser/screenshots/approvals.png and audit.png (1280 px
// wide). The data is made up on the spot: a gateway on loopback, the
// scripted fake upstream, a few tool calls waiting for approval and a few
// decided.

import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { ADMIN_PASSWORD, askForTool, launchBrowser, login, startAdminGateway } from './setup.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'screenshots');
mkdirSync(out, { recursive: true });

const agents = ['support-bot', 'billing-agent', 'ops-assistant', 'research', 'sales-helper'];
const { fake, gw } = await startAdminGateway({ agents });
let browser;
try {
  gw.createAdmin('alice', ADMIN_PASSWORD);
  const mobile = gw.createKey('mobile-app', { owner: 'acme' });
  const crm = gw.createKey('crm-sync', { owner: 'acme' });
  const intranet = gw.createKey('intranet', { owner: 'globex' });
  const admin = gw.createKey('ops-automation', { admin: true });
  const post = (path, k, body) => fetch(`${gw.url}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k}` },
    body: JSON.stringify(body || {}),
  }).then((r) => r.json());

  // some history: decided approvals, weather lookups, a denial
  const done = await askForTool(gw, fake, crm, {
    agent: 'billing-agent', text: 'Send the March invoice to Initech',
    args: { to: 'ap@initech.example', subject: 'Invoice 2026-03', body: 'Please find the March invoice attached.' },
    after: 'The invoice is on its way.', thread: 'invoices-initech',
  });
  await post(`/api/approvals/${done.approvals[0].id}/approve`, admin, { reason: 'Routine invoice' });
  const no = await askForTool(gw, fake, intranet, {
    agent: 'ops-assistant', text: 'Tell everybody the office is closed tomorrow',
    args: { to: 'all@globex.example', subject: 'Office closed', body: 'The office is closed tomorrow.' },
    after: 'I could not send it: a reviewer declined.', thread: 'office-news',
  });
  await post(`/api/approvals/${no.approvals[0].id}/deny`, admin, { reason: 'Needs HR sign-off first' });
  for (const city of ['Lisbon', 'Oslo', 'Nairobi']) {
    await askForTool(gw, fake, mobile, { agent: 'research', tool: 'get_weather', args: { city }, after: `Sunny in ${city}.`, thread: `weather-${city}` });
  }
  await askForTool(gw, fake, mobile, { agent: 'research', tool: 'memory_delete', args: { id: 7 }, after: 'I may not delete memories.', thread: 'cleanup' });

  // waiting for a decision
  await askForTool(gw, fake, mobile, {
    agent: 'support-bot', text: 'Can you confirm my refund by email?',
    args: { to: 'dana.k@example.com', subject: 'Your refund #48213',
      body: 'Hi Dana,\n\nyour refund of €84.90 for order #48213 has been approved and\nwill reach your card within 5 working days.\n\nBest regards,\nAcme Support' },
    thread: 'support-48213',
  });
  await askForTool(gw, fake, crm, {
    agent: 'sales-helper', text: 'Follow up with the Umbrella lead',
    args: { to: 'procurement@umbrella.example', subject: 'Following up on our call',
      body: 'Hello,\n\nthank you for your time on Tuesday. As promised, the pricing sheet is attached.' },
    thread: 'lead-umbrella',
  });

  browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  await login(page, gw, 'alice');
  await page.locator('article.approval').nth(1).waitFor();
  await page.mouse.move(0, 0);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(out, 'approvals.png') });

  await page.goto(`${gw.url}/admin/#/audit`);
  await page.locator('.chain', { hasText: 'Chain verified' }).waitFor();
  await page.locator('tbody tr').nth(5).waitFor();
  await page.mouse.move(0, 0);
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(out, 'audit.png') });
  console.log(`wrote ${join(out, 'approvals.png')} and ${join(out, 'audit.png')}`);
} finally {
  if (browser) await browser.close();
  await gw.stop();
  await fake.stop();
}

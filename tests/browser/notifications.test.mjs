// One approval's own page (#/approvals/<id>, the link notifications carry)
// in a real browser against the real binary: the card is there to decide
// on, and its Notifications section shows each delivery as the gateway
// recorded it: a webhook delivered, one to a receiver that refuses failed.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { ADMIN_PASSWORD, askForTool, launchBrowser, login, startAdminGateway } from './setup.mjs';

const T = { timeout: 120000 };
let fake;
let gw;
let browser;
let key;
let receiver;
const got = [];

before(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      got.push({ path: req.url, body });
      res.writeHead(req.url === '/refuse' ? 403 : 200, { 'content-length': '2' });
      res.end('ok');
    });
  });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${receiver.address().port}`;
  ({ fake, gw } = await startAdminGateway({
    server: { public_url: 'https://gate.example.com' },
    notifications: {
      retry_base_ms: 50,
      targets: {
        ops: { kind: 'webhook', url: `${url}/hook`, secret: 'browser-test-secret-0123' },
        audit_chat: { kind: 'webhook', url: `${url}/refuse`, format: 'slack' },
      },
    },
  }));
  gw.createAdmin('alice', ADMIN_PASSWORD);
  key = gw.createKey('mobile-app', { owner: 'acme' });
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
  if (receiver) await new Promise((r) => receiver.close(r));
});

test('an approval\'s own page shows the card and what became of its notifications', T, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await login(page, gw, 'alice');

  const res = await askForTool(gw, fake, key, { args: { to: 'bob@example.com', body: 'hi' }, after: 'Sent.' });
  assert.equal(res.finishReason, 'suspended');
  const id = res.approvals[0].id;
  // the link a notification carries, on this gateway
  const hook = await (async () => {
    for (let i = 0; i < 200 && !got.some((g) => g.path === '/hook'); i++) await new Promise((r) => setTimeout(r, 50));
    return JSON.parse(got.find((g) => g.path === '/hook').body);
  })();
  assert.equal(hook.link, `https://gate.example.com/admin/#/approvals/${id}`);

  await page.goto(`${gw.url}/admin/${new URL(hook.link).hash}`);
  const card = page.locator('article.approval', { hasText: 'bob@example.com' });
  await card.waitFor({ timeout: 10000 });
  const notes = page.getByRole('region', { name: 'Notifications' });
  await notes.locator('tr', { hasText: 'ops' }).getByText('delivered').waitFor({ timeout: 15000 });
  const refused = notes.locator('tr', { hasText: 'audit_chat' });
  await refused.getByText('failed').waitFor({ timeout: 15000 });
  await refused.getByText('the receiver answered HTTP 403').waitFor();

  // decided on its own page: the decision's notification shows up too
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await card.getByText(/Approved by you/).waitFor({ timeout: 10000 });
  await notes.locator('tr', { hasText: 'decided' }).filter({ hasText: 'ops' }).getByText('delivered').waitFor({ timeout: 15000 });
  assert.deepEqual(errors, []);
  await context.close();
});

// Approve with edits in the admin UI, in a real browser against the real
// binary: the approval card's JSON editor checks the edited arguments
// against the tool's input schema before anything is sent, the gateway
// still refuses what a policy rule denies, and the tool runs once with the
// edited arguments.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ADMIN_PASSWORD, askForTool, launchBrowser, login, startAdminGateway } from './setup.mjs';

const T = { timeout: 120000 };
let fake;
let gw;
let browser;
let key;

before(async () => {
  ({ fake, gw } = await startAdminGateway({
    agents: ['edits'],
    policies: {
      default: {
        agents: ['*'], tools: { allow: ['*'] }, client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'admin', ttl_seconds: 3600 },
        arguments: [{ name: 'no-outside-mail', tool: 'send_email', pointer: '/to',
          glob: '*@evil.example', effect: 'deny' }],
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
});

test('the approval card edits the arguments, checked against the schema, and the tool runs once with them', T, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const sent = [];
  page.on('request', (r) => { if (r.method() === 'POST' && r.url().includes('/approve')) sent.push(r.postData()); });
  await login(page, gw, 'alice');

  const res = await askForTool(gw, fake, key, {
    agent: 'edits',
    args: { to: 'all@example.com', subject: 'Salaries', body: 'See attached.' },
    after: 'Sent.',
    text: 'Mail the salaries to everyone',
  });
  assert.equal(res.finishReason, 'suspended');
  const card = page.locator('article.approval', { hasText: 'all@example.com' });
  await card.waitFor({ timeout: 10000 });

  await card.getByRole('button', { name: 'Edit arguments' }).click();
  const editor = card.getByLabel('Edited arguments (JSON)');
  await editor.waitFor();
  assert.deepEqual(JSON.parse(await editor.inputValue()),
    { to: 'all@example.com', subject: 'Salaries', body: 'See attached.' });
  const approve = card.getByRole('button', { name: 'Approve with edits' });

  // invalid for the schema: said at once, and nothing can be sent
  await editor.fill('{"to": 42}');
  await card.getByText('$.to: expected string, got number').waitFor();
  assert.equal(await approve.isDisabled(), true);
  await editor.fill('{"subject": "Salaries"}');
  await card.getByText('$: missing required property "to"').waitFor();
  assert.equal(await approve.isDisabled(), true);
  await editor.fill('{"to": ');
  await card.getByText(/Not valid JSON/).waitFor();
  assert.equal(await approve.isDisabled(), true);
  assert.deepEqual(sent, []);

  // valid for the schema, but a policy rule denies it: the gateway says so
  await editor.fill('{"to": "leak@evil.example"}');
  await card.getByText('Valid for the tool’s input schema.').waitFor();
  await approve.click();
  await card.getByRole('alert').filter({ hasText: 'no-outside-mail' }).waitFor();
  assert.equal(sent.length, 1);
  const st = await (await fetch(`${gw.url}/api/runs/${res.runId}`, { headers: { authorization: `Bearer ${key}` } })).json();
  assert.equal(st.status, 'suspended');

  // the edit the reviewer means: approved, the tool runs once with it
  await editor.fill(JSON.stringify({ to: 'hr@example.com', subject: 'Salaries', body: 'See attached.' }));
  await card.getByLabel('Reason (optional)').fill('HR only');
  await approve.click();
  await card.getByText('Approved by you').waitFor();
  await card.getByText('Approved with edited arguments (the tool gets these):').waitFor();
  await card.getByText(/Tool ran at/).waitFor({ timeout: 15000 });
  await card.getByText('Run completed; the model answered: “Sent.”').waitFor({ timeout: 15000 });
  assert.deepEqual(JSON.parse(sent[1]).args, { to: 'hr@example.com', subject: 'Salaries', body: 'See attached.' });
  const calls = (await fake.requests()).filter((r) => r.path === '/tools/send_email');
  assert.equal(calls.length, 1, 'the tool ran exactly once');
  assert.deepEqual(calls[0].body, { to: 'hr@example.com', subject: 'Salaries', body: 'See attached.' });
  assert.deepEqual(errors, []);
  await context.close();
});

// The admin UI in a real browser (Debian's chromium, headless, driven by
// playwright-core) against the real gatehouse binary and the scripted fake
// upstream: login, live approvals, approve and deny, the audit log, XSS
// probes, CSRF and logout.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ADMIN_PASSWORD, askForTool, launchBrowser, login, startAdminGateway } from './setup.mjs';

const T = { timeout: 120000 };
let fake;
let gw;
let browser;
let key;

before(async () => {
  ({ fake, gw } = await startAdminGateway({ agents: ['live', 'deny', 'xss', 'race', 'kbd', 'fail', 'twins'] }));
  gw.createAdmin('alice', ADMIN_PASSWORD);
  gw.createAdmin('bob', ADMIN_PASSWORD);
  key = gw.createKey('mobile-app', { owner: 'acme' });
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (gw) await gw.stop();
  if (fake) await fake.stop();
});

// A fresh browser profile (own cookies) with page errors collected.
async function newPage(viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.on('dialog', (d) => { page.errors.push(`dialog opened: ${d.message()}`); d.dismiss(); });
  return page;
}

function card(page, tool) {
  return page.locator('article.approval', { hasText: tool });
}

async function runStatus(runId) {
  const r = await fetch(`${gw.url}/api/runs/${runId}`, { headers: { authorization: `Bearer ${key}` } });
  return (await r.json()).status;
}

async function waitFor(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('admin UI', () => {
  test('login refuses a wrong password, then signs in', T, async () => {
    const page = await newPage();
    await page.goto(`${gw.url}/admin/`);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'Wrong user name or password' }).waitFor();
    assert.equal(await page.getByRole('navigation', { name: 'Main' }).count(), 0);
    const cookies = await page.context().cookies();
    assert.equal(cookies.filter((c) => c.name === 'gh_session').length, 0);

    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Approvals' }).waitFor();
    await page.getByText('Signed in as alice').waitFor();
    const session = (await page.context().cookies()).find((c) => c.name === 'gh_session');
    assert.ok(session, 'session cookie set');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie.includes('gh_session')), false);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('a tool call appears live; approving runs the tool once and the run completes', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    await page.getByText('Nothing is waiting for a decision').waitFor();
    await page.locator('.live.on').waitFor();

    const res = await askForTool(gw, fake, key, {
      agent: 'live',
      args: { to: 'team@example.com', subject: 'Q3 numbers', body: 'The numbers are in.' },
      after: 'I sent the email.',
      text: 'Email the team the Q3 numbers',
    });
    assert.equal(res.finishReason, 'suspended');
    const runId = res.runId;

    // arrives without a reload
    const c = card(page, 'team@example.com');
    await c.waitFor({ timeout: 10000 });
    await c.getByText('asked by key mobile-app', { exact: false }).waitFor();
    await c.getByText('Email the team the Q3 numbers').waitFor();   // thread context
    await page.getByRole('link', { name: /Approvals\s*1/ }).waitFor();

    await c.getByLabel('Reason (optional)').fill('Checked with finance');
    await c.getByRole('button', { name: 'Approve' }).click();
    await c.getByText('Approved by you').waitFor();
    await c.getByText(/Tool ran at/).waitFor({ timeout: 15000 });
    await c.getByText('Run completed; the model answered: “I sent the email.”').waitFor({ timeout: 15000 });
    assert.equal(await runStatus(runId), 'completed');
    const calls = (await fake.requests()).filter((r) => r.path === '/tools/send_email');
    assert.equal(calls.length, 1, 'the tool ran exactly once');
    assert.deepEqual(calls[0].body, { to: 'team@example.com', subject: 'Q3 numbers', body: 'The numbers are in.' });

    // the audit page shows the rows of this run
    await c.getByRole('link', { name: 'See the audit rows of this run' }).click();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    const rows = page.locator('table tbody tr');
    await rows.first().waitFor();
    const events = await rows.locator('td:nth-child(3)').allTextContents();
    for (const ev of ['approval_requested', 'approved', 'executed']) assert.ok(events.includes(ev), `${ev} in ${events}`);
    await page.locator('.chain', { hasText: 'Chain verified up to row' }).waitFor();
    // a row opens its full detail
    await rows.filter({ hasText: 'approved' }).first().click();
    const dlg = page.getByRole('dialog');
    await dlg.getByText('Checked with finance').first().waitFor();
    await dlg.getByText('Hash', { exact: true }).waitFor();
    await page.keyboard.press('Escape');
    await dlg.waitFor({ state: 'detached' });
    // the same filter exports
    const href = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    assert.match(href, /^\/api\/audit\/export\?format=csv&run=run_/);
    const csv = await page.evaluate(async (u) => (await fetch(u)).text(), href);
    assert.match(csv, /executed/);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('deny with a reason, by keyboard: the tool does not run', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    const before = (await fake.requests()).filter((r) => r.path === '/tools/send_email').length;
    const res = await askForTool(gw, fake, key, {
      agent: 'deny', args: { to: 'everyone@example.com', subject: 'Layoffs' },
      after: 'The email was not sent.',
    });
    const c = card(page, 'everyone@example.com');
    await c.waitFor();
    await c.getByLabel('Reason (optional)').focus();
    await page.keyboard.type('Not to everyone');
    await page.keyboard.press('Tab');   // Approve
    await page.keyboard.press('Tab');   // Deny
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Deny');
    await page.keyboard.press('Enter');
    await c.getByText('Denied by you').waitFor();
    await c.getByText('Reason: Not to everyone').waitFor();
    await c.getByText(/Run completed/).waitFor({ timeout: 15000 });
    assert.equal(await runStatus(res.runId), 'completed');
    const after = (await fake.requests()).filter((r) => r.path === '/tools/send_email').length;
    assert.equal(after, before, 'a denied tool never runs');
    // the decided tab lists it
    await page.getByRole('tab', { name: 'Decided' }).click();
    const row = page.locator('tbody tr', { hasText: 'Not to everyone' });
    await row.waitFor();
    assert.match(await row.textContent(), /denied/);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('two reviewers at once: one wins, the other sees who decided', T, async () => {
    const pa = await newPage();
    const pb = await newPage();
    await login(pa, gw, 'alice');
    await login(pb, gw, 'bob');
    await askForTool(gw, fake, key, { agent: 'race', args: { to: 'race@example.com' } });
    const ca = card(pa, 'race@example.com');
    const cb = card(pb, 'race@example.com');
    await ca.waitFor();
    await cb.waitFor();
    // the loser's button may vanish before its click lands (the winner's
    // decision arrived live): either way it must show who decided
    await Promise.all([
      ca.getByRole('button', { name: 'Approve' }).click({ timeout: 5000 }).catch(() => {}),
      cb.getByRole('button', { name: 'Deny' }).click({ timeout: 5000 }).catch(() => {}),
    ]);
    await ca.locator('.outcome .notice').waitFor();
    await cb.locator('.outcome .notice').waitFor();
    const ta = await ca.locator('.outcome .notice strong').textContent();
    const tb = await cb.locator('.outcome .notice strong').textContent();
    const aWon = /by you/.test(ta);
    assert.notEqual(aWon, /by you/.test(tb), `exactly one winner: "${ta}" / "${tb}"`);
    if (aWon) assert.match(tb, /Approved by admin:alice/);
    else assert.match(ta, /Denied by admin:bob/);
    await pa.context().close();
    await pb.context().close();
  });

  test('XSS probes and a 1 MB argument stay inert text and keep the layout', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    const big = 'A'.repeat(1000000);
    const probes = {
      to: '<script>window.__xss = 1</script>',
      subject: '<img src=x onerror="window.__xss = 2">',
      body: big,
    };
    await askForTool(gw, fake, key, {
      agent: 'xss', args: probes, after: '<img src=y onerror="window.__xss = 3"> done',
      text: 'Hi <script>window.__xss = 4</script><img src=z onerror="window.__xss = 5">',
    });
    const c = card(page, 'window.__xss = 1');
    await c.waitFor();
    // shown as text, literally
    await c.getByText('<script>window.__xss = 1</script>', { exact: true }).first().waitFor();
    await c.getByText('<img src=x onerror="window.__xss = 2">', { exact: true }).first().waitFor();
    await c.getByText('Hi <script>window.__xss = 4</script>', { exact: false }).first().waitFor();
    assert.equal(await page.locator('main img, main script').count(), 0);
    // the 1 MB value is cut, with a way to see all of it
    const more = c.getByRole('button', { name: /Show all \(9\d\d\.\d KB\)/ }).first();
    await more.waitFor();
    const noOverflow = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
    assert.equal(await noOverflow(), true, 'no horizontal scroll at 1280 px');
    await more.click();
    await c.getByRole('button', { name: 'Show less' }).first().waitFor();
    assert.equal(await noOverflow(), true, 'expanded value stays in its box');
    const box = await c.locator('pre.expanded').first().boundingBox();
    assert.ok(box.height < 900, `expanded box is bounded (${box.height}px)`);
    // narrow window
    await page.setViewportSize({ width: 400, height: 800 });
    await page.waitForTimeout(200);
    assert.equal(await noOverflow(), true, 'no horizontal scroll at 400 px');
    await page.setViewportSize({ width: 1280, height: 900 });

    await c.getByRole('button', { name: 'Approve' }).click();
    await c.getByText(/Run completed/).waitFor({ timeout: 20000 });
    // the thread page and the audit detail show the same probes as text
    await page.goto(`${gw.url}/admin/#/threads/thread-xss`);
    await page.getByText('<img src=y onerror="window.__xss = 3"> done').waitFor();
    await page.goto(`${gw.url}/admin/#/audit?tool=send_email&event=executed`);
    await page.locator('tbody tr').first().click();
    await page.getByRole('dialog').getByText('window.__xss = 1', { exact: false }).first().waitFor();
    assert.equal(await page.evaluate(() => window.__xss), undefined, 'no probe ran');
    assert.equal(await page.locator('img[src="x"], img[src="y"], img[src="z"]').count(), 0);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('a state-changing request without the CSRF token is refused', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    const res = await askForTool(gw, fake, key, { agent: 'kbd', args: { to: 'csrf@example.com' } });
    const id = res.approvals[0].id;
    const post = (headers) => page.evaluate(async ([u, h]) => {
      const r = await fetch(u, { method: 'POST', headers: { 'content-type': 'application/json', ...h }, body: '{}' });
      return [r.status, await r.text()];
    }, [`/api/approvals/${id}/approve`, headers]);
    const [st1, body1] = await post({});
    assert.equal(st1, 403);
    assert.match(body1, /X-CSRF-Token/);
    const [st2] = await post({ 'X-CSRF-Token': 'not-the-token' });
    assert.equal(st2, 403);
    const a = await (await fetch(`${gw.url}/api/approvals/${id}`, { headers: { authorization: `Bearer ${key}` } })).json();
    assert.equal(a.status, 'pending', 'nothing was decided');
    // the UI itself sends the token
    const c = card(page, 'csrf@example.com');
    await c.getByRole('button', { name: 'Deny' }).click();
    await c.getByText('Denied by you').waitFor();
    await page.context().close();
  });

  test('logout ends the session', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    await page.getByRole('link', { name: 'Keys & policies' }).click();
    await page.getByRole('heading', { name: 'Keys & policies' }).waitFor();
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByText('You have logged out.').waitFor();
    await page.getByLabel('User name').waitFor();
    const st = await page.evaluate(async () => (await fetch('/api/admin/me')).status);
    assert.equal(st, 401);
    await page.goto(`${gw.url}/admin/#/audit`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    assert.equal(await page.getByRole('heading', { name: 'Audit log' }).count(), 0);
    await page.context().close();
  });

  test('a tool that failed shows as failed, with its error, and the run as it ended', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    // the tool's HTTP target answers with an error
    await fake.toolScript('send_email', { status: 503, body: { error: 'mail relay down' } });
    const res = await askForTool(gw, fake, key, {
      agent: 'fail', args: { to: 'board@example.com', subject: 'Minutes' },
      after: 'Email sent (I think).',
    });
    const c = card(page, 'board@example.com');
    await c.waitFor();
    await c.getByRole('button', { name: 'Approve' }).click();
    await c.getByText('Approved by you').waitFor();
    const tool = c.locator('.steps li', { hasText: /^Tool failed at .*: tool send_email answered HTTP 503/ });
    await tool.waitFor({ timeout: 15000 });
    assert.match(await tool.textContent(), /mail relay down/);
    assert.equal(await tool.getAttribute('class'), 'failed');
    assert.equal(await c.getByText(/^Tool ran/).count(), 0, 'never "Tool ran" for a failed tool');
    // the run completed: what the model said is shown as its words
    await c.getByText('Run completed; the model answered: “Email sent (I think).”').waitFor({ timeout: 15000 });
    assert.equal(await runStatus(res.runId), 'completed');
    // what the card says is what the audit log says
    const a = await (await fetch(`${gw.url}/api/approvals/${res.approvals[0].id}`, { headers: { authorization: `Bearer ${key}` } })).json();
    assert.equal(a.execution.status, 'failed');
    assert.match(a.execution.error, /HTTP 503/);
    // and the decided tab says it failed
    await page.getByRole('tab', { name: 'Decided' }).click();
    const row = page.locator('tbody tr').filter({ has: page.locator('td:nth-child(3)', { hasText: /^fail$/ }) }).first();
    await row.locator('.badge.bad', { hasText: 'failed' }).waitFor();
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('an open audit row closes when the browser goes back or forward', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    await page.getByRole('heading', { name: 'Approvals' }).waitFor();
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    await page.locator('table tbody tr').first().click();
    const dlg = page.getByRole('dialog');
    await dlg.waitFor();
    await page.goBack();
    await page.getByRole('heading', { name: 'Approvals' }).waitFor();
    await dlg.waitFor({ state: 'detached' });
    // forward again, open a row, and go forward to... nowhere: back instead
    await page.goForward();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    await page.locator('table tbody tr').first().click();
    await dlg.waitFor();
    await page.goBack();
    await dlg.waitFor({ state: 'detached' });
    assert.equal(await page.locator('dialog').count(), 0);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('keys are named, and two keys with one name are told apart', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    await page.getByText('Nothing is waiting for a decision').waitFor();
    // created after the page loaded its keys: two with the same name, and
    // an admin key that decides
    const one = gw.createKey('twin', { owner: 'acme' });
    const two = gw.createKey('twin', { owner: 'acme' });
    const bot = gw.createKey('ops-bot', { admin: true });
    const keys = (await (await fetch(`${gw.url}/api/keys`, { headers: { authorization: `Bearer ${bot}` } })).json()).keys;
    const twins = keys.filter((k) => k.name === 'twin');
    assert.equal(twins.length, 2);
    const res = await askForTool(gw, fake, one, { agent: 'twins', args: { to: 'twin-one@example.com' }, after: 'ok' });
    const c = card(page, 'twin-one@example.com');
    await c.waitFor();
    await c.getByText(/asked by key twin \(gh_/).waitFor();
    // decided by the admin key, through the API
    const d = await fetch(`${gw.url}/api/approvals/${res.approvals[0].id}/deny`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${bot}` },
      body: JSON.stringify({ reason: 'by the bot' }),
    });
    assert.equal(d.status, 200);
    await c.getByText(/^Denied by key ops-bot \(gh_/).waitFor();
    await page.getByRole('tab', { name: 'Decided' }).click();
    const row = page.locator('tbody tr', { hasText: 'by the bot' });
    await row.waitFor();
    const by = await row.locator('td').nth(5).textContent();
    assert.match(by, /^key ops-bot \(gh_.{8}…\)$/);
    assert.doesNotMatch(await row.textContent(), /key:key_/);
    // the other twin asks too; the audit log's Key column tells them apart
    await askForTool(gw, fake, two, { agent: 'twins', tool: 'get_weather', args: { city: 'Oslo' }, after: 'Cold.' });
    await page.goto(`${gw.url}/admin/#/audit?agent=twins`);
    const cells = page.locator('table tbody tr td:nth-child(7)');
    await cells.first().waitFor();
    const labels = new Set((await cells.allTextContents()).filter((t) => t.startsWith('twin')));
    assert.deepEqual([...labels].sort(), twins.map((k) => `twin ${k.prefix}…`).sort());
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('the audit filters offer the values the gateway knows', T, async () => {
    const page = await newPage();
    await login(page, gw, 'alice');
    await page.goto(`${gw.url}/admin/#/audit`);
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    const options = (label) => page.getByLabel(label, { exact: true }).locator('option').allTextContents();
    const events = await options('Event');
    for (const ev of ['Any event', 'approval_requested', 'approved', 'executed', 'failed', 'model_failed', 'admin_login']) {
      assert.ok(events.includes(ev), `${ev} in ${events}`);
    }
    const outcomes = await options('Outcome');
    for (const oc of ['Any outcome', 'ok', 'error', 'denied']) assert.ok(outcomes.includes(oc), `${oc} in ${outcomes}`);
    const tools = await options('Tool');
    for (const t of ['Any tool', 'send_email', 'get_weather', 'memory_save']) assert.ok(tools.includes(t), `${t} in ${tools}`);
    // choosing one filters the log by it
    await page.getByLabel('Event', { exact: true }).selectOption('approved');
    await page.getByLabel('Tool', { exact: true }).selectOption('send_email');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => location.hash.includes('event=approved'));
    const rows = page.locator('table tbody tr');
    await rows.first().waitFor();
    const evs = await rows.locator('td:nth-child(3)').allTextContents();
    assert.ok(evs.length > 0 && evs.every((e) => e === 'approved'), evs.join());
    assert.equal(await page.getByLabel('Event', { exact: true }).inputValue(), 'approved');
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });
});
// A held Claude Code command decided in the admin UI, end to end: the real
// Claude Code CLI (`claude -p`) works through gatehouse against the scripted
// fake model, a policy rule holds its Bash calls that deploy, and a reviewer
// signed in to the admin UI in Debian's chromium finds the held call's card,
// reads the exact command on it and approves it. That command then runs
// once in the developer's working directory; the next, different command of
// the same session is not covered by the approval: it waits for its own and
// never runs. A command with characters that do not show on screen (a
// right-to-left override) shows them marked, with a warning, so that what
// the reviewer reads is what would run.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { config, runClaude, startFake, startGateway } from '../clients/lib.mjs';
import { ADMIN_PASSWORD, launchBrowser, login } from './setup.mjs';

const T = { timeout: 240000 };
// How long a held call keeps the developer's turn open (the reviewer's
// window here); the second command waits that long before the turn ends.
const WAIT_MS = 15000;
const FIRST = 'echo release-1 >> deploy.log';
// The next command hides characters that do not show on screen: shown as
// they are, the right-to-left override reverses the rest of the line, so it
// would read "… #dry-run" to the reviewer.
const SECOND = 'echo release-2 >> deploy.log #\u202Enur-yrd\u202C';
const SECOND_SHOWN = 'echo release-2 >> deploy.log #⟨U+202E⟩nur-yrd⟨U+202C⟩';

let fake;
let gw;
let key;
let browser;
let scratch;

before(async () => {
  fake = await startFake();
  gw = await startGateway(config(fake, {
    server: { listen: '127.0.0.1:0', threads: 24, max_streams: 8, heartbeat_ms: 1000,
      approval_wait_ms: WAIT_MS },
    agents: {
      claude: { provider: 'fake_anthropic', passthrough: true, models: ['claude-*'], max_steps: 8 },
    },
    policies: {
      default: {
        agents: ['claude'], tools: { allow: [] }, client_tools: { allow: ['*'] },
        arguments: [{ name: 'hold-deploys', tool: 'Bash', pointer: '/command', regex: 'deploy',
          effect: 'approval' }],
      },
    },
  }));
  gw.createAdmin('alice', ADMIN_PASSWORD);
  key = gw.createKey('laptop', { owner: 'dev' });
  scratch = mkdtempSync(join(tmpdir(), 'gh-claude-ui-'));
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  await gw?.stop();
  await fake?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test('a held Claude Code command approved in the admin UI runs once; a different one is not covered', T, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await login(page, gw, 'alice');
  await page.getByRole('heading', { name: 'Approvals' }).waitFor();

  await fake.script('claude-deploy',
    { tool_calls: [{ name: 'Bash', arguments: { command: FIRST, description: 'Deploy release 1' } }] },
    { tool_calls: [{ name: 'Bash', arguments: { command: SECOND, description: 'Deploy release 2' } }] },
    { text: 'Both releases are out.' });
  const session = runClaude(gw, key, 'claude-deploy', 'Deploy release 1, then release 2.', { scratch });

  // the reviewer finds the held call, reads the exact command, approves it
  await page.locator('article.approval', { hasText: FIRST }).waitFor({ timeout: 20000 });
  assert.equal(await page.locator('article.approval').count(), 1, 'only the first command is held yet');
  // (the next card's thread context will show this command too)
  const approvalId = await page.locator('article.approval').getAttribute('data-approval-id');
  const card = page.locator(`article.approval[data-approval-id="${approvalId}"]`);
  assert.equal(await card.getByRole('heading', { name: 'Bash' }).count(), 1);
  const command = card.getByLabel('Bash argument command');
  assert.equal(await command.textContent(), FIRST, 'the card shows the exact command');
  assert.ok(await command.isVisible(), 'the command is on screen, not behind a click');
  await card.getByText('asked by key', { exact: false }).getByText('laptop').waitFor();
  await card.getByText('Needs approval: ', { exact: false }).getByText(/hold-deploys/).waitFor();
  await card.getByLabel('Reason (optional)').fill('Release 1 only');
  await card.getByRole('button', { name: 'Approve' }).click();
  await card.getByText('Approved by you').waitFor();
  // Claude Code ran it and sent its result; the session went on to the
  // next command, which waits for an approval of its own
  await card.getByText(/Tool ran at/).waitFor({ timeout: 20000 });
  await card.getByText('Run continued and is waiting for another approval').waitFor({ timeout: 20000 });
  const next = page.locator('article.approval:not(.decided)', { hasText: 'echo release-2' });
  await next.waitFor({ timeout: 10000 });
  assert.equal(await next.getByLabel('Bash argument command').textContent(), SECOND_SHOWN,
    'the characters that do not show are marked where they are');
  await next.getByText('2 characters in these arguments do not show on screen', { exact: false }).waitFor();
  assert.equal(await card.getByText('do not show on screen', { exact: false }).count(), 0,
    'no warning on the plain command');
  assert.equal(await next.getByRole('button', { name: 'Approve' }).isEnabled(), true,
    'the second command waits for a decision');

  const r = await session;
  assert.equal(r.code, 0, r.stderr);
  assert.ok(existsSync(join(r.work, 'deploy.log')), 'the approved command ran');
  assert.equal(readFileSync(join(r.work, 'deploy.log'), 'utf8'), 'release-1\n',
    'the approved command ran exactly once, the other one never');

  // the approval: decided by alice, for the first command only
  const rows = gw.auditRows({ tool: 'Bash' });
  const held = rows.filter((x) => x.event === 'approval_requested');
  assert.deepEqual(held.map((x) => x.args.command), [FIRST, SECOND], JSON.stringify(rows));
  const [first, second] = held;
  const approved = rows.filter((x) => x.event === 'approved');
  assert.equal(approved.length, 1, JSON.stringify(rows));
  assert.equal(approved[0].toolCallId, first.toolCallId);
  assert.equal(approved[0].adminUser, 'alice');
  assert.equal(approved[0].reason, 'Release 1 only');
  // its execution: Claude Code's result for that call, and for no other
  const results = rows.filter((x) => x.event === 'client_result');
  assert.equal(results.length, 1, JSON.stringify(rows));
  assert.equal(results[0].toolCallId, first.toolCallId);
  assert.equal(results[0].detail.is_error, false);
  assert.ok(results[0].seq > approved[0].seq);
  assert.equal(rows.filter((x) => x.toolCallId === second.toolCallId && x.event !== 'approval_requested').length, 0,
    'nothing but its request about the second command');

  // as the approvals API tells it (read with the reviewer's session)
  const get = (path) => page.evaluate(async (p) => (await fetch(p)).json(), path);
  const decided = await get(`/api/approvals/${approvalId}`);
  assert.equal(decided.toolCallId, first.toolCallId);
  assert.equal(decided.status, 'approved');
  assert.equal(decided.decidedBy, 'admin:alice');
  assert.equal(decided.execution.status, 'succeeded');
  assert.equal(decided.execution.auditSeq, results[0].seq);

  // the turn ended naming the approval the second command waits for
  const pending = (await get('/api/approvals?status=pending')).approvals;
  assert.equal(pending.length, 1);
  assert.equal(pending[0].args.command, SECOND);
  assert.equal(pending[0].toolCallId, second.toolCallId);
  assert.match(r.stdout, new RegExp(`waiting for approval ${pending[0].id}`));
  assert.deepEqual(errors, []);
  await context.close();
});

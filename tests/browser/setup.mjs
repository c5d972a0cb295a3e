// Shared by the browser tests and the screenshot script: Debian's chromium
// driven by playwright-core, and a gateway whose agent has a server tool
// (send_email, served by the fake upstream) that needs an admin's approval.

import { chromium } from 'playwright-core';
import { config, startFake, startGateway } from '../clients/lib.mjs';

export const CHROMIUM = process.env.GH_CHROMIUM || '/usr/bin/chromium';
export const ADMIN_PASSWORD = 'correct horse battery staple';

export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

// A gateway for the admin UI: agents on the fake upstream (each with its own
// model name "model-<agent>", so scripted replies never mix), with the
// server tools send_email (needs approval) and get_weather (does not).
export function adminConfig(fake, { agents = ['assistant'], ...extra } = {}) {
  const toolSchema = {
    type: 'object',
    properties: { to: { type: 'string' }, subject: { type: 'string' }, body: { type: 'string' } },
    required: ['to'],
  };
  return config(fake, {
    agents: Object.fromEntries(agents.map((id) => [id, {
      provider: 'fake', model: `model-${id}`, instructions: 'Be brief.',
      tools: ['send_email', 'get_weather', 'memory_*'],
      memory: { enabled: true, last_messages: 20 }, max_steps: 6,
    }])),
    tools: {
      send_email: { type: 'http', description: 'Send an email to a colleague.',
        url: `${fake.url}/tools/send_email`, timeout_ms: 5000, input_schema: toolSchema },
      get_weather: { type: 'http', description: 'Current weather for a city.',
        url: `${fake.url}/tools/get_weather`, timeout_ms: 5000,
        input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    },
    policies: {
      default: {
        agents: ['*'], tools: { allow: ['*'], deny: ['memory_delete'] }, client_tools: { allow: ['*'] },
        approval: { require: ['send_*'], approver: 'admin', ttl_seconds: 3600 },
        rate_limits: { tool_calls_per_minute: { get_weather: 2 } },
      },
    },
    audit: { checkpoint_rows: 5, checkpoint_seconds: 2, max_args_bytes: 1048576 },
    admin: { login_attempts_per_minute: 5 },
    ...extra,
  });
}

export async function startAdminGateway(opts = {}) {
  const fake = await startFake();
  const gw = await startGateway(adminConfig(fake, opts));
  return { fake, gw };
}

// Asks agent something that makes its (scripted) model call tool with args,
// and answer `after` once the tool result is back. Returns the generate
// response (finishReason "suspended" when the tool needs approval).
export async function askForTool(gw, fake, key, { agent = 'assistant', tool = 'send_email', args, after = 'Done.', thread, text = 'Please do it.' }) {
  await fake.script(`model-${agent}`, { tool_calls: [{ name: tool, arguments: args }] }, { text: after });
  const res = await fetch(`${gw.url}/api/agents/${agent}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      messages: [{ role: 'user', content: text }],
      memory: { thread: thread || `thread-${agent}`, resource: 'user-1' },
    }),
  });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`generate: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

export async function login(page, gw, user, password = ADMIN_PASSWORD) {
  await page.goto(`${gw.url}/admin/`);
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

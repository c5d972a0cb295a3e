// gatehouse admin UI: session, shell, routing.
//
// Hash routes: #/approvals (landing), #/approvals/decided, #/approvals/<id>
// (one approval, the link notifications carry), #/audit?filters,
// #/threads?filters, #/threads/<id>, #/keys, #/overview, #/mcp?server=, #/policy. Each page module
// exports render(main, ctx, params) and may return a cleanup function.

import { api, ApiError, onUnauthorized, setCsrf } from './api.js';
import { h, replace, startTicker, toast } from './dom.js';
import { Live } from './live.js';
import { openChangePassword, renderLogin } from './login.js';
import * as approvals from './approvals.js';
import * as audit from './audit.js';
import * as threads from './threads.js';
import * as keys from './keys.js';
import * as overview from './overview.js';
import * as mcp from './mcp.js';
import * as policy from './policy.js';

const app = document.getElementById('app');

const NAV = [
  { path: 'overview', label: 'Overview' },
  { path: 'approvals', label: 'Approvals', count: true },
  { path: 'audit', label: 'Audit log' },
  { path: 'threads', label: 'Threads' },
  { path: 'keys', label: 'Keys & policies' },
  { path: 'mcp', label: 'MCP servers' },
  { path: 'policy', label: 'Policy change' },
];

const ROUTES = [
  { re: /^$/, page: approvals, nav: 'approvals', title: 'Approvals' },
  { re: /^approvals(?:\/(decided))?$/, page: approvals, nav: 'approvals', title: 'Approvals' },
  { re: /^approvals\/(apr_[A-Za-z0-9_-]+)$/, page: approvals, nav: 'approvals', title: 'Approval' },
  { re: /^audit$/, page: audit, nav: 'audit', title: 'Audit log' },
  { re: /^threads$/, page: threads, nav: 'threads', title: 'Threads' },
  { re: /^threads\/([^/]+)$/, page: threads, nav: 'threads', title: 'Thread' },
  { re: /^keys$/, page: keys, nav: 'keys', title: 'Keys & policies' },
  { re: /^overview$/, page: overview, nav: 'overview', title: 'Overview' },
  { re: /^mcp$/, page: mcp, nav: 'mcp', title: 'MCP servers' },
  { re: /^policy$/, page: policy, nav: 'policy', title: 'Policy change' },
];

// What every page can use.
const ctx = {
  me: null,
  live: null,
  keyCache: null,
  configCache: null,
  // API keys by id (for "who asked"); refreshed on demand.
  async keys(refresh = false) {
    if (!this.keyCache || refresh) {
      const r = await api('/api/keys');
      this.keyCache = new Map(r.keys.map((k) => [k.id, k]));
    }
    return this.keyCache;
  },
  // Loads the keys again when one of ids is not known yet (a key created
  // since the list was loaded), so labels name every key.
  async keysFor(ids) {
    const cache = await this.keys().catch(() => null);
    if (!cache || [...ids].every((id) => !id || cache.has(id))) return;
    await this.keys(true).catch(() => {});
  },
  // Policies, agents and tools from the config (never changes while running).
  async config() {
    if (!this.configCache) this.configCache = await api('/api/policies');
    return this.configCache;
  },
  keyName(id) {
    if (!id) return '—';
    const k = this.keyCache && this.keyCache.get(id);
    return k ? k.name : id;
  },
  keyLabel(id) {
    if (!id) return '—';
    const k = this.keyCache && this.keyCache.get(id);
    return k ? `${k.name} (${k.prefix}…)` : id;
  },
};

let cleanup = null;
let shell = null;
let loginReturn = '';

function parseHash() {
  const raw = location.hash.startsWith('#/') ? location.hash.slice(2) : '';
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const params = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  return { path: path.replace(/\/+$/, ''), params };
}

function renderShell() {
  const countEl = h('span', { class: 'count zero', 'aria-label': '0 pending' }, '0');
  const liveEl = h('span', { class: 'live', role: 'status' }, 'Connecting…');
  const links = NAV.map((n) => h('a', { href: `#/${n.path}`, dataset: { nav: n.path } },
    n.label, n.count ? countEl : null));
  const logout = h('button', { type: 'button', class: 'small', onClick: logOut }, 'Log out');
  const password = h('button', { type: 'button', class: 'small', onClick: () => openChangePassword() },
    'Change password');
  const main = h('main', { id: 'main', tabindex: '-1' });
  const who = ctx.me.user ? `Signed in as ${ctx.me.user}` : `Admin key ${ctx.me.keyName || ''}`;
  replace(app,
    h('header', { class: 'topbar' },
      h('a', { class: 'brand', href: '#/approvals' },
        h('img', { src: '/admin/favicon.svg', alt: '' }), 'gatehouse', h('small', null, 'admin')),
      h('nav', { class: 'nav', 'aria-label': 'Main' }, links),
      h('div', { class: 'session' }, liveEl, h('span', { class: 'hide-narrow' }, who),
        ctx.me.user ? password : null, ctx.me.user ? logout : null)),
    main);
  shell = { main, countEl, liveEl, links };
  const setCount = () => {
    const n = ctx.live.pending.size;
    countEl.textContent = String(n);
    countEl.className = n ? 'count' : 'count zero';
    countEl.setAttribute('aria-label', `${n} pending`);
  };
  const setLive = () => {
    const s = ctx.live.status;
    liveEl.className = `live ${s === 'live' ? 'on' : 'off'}`;
    liveEl.textContent = s === 'live' ? 'Live' : s === 'connecting' ? 'Connecting…' : 'Reconnecting…';
  };
  ctx.live.addEventListener('change', setCount);
  ctx.live.addEventListener('status', setLive);
  setCount();
  setLive();
}

// Each navigation renders into a container of its own. Pages load data
// before they draw, so an earlier navigation can finish after a later one
// (a click while the landing page still loads): its container is no longer
// in the page by then, so what it draws is never seen, and its cleanup runs
// at once.
let navSeq = 0;

async function navigate(first = false) {
  if (!shell) return;
  const { path, params } = parseHash();
  const r = ROUTES.find((x) => x.re.test(path));
  if (!r) {
    location.replace('#/approvals');
    return;
  }
  const m = path.match(r.re);
  const seq = ++navSeq;
  const current = () => seq === navSeq && shell && view.isConnected;
  if (cleanup) {
    try { cleanup(); } catch { /* a page's cleanup must not stop navigation */ }
    cleanup = null;
  }
  for (const a of shell.links) {
    if (a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${r.title} · gatehouse admin`;
  const view = h('div', { class: 'view' });
  replace(shell.main, view);
  let done = null;
  try {
    done = await r.page.render(view, ctx, { params, match: m.slice(1), path }) || null;
  } catch (err) {
    if (current() && !(err instanceof ApiError && err.status === 401)) {
      view.appendChild(h('div', { class: 'notice bad', role: 'alert' },
        `This page could not be loaded: ${err.message}`));
    }
  }
  if (!current()) {
    if (done) {
      try { done(); } catch { /* ignore */ }
    }
    return;
  }
  cleanup = done;
  if (!first) shell.main.focus({ preventScroll: true });
}

async function logOut() {
  try {
    await api('/api/admin/logout', { method: 'POST', body: {} });
  } catch (err) {
    if (err.status !== 401) toast(`Logout: ${err.message}`, 'bad');
  }
  endSession('You have logged out.');
}

function endSession(message) {
  if (ctx.live) ctx.live.stop();
  ctx.live = null;
  ctx.me = null;
  ctx.keyCache = null;
  shell = null;
  setCsrf(null);
  if (cleanup) {
    try { cleanup(); } catch { /* ignore */ }
    cleanup = null;
  }
  showLogin(message);
}

function showLogin(message) {
  document.title = 'Sign in · gatehouse admin';
  renderLogin(app, { message, onLogin: (me) => startSession(me) });
}

async function checkSession() {
  try {
    await api('/api/admin/me', { quiet401: true });
    return true;
  } catch (err) {
    return err.status !== 401;
  }
}

function startSession(me) {
  ctx.me = me;
  setCsrf(me.csrfToken);
  ctx.live = new Live(checkSession);
  ctx.live.addEventListener('ended', () => endSession('Your session has ended. Please sign in again.'));
  renderShell();
  ctx.live.start();
  ctx.keys().catch(() => {});
  if (loginReturn && location.hash !== loginReturn) {
    location.hash = loginReturn;
  } else {
    navigate(true);
  }
  loginReturn = '';
}

onUnauthorized(() => {
  if (!ctx.me) return;
  loginReturn = location.hash;
  endSession('Your session has ended. Please sign in again.');
});

window.addEventListener('hashchange', () => {
  if (location.hash && !location.hash.startsWith('#/')) return; // in-page anchors
  navigate();
});

document.getElementById('skip-link').addEventListener('click', (ev) => {
  const main = document.getElementById('main');
  if (main) {
    ev.preventDefault();
    main.focus();
  }
});

async function boot() {
  startTicker();
  try {
    const me = await api('/api/admin/me', { quiet401: true });
    startSession(me);
  } catch (err) {
    if (err.status && err.status !== 401 && err.status !== 403) {
      showLogin(`The gateway answered: ${err.message}`);
      return;
    }
    loginReturn = location.hash;
    showLogin();
  }
}

boot();

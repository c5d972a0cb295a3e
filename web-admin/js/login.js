// The sign-in page: user name and password -> session cookie + CSRF token.

import { api } from './api.js';
import { h, replace } from './dom.js';

export function renderLogin(root, { message, onLogin }) {
  const user = h('input', { id: 'login-user', name: 'username', autocomplete: 'username', required: true, autocapitalize: 'none', spellcheck: 'false' });
  const password = h('input', { id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const error = h('div', { class: 'notice bad', role: 'alert', hidden: true });
  const info = message ? h('div', { class: 'notice', role: 'status' }, message) : null;

  const form = h('form', { novalidate: true },
    h('div', { class: 'field' }, h('label', { for: 'login-user' }, 'User name'), user),
    h('div', { class: 'field' }, h('label', { for: 'login-password' }, 'Password'), password),
    error,
    submit);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.hidden = true;
    if (!user.value || !password.value) {
      error.textContent = 'Enter your user name and password.';
      error.hidden = false;
      (user.value ? password : user).focus();
      return;
    }
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    try {
      const me = await api('/api/admin/login', {
        method: 'POST', body: { user: user.value, password: password.value }, quiet401: true,
      });
      password.value = '';
      onLogin(me);
    } catch (err) {
      error.textContent = err.status === 429
        ? `Too many failed attempts. Try again in ${err.retryAfter || 60} s.`
        : err.status === 401 ? 'Wrong user name or password.' : err.message;
      error.hidden = false;
      password.value = '';
      password.focus();
      submit.disabled = false;
      submit.textContent = 'Sign in';
    }
  });

  replace(root,
    h('main', { class: 'login', id: 'main', tabindex: '-1' },
      h('div', { class: 'card' },
        h('div', { class: 'brand' }, h('img', { src: '/admin/favicon.svg', alt: '' }), 'gatehouse', h('small', null, 'admin')),
        h('div', null,
          h('h1', null, 'Sign in'),
          h('p', { class: 'sub' }, 'Review pending tool calls and the audit log.')),
        info,
        form,
        h('p', { class: 'sub' }, 'Accounts are made with ', h('code', null, 'gatehouse admin create'), '.'))));
  user.focus();
}

// The sign-in page (user name and password -> session cookie + CSRF token),
// and the dialog in which a signed-in admin changes their own password.

import { api } from './api.js';
import { h, replace, toast } from './dom.js';

// What the server asks of a password (GH_ADMIN_PASSWORD_MIN/MAX).
export const PASSWORD_MIN = 10;
const PASSWORD_MAX = 1024;

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

// "Change password": the current password, the new one twice. The server
// ends the admin's other sessions; this one goes on.
export function openChangePassword() {
  const field = (id, label, autocomplete, hint) => {
    const input = h('input', { id, type: 'password', autocomplete, required: true,
      maxlength: PASSWORD_MAX, 'aria-describedby': hint ? `${id}-hint` : null });
    return [input, h('div', { class: 'field' },
      h('label', { for: id }, label), input,
      hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null)];
  };
  const [current, currentField] = field('pw-current', 'Current password', 'current-password');
  const [fresh, freshField] = field('pw-new', 'New password', 'new-password',
    `At least ${PASSWORD_MIN} characters.`);
  const [again, againField] = field('pw-again', 'New password again', 'new-password');
  const error = h('div', { class: 'notice bad', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Change password');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const form = h('form', { novalidate: true },
    h('div', { class: 'dialog-head' }, h('h2', { id: 'pw-title' }, 'Change password')),
    h('div', { class: 'dialog-body' }, currentField, freshField, againField, error,
      h('p', { class: 'hint' }, 'Your other sessions end when the password changes.')),
    h('div', { class: 'dialog-foot' }, cancel, submit));
  const dlg = h('dialog', { class: 'small', 'aria-labelledby': 'pw-title' }, form);

  const fail = (text, focus) => {
    error.textContent = text;
    error.hidden = false;
    focus.focus();
  };
  cancel.addEventListener('click', () => dlg.close());
  dlg.addEventListener('close', () => dlg.remove());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.hidden = true;
    if (!current.value) return fail('Enter your current password.', current);
    if (fresh.value.length < PASSWORD_MIN) {
      return fail(`The new password needs at least ${PASSWORD_MIN} characters.`, fresh);
    }
    if (fresh.value !== again.value) return fail('The new passwords differ.', again);
    submit.disabled = true;
    submit.textContent = 'Changing…';
    try {
      const r = await api('/api/admin/password', {
        method: 'POST', body: { current: current.value, new: fresh.value },
      });
      dlg.close();
      const n = r.sessionsEnded || 0;
      toast(n ? `Password changed. ${n} other session${n === 1 ? '' : 's'} ended.`
        : 'Password changed.', 'ok');
    } catch (err) {
      const text = err.status === 403 && /current password/.test(err.message)
        ? 'The current password is wrong.'
        : err.status === 429 ? `Too many failed attempts. Try again in ${err.retryAfter || 60} s.`
          : err.message;
      current.value = '';
      fail(text, current);
      submit.disabled = false;
      submit.textContent = 'Change password';
    }
  });
  document.body.appendChild(dlg);
  dlg.showModal();
  current.focus();
}

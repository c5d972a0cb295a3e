// The gateway's JSON API, as the admin UI uses it: the same endpoints curl
// users have, authenticated by the session cookie (sent by the browser)
// plus the session's CSRF token on every request that changes state.

let csrfToken = null;
let unauthorized = () => {};

export function setCsrf(token) {
  csrfToken = token || null;
}

// Called when the server answers 401 (the session ended).
export function onUnauthorized(fn) {
  unauthorized = fn;
}

export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

export async function api(path, { method = 'GET', body, quiet401 = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (err) {
    throw new ApiError(0, 'network', 'The gateway could not be reached. Is it running?');
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data && data.error ? data.error : {};
    const err = new ApiError(res.status, e.code || String(res.status),
      e.message || `${res.status} ${res.statusText}`, Number(res.headers.get('Retry-After')) || 0);
    if (res.status === 401 && !quiet401) unauthorized(err);
    throw err;
  }
  return data;
}

// Builds "path?k=v&..." leaving out empty values.
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

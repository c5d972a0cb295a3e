// Live approvals: one EventSource on GET /api/approvals/events for the whole
// UI. Keeps the set of pending approvals current and tells the pages:
//   'change'    the pending set changed (detail: {reason})
//   'requested' a new approval arrived (detail: approval)
//   'decided'   an approval was decided or expired (detail: approval)
//   'status'    the connection went up or down (detail: 'live' | 'reconnecting')
//   'ended'     the session ended (the server said so, or answered 401)

export class Live extends EventTarget {
  constructor(checkSession) {
    super();
    this.pending = new Map();
    this.status = 'connecting';
    this.checkSession = checkSession;
    this.es = null;
    this.retry = null;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    if (this.es) this.es.close();
    this.es = null;
  }

  setStatus(s) {
    if (this.status === s) return;
    this.status = s;
    this.dispatchEvent(new CustomEvent('status', { detail: s }));
  }

  // Pending approvals, oldest first.
  list() {
    return [...this.pending.values()].sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  }

  connect() {
    if (this.es) this.es.close();
    const es = new EventSource('/api/approvals/events');
    this.es = es;
    es.addEventListener('open', () => this.setStatus('live'));
    es.addEventListener('snapshot', (ev) => {
      const data = JSON.parse(ev.data);
      this.pending = new Map((data.approvals || []).map((a) => [a.id, a]));
      this.setStatus('live');
      this.dispatchEvent(new CustomEvent('change', { detail: { reason: 'snapshot' } }));
    });
    es.addEventListener('approval-requested', (ev) => {
      const a = JSON.parse(ev.data);
      if (a.status === 'pending') this.pending.set(a.id, a);
      this.dispatchEvent(new CustomEvent('requested', { detail: a }));
      this.dispatchEvent(new CustomEvent('change', { detail: { reason: 'requested' } }));
    });
    es.addEventListener('approval-decided', (ev) => {
      const a = JSON.parse(ev.data);
      this.pending.delete(a.id);
      this.dispatchEvent(new CustomEvent('decided', { detail: a }));
      this.dispatchEvent(new CustomEvent('change', { detail: { reason: 'decided' } }));
    });
    es.addEventListener('session-ended', () => {
      es.close();
      this.dispatchEvent(new CustomEvent('ended'));
    });
    es.addEventListener('error', async () => {
      if (this.stopped || this.es !== es) return;
      this.setStatus('reconnecting');
      if (es.readyState !== EventSource.CLOSED) return; // the browser retries by itself
      // closed for good (an error status): is the session still there?
      const alive = await this.checkSession();
      if (!alive) {
        this.dispatchEvent(new CustomEvent('ended'));
        return;
      }
      clearTimeout(this.retry);
      this.retry = setTimeout(() => { if (!this.stopped) this.connect(); }, 3000);
    });
  }
}

// onceflow web UI: plain JavaScript, no build step. Hash routing:
//   #/signin  #/jobs?…  #/jobs/{id}  #/stuck  #/providers  #/schedules  #/schedules/{name}
// The token the user pastes in lives in this tab's sessionStorage and goes to the API as
// `Authorization: Bearer`. Every text from the server is put in the page as text, never as HTML.
'use strict';

(() => {
  const TOKEN_KEY = 'onceflow.token';
  const WHO_KEY = 'onceflow.who';
  const POLL_MS = 2000;
  const ATTEMPT_STATUSES = ['scheduled', 'started', 'unknown', 'cancelled', 'succeeded', 'lost', 'failed', 'invalid', 'expired'];
  const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'];
  const LIVE_ATTEMPT = new Set(['scheduled', 'started', 'unknown']);

  const main = document.getElementById('main');
  const flashEl = document.getElementById('flash');
  const liveEl = document.getElementById('live');
  let routeSeq = 0;
  let pollTimer = null;

  // ---------------------------------------------------------------- helpers

  /** Makes an element: attrs may hold `class`, `text`, `dataset`, `on*` handlers, or any attribute. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style') Object.assign(el.style, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  const token = () => sessionStorage.getItem(TOKEN_KEY);
  function who() {
    try { return JSON.parse(sessionStorage.getItem(WHO_KEY)); } catch (_) { return null; }
  }
  const isOperator = () => (who() || {}).role === 'operator';

  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  async function api(method, path, body, explicitToken) {
    const headers = { Authorization: 'Bearer ' + (explicitToken || token() || '') };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      const e = (data && data.error) || {};
      const err = new ApiError(response.status, e.code || 'http_' + response.status, e.message || response.statusText, e.details);
      if (response.status === 401 && !explicitToken) {
        signOut('Your token is no longer accepted (' + err.code + '). Sign in again.');
      }
      throw err;
    }
    return data;
  }

  function describe(err) {
    if (err instanceof ApiError) return err.code + ': ' + err.message;
    return String(err && err.message ? err.message : err);
  }

  let flashHash = '';
  /** A message above the page; it stays while the page it was shown on (`forHash`) is. */
  function flash(text, isError, forHash) {
    flashHash = forHash || location.hash;
    flashEl.textContent = text;
    flashEl.className = 'flash' + (isError ? ' error' : '');
    flashEl.hidden = !text;
  }

  function setLive(text, isError) {
    liveEl.textContent = text;
    liveEl.className = 'live' + (isError ? ' error' : '');
  }

  const ms = (iso) => (iso ? new Date(iso).getTime() : NaN);
  const localTime = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
  const clock = (t) => new Date(t).toLocaleTimeString();

  function duration(millis) {
    const s = Math.abs(millis) / 1000;
    if (s < 1) return Math.round(Math.abs(millis)) + ' ms';
    if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.round((s % 86400) / 3600) + ' h';
  }

  function age(iso) {
    if (!iso) return '';
    const d = Date.now() - ms(iso);
    return d >= 0 ? duration(d) + ' ago' : 'in ' + duration(d);
  }

  /** A time in local time with its relative age, the UTC instant in the tooltip. */
  function when(iso) {
    if (!iso) return h('span', { class: 'muted', text: '—' });
    return h('time', { datetime: iso, title: iso + ' (UTC)' }, localTime(iso), h('span', { class: 'muted', text: ' · ' + age(iso) }));
  }

  const badge = (status) => h('span', { class: 'badge s-' + status, text: status });
  const json = (value) => h('pre', { text: JSON.stringify(value, null, 2) });
  const short = (id) => String(id).slice(0, 8) + '…' + String(id).slice(-4);

  function stopPolling() {
    if (pollTimer) clearTimeout(pollTimer);
    pollTimer = null;
  }

  /** Runs `refresh` now and every POLL_MS while this route is shown. */
  function poll(seq, refresh) {
    const tick = async () => {
      if (seq !== routeSeq) return;
      try {
        await refresh();
        if (seq === routeSeq) setLive('live · updated ' + new Date().toLocaleTimeString());
      } catch (err) {
        if (seq === routeSeq) setLive('update failed: ' + describe(err), true);
      }
      if (seq === routeSeq) pollTimer = setTimeout(tick, POLL_MS);
    };
    return tick();
  }

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/jobs';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  // ---------------------------------------------------------------- chrome and routing

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(WHO_KEY);
    stopPolling();
    flash(message || '', !!message, '#/signin');
    go('#/signin');
  }

  function chrome(page) {
    const me = who();
    document.getElementById('nav').hidden = !me;
    document.getElementById('signout').hidden = !me;
    document.getElementById('who').textContent = me ? me.owner + ' · ' + me.role : '';
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === page);
  }

  async function route() {
    stopPolling();
    const seq = ++routeSeq;
    setLive('');
    if (location.hash !== flashHash) flash('');
    const { parts, params } = parseHash();
    const page = parts[0] || 'jobs';
    if (!token() && page !== 'signin') {
      go('#/signin?next=' + encodeURIComponent(location.hash || '#/jobs'));
      return;
    }
    chrome(page);
    main.replaceChildren();
    try {
      if (page === 'signin') signInPage(params);
      else if (page === 'jobs' && parts[1]) await jobPage(seq, parts[1]);
      else if (page === 'jobs') await jobsPage(seq, params);
      else if (page === 'stuck') await stuckPage(seq);
      else if (page === 'providers') await providersPage(seq);
      else if (page === 'schedules') await schedulesPage(seq, parts[1] ? decodeURIComponent(parts[1]) : null);
      else main.append(h('p', { class: 'error', text: 'No such page: ' + location.hash }));
    } catch (err) {
      if (seq === routeSeq) main.append(h('p', { class: 'error', text: describe(err) }));
    }
  }

  // ---------------------------------------------------------------- sign in

  function signInPage(params) {
    document.title = 'Sign in · onceflow';
    const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'of_…', style: { width: '100%' } });
    const error = h('p', { id: 'signin-error', class: 'error', hidden: true });
    const form = h('form', { id: 'signin-form', class: 'card signin' },
      h('h1', { text: 'Sign in' }),
      h('p', { class: 'hint' }, 'Paste an API token. An ', h('b', { text: 'operator' }),
        ' token sees every owner and can cancel stuck attempts; a ', h('b', { text: 'client' }),
        ' token sees its owner\'s jobs. The token stays in this browser tab (sessionStorage) and is sent only to this server.'),
      h('label', { for: 'token', text: 'Token' }), input, error,
      h('div', { class: 'buttons', style: { marginTop: '10px' } }, h('button', { type: 'submit', class: 'primary', id: 'signin', text: 'Sign in' })));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const pasted = input.value.trim();
      if (!pasted) { error.textContent = 'Paste a token first.'; error.hidden = false; return; }
      try {
        const me = await api('GET', '/v1/whoami', undefined, pasted);
        sessionStorage.setItem(TOKEN_KEY, pasted);
        sessionStorage.setItem(WHO_KEY, JSON.stringify(me));
        flash('');
        const next = params.get('next');
        go(next && next.startsWith('#/') && !next.startsWith('#/signin') ? next : (me.role === 'operator' ? '#/stuck' : '#/jobs'));
      } catch (err) {
        error.textContent = err instanceof ApiError && err.status === 401 ? 'That token is not accepted (unauthenticated).' : describe(err);
        error.hidden = false;
      }
    });
    main.append(form);
    input.focus();
  }

  // ---------------------------------------------------------------- jobs

  function attemptChips(job) {
    const chips = [];
    for (const activity of job.activities || []) {
      for (const a of activity.attempts || []) {
        const won = activity.completed_by === a.id;
        chips.push(h('span', {
          class: 'chip s-' + a.status + (won ? ' won' : ''),
          title: '#' + a.number + ' ' + a.provider + ': ' + a.status + (won ? ' (won)' : ''),
        }));
      }
    }
    return h('span', { class: 'chips' }, chips.length ? chips : h('span', { class: 'muted', text: '—' }));
  }

  function toIso(local) {
    if (!local) return null;
    const d = new Date(local);
    return isNaN(d.getTime()) ? null : d.toISOString();
  }

  async function jobsPage(seq, params) {
    document.title = 'Jobs · onceflow';
    const op = isOperator();
    const field = (label, control) => h('div', { class: 'field' }, h('label', { text: label }), control);
    const status = h('select', { name: 'status', id: 'f-status' }, h('option', { value: '', text: 'any' }), JOB_STATUSES.map((s) => h('option', { value: s, text: s })));
    const kind = h('select', { name: 'kind', id: 'f-kind' }, h('option', { value: 'activity', text: 'activity' }), h('option', { value: 'workflow', text: 'workflow' }));
    const name = h('input', { name: 'name', id: 'f-name', placeholder: 'e.g. generate', size: 14 });
    const owner = h('input', { name: 'owner', id: 'f-owner', placeholder: 'every owner', size: 12 });
    const from = h('input', { name: 'from', id: 'f-from', type: 'datetime-local', step: 1 });
    const to = h('input', { name: 'to', id: 'f-to', type: 'datetime-local', step: 1 });
    const limit = h('select', { name: 'limit', id: 'f-limit' }, ['20', '50', '100', '200'].map((n) => h('option', { value: n, text: n })));
    status.value = params.get('status') || '';
    kind.value = params.get('kind') || 'activity';
    name.value = params.get('name') || '';
    owner.value = params.get('owner') || '';
    from.value = params.get('from') || '';
    to.value = params.get('to') || '';
    limit.value = params.get('limit') || '50';

    const form = h('form', { class: 'card filters', id: 'job-filters' },
      field('Status', status), field('Workflow or activity', h('span', {}, kind, ' ', name)),
      op ? field('Owner', owner) : null,
      field('Created from (local time)', from), field('Created before', to), field('Per page', limit),
      h('div', { class: 'field' }, h('label', { text: '\u00a0' }), h('span', {},
        h('button', { type: 'submit', class: 'primary', text: 'Apply' }), ' ',
        h('button', { type: 'button', text: 'Reset', onclick: () => go('#/jobs') }))));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      if (status.value) next.set('status', status.value);
      if (name.value.trim()) { next.set('kind', kind.value); next.set('name', name.value.trim()); }
      if (op && owner.value.trim()) next.set('owner', owner.value.trim());
      if (from.value) next.set('from', from.value);
      if (to.value) next.set('to', to.value);
      if (limit.value !== '50') next.set('limit', limit.value);
      go('#/jobs' + (next.toString() ? '?' + next : ''));
    });

    const results = h('div', { id: 'jobs' });
    main.append(h('h1', { text: 'Jobs' }), form, results);

    const query = new URLSearchParams();
    if (params.get('status')) query.set('status', params.get('status'));
    if (params.get('name')) query.set(params.get('kind') === 'workflow' ? 'workflow' : 'activity', params.get('name'));
    if (op && params.get('owner')) query.set('owner', params.get('owner'));
    if (toIso(params.get('from'))) query.set('created_after', toIso(params.get('from')));
    if (toIso(params.get('to'))) query.set('created_before', toIso(params.get('to')));
    query.set('limit', params.get('limit') || '50');
    if (params.get('after')) query.set('after', params.get('after'));
    // Older pages are reached with `after` (a cursor); the way back is the cursors seen so far.
    const back = (params.get('back') || '').split(',').filter(Boolean);

    const pageHash = (after, backList) => {
      const p = new URLSearchParams(params);
      if (after) p.set('after', after); else p.delete('after');
      if (backList.length) p.set('back', backList.join(',')); else p.delete('back');
      return '#/jobs' + (p.toString() ? '?' + p : '');
    };

    await poll(seq, async () => {
      const page = await api('GET', '/v1/jobs?' + query);
      if (seq !== routeSeq) return;
      const rows = page.jobs.map((job) => h('tr', {
        class: 'clickable', dataset: { jobId: job.id },
        onclick: (ev) => { if (!(ev.target instanceof HTMLAnchorElement)) go('#/jobs/' + job.id); },
      },
      h('td', {}, when(job.created_at)),
      h('td', { text: job.owner }),
      h('td', {}, h('a', { href: '#/jobs/' + job.id, class: 'mono', text: job.idempotency_key, title: job.id })),
      h('td', {}, h('span', { class: 'tag', text: job.kind }), ' ', job.workflow || job.activity || ''),
      h('td', {}, badge(job.status)),
      h('td', {}, attemptChips(job)),
      h('td', {}, job.finished_at ? when(job.finished_at) : when(job.updated_at))));
      const table = h('table', { id: 'jobs-table' },
        h('thead', {}, h('tr', {}, ['Created', 'Owner', 'Idempotency key', 'Workflow / activity', 'Status', 'Attempts', 'Finished / updated'].map((t) => h('th', { text: t })))),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 7, class: 'muted', text: 'No jobs match.' }))));
      const pager = h('div', { class: 'pager' },
        h('button', { type: 'button', id: 'newer', disabled: !params.get('after'), text: '← Newer',
          onclick: () => { const b = back.slice(); const prev = b.pop(); go(pageHash(prev === '-' ? null : prev, b)); } }),
        h('button', { type: 'button', id: 'older', disabled: !page.next, text: 'Older →',
          onclick: () => go(pageHash(page.next, back.concat([params.get('after') || '-']))) }),
        h('span', { class: 'muted', text: page.jobs.length + ' job' + (page.jobs.length === 1 ? '' : 's') + ' on this page, newest first' }));
      results.replaceChildren(table, pager);
    });
  }

  // ---------------------------------------------------------------- one job

  /** The moments an attempt changed state, from its fields and its events. */
  function transitions(attempt, events) {
    const steps = [{ t: ms(attempt.created_at), state: 'scheduled' }];
    if (attempt.started_at) steps.push({ t: ms(attempt.started_at), state: 'started' });
    for (const e of events) {
      if (e.attempt_id !== attempt.id) continue;
      if (e.type === 'attempt_heartbeat_lost') steps.push({ t: ms(e.at), state: 'unknown' });
      else if (e.type === 'attempt_revived') steps.push({ t: ms(e.at), state: 'started' });
      else if (e.type === 'attempt_cancelled') steps.push({ t: ms(e.at), state: 'cancelled' });
    }
    steps.sort((a, b) => a.t - b.t);
    return steps;
  }

  function attemptEnd(attempt, events, now) {
    if (LIVE_ATTEMPT.has(attempt.status)) return now;
    let end = ms(attempt.finished_at);
    for (const e of events) if (e.attempt_id === attempt.id && ms(e.at) > (end || 0)) end = ms(e.at);
    return end || now;
  }

  function timeline(job, activity, events, span) {
    const [t0, t1] = span;
    const pct = (t) => Math.max(0, Math.min(100, ((t - t0) / (t1 - t0)) * 100));
    const now = Date.now();
    const axis = h('div', { class: 'tl-axis' }, h('div', { class: 'muted', text: 'attempt' }),
      h('div', { class: 'tl-track' }, [0, 0.25, 0.5, 0.75, 1].map((f, i) => h('span', {
        class: 'tick' + (i === 0 ? ' first' : i === 4 ? ' last' : ''), style: { left: f * 100 + '%' },
        text: i === 0 ? clock(t0) : '+' + duration((t1 - t0) * f),
      }))));
    const rows = activity.attempts.map((a) => {
      const won = activity.completed_by === a.id;
      const steps = transitions(a, events);
      const end = attemptEnd(a, events, now);
      const live = LIVE_ATTEMPT.has(a.status);
      const segments = steps.map((s, i) => {
        const until = i + 1 < steps.length ? steps[i + 1].t : end;
        // A finished attempt's last stretch wears its final status, except a cancelled
        // stretch: it runs (cancelled) until the attempt's late result, if one came.
        let state = s.state;
        if (i + 1 === steps.length && !live && state !== 'cancelled') state = a.status;
        return h('div', {
          class: 'seg ' + state + (live && i + 1 === steps.length ? ' live' : ''),
          style: { left: pct(s.t) + '%', width: Math.max(0, pct(until) - pct(s.t)) + '%' },
          title: state + ': ' + clock(s.t) + ' → ' + (live && i + 1 === steps.length ? 'now' : clock(until)) + ' (' + duration(until - s.t) + ')',
        });
      });
      const marks = [];
      if (a.heartbeat_at && ms(a.heartbeat_at) > ms(a.started_at) + 5) {
        marks.push(h('div', { class: 'hb', style: { left: pct(ms(a.heartbeat_at)) + '%' }, title: 'last heartbeat ' + localTime(a.heartbeat_at) + ' (only the latest is kept)' }));
      }
      if (live && a.lease_expires_at) {
        marks.push(h('div', { class: 'lease', style: { left: pct(ms(a.lease_expires_at)) + '%' }, title: 'lease ' + (a.status === 'unknown' ? 'expired ' : 'expires ') + localTime(a.lease_expires_at) }));
      }
      if (!live) {
        const symbol = won ? '★' : a.status === 'lost' ? '✕' : a.status === 'failed' || a.status === 'invalid' ? '!' : a.status === 'cancelled' ? '⊘' : '';
        if (symbol) marks.push(h('div', { class: 'end ' + (won ? 'won' : a.status), style: { left: pct(end) + '%' }, title: won ? 'won: its result is the activity\'s result' : a.status, text: symbol }));
      }
      const notes = [];
      if (won) notes.push(h('span', { class: 'tag won', text: '★ won' }), h('span', { class: 'note', text: 'its result took the activity\'s result slot (compare-and-swap)' }));
      if (a.status === 'lost') notes.push(h('span', { class: 'tag lost', text: 'lost the race' }), h('span', { class: 'note', text: 'its result arrived after the slot was taken or the job closed, and was discarded' }));
      if (a.cancelled_by) notes.push(h('span', { class: 'note cancel' }, 'cancelled by ', h('b', { text: a.cancelled_by }), ': “', h('span', { class: 'cancel-reason', text: a.cancel_reason || '' }), '”'));
      if (a.status === 'unknown') notes.push(h('span', { class: 'note' }, 'lease expired ', when(a.lease_expires_at), ': the provider may still be working; new attempts wait until a late result, a heartbeat, or an operator cancel'));
      if (a.error) notes.push(h('span', { class: 'note error', text: a.error.code + ': ' + a.error.message }));
      if (a.heartbeat_at && ms(a.heartbeat_at) > ms(a.started_at) + 5) notes.push(h('span', { class: 'note', text: 'last heartbeat ' + clock(ms(a.heartbeat_at)) }));
      else if (a.started_at) notes.push(h('span', { class: 'note', text: 'no heartbeat after it started' }));
      const elapsed = a.started_at ? duration(end - ms(a.started_at)) + (live ? ' so far' : '') : 'waiting ' + duration(end - ms(a.created_at));
      return h('div', { class: 'tl-row attempt' + (won ? ' won' : '') + (a.status === 'lost' ? ' lost' : ''), dataset: { attemptId: a.id, status: a.status } },
        h('div', { class: 'tl-label' }, h('span', { class: 'who', text: '#' + a.number + ' ' + a.provider }), ' ', badge(a.status),
          h('div', { class: 'muted', text: elapsed })),
        h('div', { class: 'tl-track' }, segments, marks),
        notes.length ? h('div', { class: 'tl-notes' }, notes) : null);
    });
    return h('div', { class: 'timeline', dataset: { activity: activity.seq } }, axis, rows.length ? rows : h('p', { class: 'muted', text: 'No attempts yet.' }));
  }

  function legend() {
    return h('div', { class: 'legend' },
      ATTEMPT_STATUSES.map((s) => h('span', {}, h('span', { class: 'sw seg ' + s, style: { position: 'static', display: 'inline-block' } }), s)),
      h('span', {}, h('span', { class: 'sw hb' }), 'last heartbeat (only the latest is kept)'),
      h('span', { text: '★ won · ✕ lost the race · ⊘ cancelled · ! failed or invalid' }));
  }

  /** A job's whole history: its pages of events, one after another. */
  async function allEvents(id) {
    const events = [];
    let after = 0;
    for (;;) {
      const page = await api('GET', '/v1/jobs/' + encodeURIComponent(id) + '/events?limit=1000&after_seq=' + after);
      events.push(...page.events);
      if (page.next === null || page.next === undefined) return events;
      after = page.next;
    }
  }

  async function jobPage(seq, id) {
    document.title = 'Job ' + short(id) + ' · onceflow';
    const view = h('div', { id: 'job' });
    main.append(h('p', {}, h('a', { href: '#/jobs', text: '← Jobs' })), view);
    const refresh = async () => {
      const [job, events] = await Promise.all([api('GET', '/v1/jobs/' + encodeURIComponent(id)), allEvents(id)]);
      if (seq !== routeSeq) return;
      const now = Date.now();
      const open = job.status === 'queued' || job.status === 'running' || job.activities.some((act) => act.attempts.some((a) => LIVE_ATTEMPT.has(a.status)));
      let t0 = ms(job.created_at);
      let t1 = open ? now : ms(job.finished_at || job.updated_at);
      for (const e of events) t1 = Math.max(t1, ms(e.at));
      for (const act of job.activities) for (const a of act.attempts) { t0 = Math.min(t0, ms(a.created_at)); t1 = Math.max(t1, attemptEnd(a, events, now)); }
      if (!(t1 > t0)) t1 = t0 + 1000;
      t1 += (t1 - t0) * 0.03;
      const names = new Map();
      for (const act of job.activities) for (const a of act.attempts) names.set(a.id, '#' + a.number + ' ' + a.provider);

      const facts = h('dl', { class: 'facts' },
        h('dt', { text: 'Owner' }), h('dd', { id: 'job-owner', text: job.owner }),
        h('dt', { text: 'Idempotency key' }), h('dd', { class: 'mono', id: 'job-key', text: job.idempotency_key }),
        h('dt', { text: job.kind === 'workflow' ? 'Workflow' : 'Activity' }), h('dd', { text: job.workflow || job.activity || '' }),
        h('dt', { text: 'Task queue' }), h('dd', { text: job.task_queue }),
        h('dt', { text: 'Created' }), h('dd', {}, when(job.created_at)),
        h('dt', { text: 'Finished' }), h('dd', {}, when(job.finished_at)),
        h('dt', { text: 'Updated' }), h('dd', {}, when(job.updated_at)),
        h('dt', { text: 'Version' }), h('dd', { text: String(job.version) }),
        ...(job.parent_job_id ? [h('dt', { text: 'Parent' }),
          h('dd', { id: 'job-parent' }, h('a', { href: '#/jobs/' + job.parent_job_id, class: 'mono', text: job.parent_job_id }))] : []),
        ...((job.children || []).length ? [h('dt', { text: 'Children' }),
          h('dd', { id: 'job-children' }, job.children.map((c) => h('a', { href: '#/jobs/' + c, class: 'mono', text: c })).reduce((acc, el) => acc.concat(acc.length ? [', ', el] : [el]), []))] : []));
      const outcome = job.error
        ? h('div', {}, h('h3', { text: 'Error' }), h('pre', { class: 'error', id: 'job-error', text: job.error.code + ': ' + job.error.message }))
        : h('div', {}, h('h3', { text: 'Result' }), job.result === null ? h('p', { class: 'muted', text: job.status === 'succeeded' ? 'null' : 'not yet' }) : h('div', { id: 'job-result' }, json(job.result)));
      const role = (who() || {}).role;
      const resume = resumable(job) && (role === 'operator' || role === 'client')
        ? h('p', { class: 'buttons' }, h('button', {
          type: 'button', id: 'job-resume', class: 'resume',
          title: 'Run this job again under its own id and key: recorded steps are replayed, the failed step runs again',
          text: 'Resume…', onclick: () => openResume(job, () => refresh().catch(() => {})),
        }))
        : null;
      const header = h('section', { class: 'card' },
        h('h1', {}, 'Job ', h('span', { class: 'mono', text: job.id }), ' ', h('span', { id: 'job-status' }, badge(job.status))),
        resume, facts, h('div', { class: 'io' }, h('div', {}, h('h3', { text: 'Input' }), json(job.input)), outcome));
      const activities = job.activities.map((act) => h('section', { class: 'card activity' },
        h('h2', {}, 'Activity ' + act.seq + ': ' + act.name + ' ', badge(act.status)),
        h('p', { class: 'hint' }, 'Providers in failover order: ', act.providers.map((p, i) => h('span', { class: 'tag', text: p + (i === 0 ? ' (primary)' : '') })).reduce((acc, el) => acc.concat(acc.length ? [' → ', el] : [el]), []),
          act.status === 'blocked' ? h('span', { class: 'error', text: ' — blocked: its live attempt is unknown; an operator can cancel it from the Stuck page' }) : null,
          act.error ? h('span', { class: 'error', text: ' — ' + act.error.code + ': ' + act.error.message }) : null),
        timeline(job, act, events, [t0, t1]), legend()));
      const signalCard = job.signals && job.signals.length ? [h('section', { class: 'card', id: 'signals' },
        h('h2', { text: 'Signals' }),
        h('p', { class: 'hint', text: 'In the order they were recorded; the workflow takes each once, in this order.' }),
        h('table', {}, h('thead', {}, h('tr', {}, ['#', 'Name', 'Received', 'Taken', 'Payload'].map((t) => h('th', { text: t })))),
          h('tbody', {}, job.signals.map((s) => h('tr', { dataset: { signal: String(s.seq) } },
            h('td', { text: String(s.seq) }),
            h('td', {}, h('span', { class: 'tag', text: s.name })),
            h('td', { class: 'nowrap', title: s.received_at, text: localTime(s.received_at) }),
            h('td', { class: 'nowrap', text: s.consumed ? (s.consumed_at ? localTime(s.consumed_at) : 'taken') : 'waiting for the workflow' }),
            h('td', { class: 'data' }, h('code', { text: JSON.stringify(s.payload) })))))))] : [];
      const eventRows = events.map((e) => h('tr', { dataset: { type: e.type } },
        h('td', { text: String(e.seq) }),
        h('td', { class: 'nowrap', title: e.at, text: localTime(e.at) }),
        h('td', {}, h('span', { class: 'tag', text: e.type })),
        h('td', { class: 'nowrap', text: e.attempt_id ? names.get(e.attempt_id) || short(e.attempt_id) : '' }),
        h('td', { text: e.actor }),
        h('td', { class: 'data' }, Object.keys(e.data || {}).length ? h('code', { text: JSON.stringify(e.data) }) : '')));
      const history_ = h('section', { class: 'card' }, h('h2', { text: 'Event history' }),
        h('table', { id: 'events' }, h('thead', {}, h('tr', {}, ['#', 'At', 'Type', 'Attempt', 'Actor', 'Data'].map((t) => h('th', { text: t })))), h('tbody', {}, eventRows)));
      view.replaceChildren(header, ...activities, ...signalCard, history_);
    };
    await poll(seq, refresh);
  }

  /** Whether a job can be resumed: `failed`, or a workflow parked with an error. */
  const resumable = (job) => job.status === 'failed' || (job.kind === 'workflow' && job.status === 'running' && !!job.error);

  // ---------------------------------------------------------------- resume

  const resumeDialog = document.getElementById('resume-dialog');
  const resumeForm = document.getElementById('resume-form');
  const resumeReason = document.getElementById('resume-reason');
  const resumeError = document.getElementById('resume-error');
  let resumeTarget = null;

  function openResume(job, onDone) {
    resumeTarget = { job, onDone };
    document.getElementById('resume-what').textContent = 'Job ' + job.id + ' (key ' + job.idempotency_key + ', owner ' + job.owner + ') is ' +
      job.status + (job.error ? ' with ' + job.error.code + ': ' + job.error.message : '') + '.';
    resumeReason.value = '';
    resumeError.hidden = true;
    resumeDialog.showModal();
    resumeReason.focus();
  }

  document.getElementById('resume-abort').addEventListener('click', () => resumeDialog.close());
  resumeForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!resumeTarget) return;
    const reason = resumeReason.value.trim();
    if (!reason) {
      resumeError.textContent = 'A reason is required: say what was fixed.';
      resumeError.hidden = false;
      resumeReason.focus();
      return;
    }
    const { job, onDone } = resumeTarget;
    const confirmButton = document.getElementById('resume-confirm');
    confirmButton.disabled = true;
    try {
      const done = await api('POST', '/v1/jobs/' + encodeURIComponent(job.id) + '/resume', { reason });
      resumeDialog.close();
      resumeTarget = null;
      flash('Job ' + short(done.id) + ' resumed: ' + done.status + ' again, under the same id and key.');
      if (onDone) onDone();
    } catch (err) {
      resumeError.textContent = describe(err);
      resumeError.hidden = false;
    } finally {
      confirmButton.disabled = false;
    }
  });

  // ---------------------------------------------------------------- stuck attempts

  const cancelDialog = document.getElementById('cancel-dialog');
  const cancelForm = document.getElementById('cancel-form');
  const cancelReason = document.getElementById('cancel-reason');
  const cancelError = document.getElementById('cancel-error');
  let cancelTarget = null;

  function openCancel(attempt, onDone) {
    cancelTarget = { attempt, onDone };
    document.getElementById('cancel-what').textContent = 'Attempt #' + attempt.number + ' at ' + attempt.provider + ' of job ' + attempt.job_id +
      ' (owner ' + attempt.owner + ', activity ' + attempt.activity + '), ' + attempt.status + ' for ' + duration(Date.now() - ms(attempt.since)) + '.';
    cancelReason.value = '';
    cancelError.hidden = true;
    cancelDialog.showModal();
    cancelReason.focus();
  }

  document.getElementById('cancel-abort').addEventListener('click', () => cancelDialog.close());
  cancelForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!cancelTarget) return;
    const reason = cancelReason.value.trim();
    if (!reason) {
      cancelError.textContent = 'A reason is required: say what you know about the provider\'s side.';
      cancelError.hidden = false;
      cancelReason.focus();
      return;
    }
    const { attempt, onDone } = cancelTarget;
    const confirmButton = document.getElementById('cancel-confirm');
    confirmButton.disabled = true;
    try {
      const done = await api('POST', '/v1/attempts/' + encodeURIComponent(attempt.id) + '/cancel', { reason });
      cancelDialog.close();
      cancelTarget = null;
      flash('Attempt #' + done.number + ' at ' + done.provider + ' cancelled by ' + done.cancelled_by + '. The engine moves on to the next certified provider; see the job\'s timeline.');
      if (onDone) onDone();
    } catch (err) {
      cancelError.textContent = describe(err);
      cancelError.hidden = false;
    } finally {
      confirmButton.disabled = false;
    }
  });

  /** For a client token: its own jobs' unknown and long-started attempts, from the job list. */
  async function ownStuck(minStartedS) {
    const page = await api('GET', '/v1/jobs?status=running&limit=200');
    const found = [];
    for (const job of page.jobs) {
      for (const act of job.activities) {
        for (const a of act.attempts) {
          const since = a.status === 'unknown' ? a.lease_expires_at || a.started_at : a.started_at;
          if (a.status === 'unknown' || (a.status === 'started' && Date.now() - ms(since) >= minStartedS * 1000)) {
            found.push(Object.assign({}, a, { job_id: job.id, owner: job.owner, activity: act.name, since }));
          }
        }
      }
    }
    return found;
  }

  async function stuckPage(seq) {
    document.title = 'Stuck attempts · onceflow';
    const op = isOperator();
    const minStarted = h('input', { id: 'min-started', type: 'number', min: 0, value: 60, style: { width: '5em' } });
    const results = h('div', { id: 'stuck' });
    main.append(h('h1', { text: 'Stuck attempts' }),
      h('div', { class: 'card' },
        h('p', { class: 'hint' }, 'Every ', h('b', { text: 'unknown' }), ' attempt (its lease expired: the provider may still be working, so the engine waits and tries nothing else), and every attempt ',
          h('b', { text: 'started' }), ' for at least ', minStarted, ' seconds, across owners, oldest first (at 60 seconds, the list ', h('code', { text: 'onceflow attempts stuck' }), ' prints). ',
          'Confirm with the provider what happened before you cancel one; the reason is recorded.'),
        op ? null : h('p', { class: 'error', id: 'not-operator' }, 'Your token is a ' + ((who() || {}).role || '?') + ' token: you see your own jobs\' stuck attempts, and only an operator can cancel one.')),
      results);
    const refresh = async () => {
      const min = Math.max(0, parseInt(minStarted.value, 10) || 0);
      let attempts;
      if (op) {
        const [unknown, started] = await Promise.all([
          api('GET', '/v1/attempts?status=unknown&older_than_s=0&limit=500'),
          api('GET', '/v1/attempts?status=started&older_than_s=' + min + '&limit=500')]);
        attempts = unknown.attempts.concat(started.attempts);
      } else {
        attempts = await ownStuck(min);
      }
      if (seq !== routeSeq) return;
      attempts.sort((a, b) => ms(a.since) - ms(b.since));
      const rows = attempts.map((a) => h('tr', { dataset: { attemptId: a.id, status: a.status } },
        h('td', {}, h('b', { text: duration(Date.now() - ms(a.since)) }), h('div', { class: 'muted', title: a.since, text: 'since ' + localTime(a.since) })),
        h('td', {}, badge(a.status)),
        h('td', { text: a.owner }),
        h('td', {}, h('a', { href: '#/jobs/' + a.job_id, class: 'mono', text: short(a.job_id), title: a.job_id })),
        h('td', { text: a.activity }),
        h('td', {}, '#' + a.number + ' ', h('b', { text: a.provider })),
        h('td', {}, a.heartbeat_at ? when(a.heartbeat_at) : h('span', { class: 'muted', text: 'none' })),
        h('td', {}, h('button', {
          type: 'button', class: 'cancel danger', disabled: !op,
          title: op ? 'Cancel this attempt out-of-band, with a reason' : 'Only an operator token can cancel an attempt',
          text: 'Cancel…', onclick: () => openCancel(a, () => refresh().catch(() => {})),
        }))));
      results.replaceChildren(h('table', { id: 'stuck-table' },
        h('thead', {}, h('tr', {}, ['In status for', 'Status', 'Owner', 'Job', 'Activity', 'Attempt', 'Last heartbeat', ''].map((t) => h('th', { text: t })))),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 8, class: 'muted', text: 'Nothing is stuck.' })))));
    };
    minStarted.addEventListener('change', () => refresh().catch((err) => setLive(describe(err), true)));
    await poll(seq, refresh);
  }

  // ---------------------------------------------------------------- providers

  async function providersPage(seq) {
    document.title = 'Providers · onceflow';
    const results = h('div', { id: 'providers' });
    main.append(h('h1', { text: 'Providers and certifications' }),
      h('p', { class: 'hint', text: 'Each activity has an output contract (a JSON Schema every result must satisfy; the most recently registered one is current). ' +
        'Automatic failover moves only to a provider whose latest certification against the current contract passed; the primary needs none.' }),
      results);
    await poll(seq, async () => {
      const list = await api('GET', '/v1/contracts');
      if (seq !== routeSeq) return;
      if (!list.contracts.length) {
        results.replaceChildren(h('p', { class: 'muted', text: 'No contracts registered yet (workers register them with POST /v1/worker/contracts).' }));
        return;
      }
      const byActivity = new Map();
      for (const c of list.contracts) {
        if (!byActivity.has(c.activity)) byActivity.set(c.activity, []);
        byActivity.get(c.activity).push(c);
      }
      const cards = [...byActivity.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([activity, contracts]) => h('section', { class: 'card', dataset: { activity } },
        h('h2', { text: activity }),
        contracts.map((c) => h('div', { class: 'contract' + (c.current ? '' : ' superseded'), dataset: { hash: c.contract_hash } },
          h('h3', {}, c.current ? h('span', { class: 'badge s-succeeded', text: 'current' }) : h('span', { class: 'badge s-expired', text: 'superseded' }),
            ' contract ', h('code', { title: c.contract_hash, text: c.contract_hash.slice(0, 12) }), ' · owner ', h('b', { text: c.owner }), ' · registered ', when(c.created_at)),
          c.current ? null : h('p', { class: 'hint', text: 'Certifications against a superseded contract no longer count.' }),
          h('details', {}, h('summary', { text: 'output schema' }), json(c.output_schema)),
          h('table', { class: 'certs' },
            h('thead', {}, h('tr', {}, ['Provider', 'Latest certification', 'Recorded', 'Report'].map((t) => h('th', { text: t })))),
            h('tbody', {}, c.certifications.length ? c.certifications.map((cert) => h('tr', { dataset: { provider: cert.provider } },
              h('td', {}, h('b', { text: cert.provider })),
              h('td', {}, h('span', { class: 'badge s-' + (cert.passed ? 'passed' : 'failed'), text: cert.passed ? 'passed' : 'failed' }),
                c.current ? h('span', { class: 'muted', text: cert.passed ? ' — failover may use it' : ' — failover skips it' }) : null),
              h('td', {}, when(cert.recorded_at)),
              h('td', {}, Object.keys(cert.report || {}).length ? h('details', {}, h('summary', { text: 'report' }), json(cert.report)) : h('span', { class: 'muted', text: '—' }))))
              : h('tr', {}, h('td', { colspan: 4, class: 'muted', text: 'No provider has been certified against this contract.' }))))))));
      results.replaceChildren(...cards);
    });
  }

  // ---------------------------------------------------------------- schedules

  const scheduleState = (s) => h('span', { class: 'badge s-' + (s.paused ? 'expired' : 'running'), text: s.paused ? 'paused' : 'active' });

  async function schedulesPage(seq, open) {
    document.title = 'Schedules · onceflow';
    const results = h('div', { id: 'schedules' });
    main.append(h('h1', { text: 'Schedules' }),
      h('p', { class: 'hint' }, 'Each tick of a schedule submits its job once, with the idempotency key ',
        h('code', { text: 'schedule:{name}:{tick time}' }), ', however many engines run. A tick missed for longer than its catch-up window is skipped and counted; ',
        'with overlap ', h('b', { text: 'skip' }), ' a tick whose previous job is still open is skipped.'),
      results);
    if ((who() || {}).role !== 'client') {
      results.append(h('p', { class: 'error', id: 'not-client', text: 'Schedules belong to an owner: sign in with a client token to see and pause them.' }));
      return;
    }
    const act = async (name, action) => {
      try {
        await api('POST', '/v1/schedules/' + encodeURIComponent(name) + '/' + action);
        flash('schedule ' + name + (action === 'pause' ? ' paused' : ' resumed'));
        await refresh();
      } catch (err) {
        flash(describe(err), true);
      }
    };
    const refresh = async () => {
      const list = await api('GET', '/v1/schedules');
      let events = null;
      if (open) events = await api('GET', '/v1/schedules/' + encodeURIComponent(open) + '/events?limit=50');
      if (seq !== routeSeq) return;
      const rows = list.schedules.map((s) => h('tr', { dataset: { schedule: s.name, paused: String(s.paused) } },
        h('td', {}, h('a', { href: '#/schedules/' + encodeURIComponent(s.name) }, h('b', { text: s.name }))),
        h('td', {}, h('code', { text: s.cron }), h('div', { class: 'muted', text: s.timezone })),
        h('td', {}, scheduleState(s)),
        h('td', {}, s.next_fire_at ? when(s.next_fire_at) : h('span', { class: 'muted', text: '—' })),
        h('td', {}, s.last_fired_at ? when(s.last_fired_at) : h('span', { class: 'muted', text: 'never' }),
          s.last_job_id ? h('div', {}, h('a', { href: '#/jobs/' + s.last_job_id, class: 'mono', text: short(s.last_job_id), title: s.last_job_id })) : null),
        h('td', { class: 'fired', text: String(s.fired_count) }),
        h('td', { class: 'skipped', text: s.skipped_overlap_count + ' overlap · ' + s.skipped_too_old_count + ' too old' }),
        h('td', { text: s.overlap + ' · ' + s.catchup_window_s + ' s' }),
        h('td', {}, h('button', { type: 'button', class: s.paused ? 'resume' : 'pause', text: s.paused ? 'Resume' : 'Pause',
          onclick: () => act(s.name, s.paused ? 'resume' : 'pause') }))));
      const table = h('table', { id: 'schedules-table' },
        h('thead', {}, h('tr', {}, ['Name', 'Cron', 'State', 'Next tick', 'Last fired', 'Fired', 'Skipped', 'Overlap · window', ''].map((t) => h('th', { text: t })))),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 9, class: 'muted', text: 'No schedules (create one with PUT /v1/schedules/{name}).' }))));
      const parts = [table];
      if (events) {
        parts.push(h('section', { class: 'card', id: 'schedule-events', dataset: { schedule: open } },
          h('h2', {}, 'History of ', h('b', { text: open })),
          h('table', {},
            h('thead', {}, h('tr', {}, ['At', 'Type', 'Tick', 'Job', 'Data'].map((t) => h('th', { text: t })))),
            h('tbody', {}, events.events.slice().reverse().map((e) => h('tr', { dataset: { type: e.type } },
              h('td', {}, when(e.at)),
              h('td', {}, h('span', { class: 'tag', text: e.type })),
              h('td', { text: e.tick_at ? localTime(e.tick_at) : '—' }),
              h('td', {}, e.job_id ? h('a', { href: '#/jobs/' + e.job_id, class: 'mono', text: short(e.job_id), title: e.job_id }) : '—'),
              h('td', { class: 'mono', text: Object.keys(e.data || {}).length ? JSON.stringify(e.data) : '' })))))));
      }
      results.replaceChildren(...parts);
    };
    await poll(seq, refresh);
  }

  // ---------------------------------------------------------------- start

  document.getElementById('signout').addEventListener('click', () => signOut());
  window.addEventListener('hashchange', route);
  route();
})();

// The Vend operators' console: plain JS over the agent's JSON API
// (docs/openapi.yaml). Every API call sends the operator token kept in
// sessionStorage. Live updates come from the agent's event stream (GET
// /v1/ops/stream, Server-Sent Events read with fetch() so the token goes in
// the Authorization header, never in the URL): the page updates in place
// from its events. While the stream is down the page polls every 2 s, the
// header says so, and the stream is retried with a backoff. The header's
// badge also says when the agent itself is cut off from its machines: the
// stream's hello and `agent` events carry its broker connection, and
// /healthz (every HEALTH_MS, and with each poll) its other reasons.
'use strict';

const POLL_MS = 2000;
const HEALTH_MS = 10000;
const ORDER_STATES = ['RESERVED', 'PAID', 'DISPATCHED', 'COMPLETED', 'EXPIRED', 'CANCELLED',
                      'FAILED', 'REFUNDED', 'NEEDS_REVIEW'];
const TOKEN_KEY = 'vend.operatorToken';

// ---- helpers ---------------------------------------------------------------

// el('td', {class: 'num'}, 'text', child): an element; text is never HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

function ago(ms) {
  if (!ms) return '—';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  return Math.floor(s / 3600) + ' h ago';
}

function when(ms) { return ms ? new Date(ms).toLocaleString() : '—'; }

function table(id, headers, rows) {
  return el('table', {id},
            el('thead', {}, el('tr', {}, headers.map((h) => el('th', {class: h.num ? 'num' : null},
                                                                  h.label || h)))),
            el('tbody', {}, rows));
}

function num(value, field) { return el('td', {class: 'num', 'data-field': field}, value ?? '—'); }

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// fetch + JSON + the operator token; an error answer throws ApiError with the
// agent's message.
async function api(path, options = {}) {
  const headers = {Authorization: 'Bearer ' + (sessionStorage.getItem(TOKEN_KEY) || '')};
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {method: options.method || 'GET', headers,
                                 body: options.body === undefined ? undefined
                                                                  : JSON.stringify(options.body)});
  const text = await res.text();
  if (!options.raw && res.ok) return text ? JSON.parse(text) : {};
  if (res.ok) return text;
  let code = 'http_' + res.status;
  let message = text;
  try {
    const e = JSON.parse(text).error;
    code = e.code;
    message = e.message;
  } catch (_) { /* not JSON */ }
  throw new ApiError(res.status, code, message);
}

// ---- login -----------------------------------------------------------------

function showLogin(error) {
  sessionStorage.removeItem(TOKEN_KEY);
  closeStream();
  stopPolling();
  $('nav').hidden = true;
  $('page').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = error || '';
  $('token').value = '';
  $('status').textContent = '';
  stopHealth();
  $('token').focus();
}

async function login(event) {
  event.preventDefault();
  const token = $('token').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await api('/v1/fleet/summary');  // small at any fleet size
  } catch (e) {
    showLogin(e.status === 401 ? 'Wrong operator token: the agent refused it (401 ' + e.code + ').'
                               : 'Cannot reach the agent: ' + e.message);
    return;
  }
  $('token').value = '';
  $('login').hidden = true;
  $('nav').hidden = false;
  $('page').hidden = false;
  if (!location.hash || location.hash === '#/') location.hash = '#/fleet';
  else route();
  openStream();
  startHealth();
}

// ---- live stream -----------------------------------------------------------

// up: the stream is open; broker: the agent's MQTT connection (null:
// unknown); reasons: /healthz's, when it answers 503.
const live = {up: false, controller: null, retryMs: 1000, retryTimer: null, events: 0,
              broker: null, reasons: [], why: '', healthTimer: null};

// The header's indicator; polling runs exactly while the stream is down.
function setLive(up, why) {
  live.up = up;
  live.why = why || '';
  renderLive();
  if (up) stopPolling();
  else startPolling();
}

// live (green) only when the stream is open and the agent hears its
// machines; the stream open but the broker down is said as such: the fleet
// shown is the agent's last word, not the machines' present.
function renderLive() {
  const ind = $('live');
  const brokerDown = live.broker === false;
  const others = live.reasons.filter((r) => r !== 'broker_down');
  let text;
  let state;
  if (live.up && !brokerDown) {
    text = 'live';
    state = 'live';
  } else if (live.up) {
    text = 'agent cut off: its MQTT broker is down, machine state is stale';
    state = 'broker-down';
  } else {
    text = 'polling every ' + POLL_MS / 1000 + ' s' + (live.why ? ': ' + live.why : '') +
           (brokerDown ? '; the agent\'s MQTT broker is down' : '');
    state = 'polling';
  }
  if (others.length) text += '; agent unhealthy: ' + others.join(', ');
  ind.textContent = text;
  ind.className = 'live ' + (state === 'live' && !others.length ? 'up' : 'down');
  ind.dataset.state = state;
  ind.dataset.broker = live.broker === null ? 'unknown' : live.broker ? 'up' : 'down';
}

// /healthz (public, small): the broker while the stream is down, and what
// else makes the agent answer 503 (storage failed, input saturated).
async function checkHealth() {
  try {
    const res = await fetch('/healthz', {cache: 'no-store'});
    const h = await res.json();
    live.reasons = h.reasons || [];
    if (!live.up) live.broker = h.mqtt_connected;
  } catch (e) {
    live.reasons = ['agent unreachable'];
  }
  renderLive();
}

function startHealth() {
  if (!live.healthTimer) live.healthTimer = setInterval(checkHealth, HEALTH_MS);
  checkHealth();
}

function stopHealth() {
  if (live.healthTimer) clearInterval(live.healthTimer);
  live.healthTimer = null;
}

function closeStream() {
  if (live.retryTimer) clearTimeout(live.retryTimer);
  live.retryTimer = null;
  if (live.controller) live.controller.abort();
  live.controller = null;
  live.up = false;
}

async function openStream() {
  closeStream();
  const controller = new AbortController();
  live.controller = controller;
  try {
    const res = await fetch('/v1/ops/stream', {
      headers: {Authorization: 'Bearer ' + (sessionStorage.getItem(TOKEN_KEY) || ''),
                Accept: 'text/event-stream'},
      signal: controller.signal, cache: 'no-store'});
    if (res.status === 401) return showLogin('The agent refused the token (401): log in again.');
    if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) throw new Error('the stream ended');
      buffer += decoder.decode(value, {stream: true});
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        onFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch (e) {
    if (controller.signal.aborted) return;  // closed on purpose
    setLive(false, 'event stream down (' + e.message + ')');
    live.retryTimer = setTimeout(openStream, live.retryMs);
    live.retryMs = Math.min(10000, live.retryMs * 2);
  }
}

// One SSE frame: "event:" and "data:" lines; comment lines (":") are heartbeats.
function onFrame(frame) {
  let event = 'message';
  const data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return;
  let msg;
  try { msg = JSON.parse(data.join('\n')); } catch (_) { return; }
  if (event === 'agent') {  // the agent's broker connection changed
    live.broker = msg.broker_connected;
    renderLive();
    if (msg.broker_connected) refresh();  // what came meanwhile
    return;
  }
  if (event === 'hello' || event === 'resync') {
    // Up (again), or events were lost: one fetch of the state, then events.
    live.retryMs = 1000;
    if (event === 'hello') {
      if (msg.broker_connected !== undefined) live.broker = msg.broker_connected;
      setLive(true);
    }
    refresh();
    return;
  }
  live.events += 1;
  if (event === 'orders' && msg.events.some((e) => e.to_state === 'NEEDS_REVIEW' ||
                                               e.from_state === 'NEEDS_REVIEW')) {
    later('review-count', refreshReviewCount, 500);
  }
  if (event === 'alert') later('review-count', refreshReviewCount, 500);
  if (!current) return;
  if (current.page.onEvent) current.page.onEvent(event, msg, current.arg);
  else later('page', refresh, POLL_MS);  // no in-place updates: one fetch per burst
  $('status').textContent = 'live update ' + new Date().toLocaleTimeString();
  $('status').classList.remove('stale');
}

// Runs fn once, `ms` after the first call for `key` (coalesces bursts). A
// failed fetch of fn is dropped: the next refresh or event tries again, and
// the status line already says when the agent cannot be reached.
const laters = new Map();
function later(key, fn, ms) {
  if (laters.has(key)) return;
  laters.set(key, setTimeout(() => {
    laters.delete(key);
    Promise.resolve(fn()).catch(() => {});
  }, ms));
}

// ---- pages -----------------------------------------------------------------
// A page: mount(root, arg) builds what stays (forms), update(arg) fetches and
// fills what changes: at mount, on each stream (re)start or resync, and every
// POLL_MS while the stream is down. onEvent(kind, msg, arg), if the page has
// it, applies one stream event in place; else an event refetches the page.
// tick(arg) every tickMs, stream or not (the per-minute plots).

const pages = {};
let current = null;
let pollTimer = null;
let tickTimer = null;

function stopPolling() {
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = null;
}

function startPolling() {
  if (!pollTimer) pollTimer = setInterval(refresh, POLL_MS);
}

async function refreshReviewCount() {
  const [review, {alerts}] = await Promise.all([api('/v1/orders?state=NEEDS_REVIEW&limit=1000'),
                                                api('/v1/alerts')]);
  $('review-count').textContent = review.orders.length ? String(review.orders.length) : '';
  $('alert-count').textContent = alerts.length ? String(alerts.length) : '';
}

// One refresh at a time; one asked for meanwhile runs once after it (a new
// page's first fetch, or events while the last fetch was out), so a slow
// agent skips poll ticks but no page is left without its data.
let refreshing = false;
let refreshAgain = false;

async function refresh() {
  if (!current) return;
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  const page = current;
  refreshing = true;
  try {
    await page.page.update(page.arg);
    await refreshReviewCount();
    if (!live.up) await checkHealth();  // polling: the broker too
    $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('status').classList.remove('stale');
  } catch (e) {
    if (current !== page) return;  // left the page meanwhile: its elements are gone
    if (e.status === 401) return showLogin('The agent refused the token (401): log in again.');
    $('status').textContent = 'update failed: ' + e.message;
    $('status').classList.add('stale');
  } finally {
    refreshing = false;
    if (refreshAgain) {
      refreshAgain = false;
      refresh();
    }
  }
}

function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) return showLogin('');
  const [, name = 'fleet', arg] = location.hash.split('/');
  const page = pages[name] || pages.fleet;
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + name);
  }
  const root = $('page');
  root.replaceChildren();
  current = {page, arg: arg ? decodeURIComponent(arg) : undefined};
  page.mount(root, current.arg);
  refresh();
  if (!live.up) startPolling();
  if (tickTimer) clearInterval(tickTimer);
  tickTimer = null;
  if (page.tick) {
    const mine = current;
    tickTimer = setInterval(() => {
      if (current === mine) page.tick(mine.arg).catch(() => {});
    }, page.tickMs);
  }
}

function message(id, text, isError) {
  const m = $(id);
  if (!m) return;
  m.textContent = text;
  m.className = isError ? 'error' : 'hint';
}

// ---- start -----------------------------------------------------------------

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', login);
  $('logout').addEventListener('click', () => showLogin('Logged out.'));
  if (sessionStorage.getItem(TOKEN_KEY)) {
    $('nav').hidden = false;
    $('page').hidden = false;
    $('login').hidden = true;
    route();
    openStream();
    startHealth();
  } else {
    showLogin('');
  }
});

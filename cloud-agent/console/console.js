// The Vend operators' console: plain JS over the agent's JSON API
// (docs/openapi.yaml). Every API call sends the operator token kept in
// sessionStorage; the current page refreshes its data every 2 s (polling:
// the agent has no event stream yet, docs/operations.md "Console").
'use strict';

const POLL_MS = 2000;
const ORDER_STATES = ['RESERVED', 'PAID', 'DISPATCHED', 'COMPLETED', 'EXPIRED', 'CANCELLED',
                      'FAILED', 'REFUNDED', 'NEEDS_REVIEW'];
const TOKEN_KEY = 'vend.operatorToken';
const BY_KEY = 'vend.operatorName';

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
  stopPolling();
  $('nav').hidden = true;
  $('page').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = error || '';
  $('token').value = '';
  $('status').textContent = '';
  $('token').focus();
}

async function login(event) {
  event.preventDefault();
  const token = $('token').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await api('/v1/devices');
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
}

// ---- pages -----------------------------------------------------------------
// A page: mount(root, arg) builds what stays (forms), update(arg) fetches and
// fills what changes; update runs every POLL_MS.

const pages = {};
let current = null;
let pollTimer = null;

function stopPolling() {
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = null;
}

let refreshing = false;  // one refresh at a time: a slow agent skips ticks

async function refresh() {
  if (!current || refreshing) return;
  const page = current;
  refreshing = true;
  try {
    await page.page.update(page.arg);
    const review = await api('/v1/orders?state=NEEDS_REVIEW&limit=1000');
    $('review-count').textContent = review.orders.length ? String(review.orders.length) : '';
    $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('status').classList.remove('stale');
  } catch (e) {
    if (current !== page) return;  // left the page meanwhile: its elements are gone
    if (e.status === 401) return showLogin('The agent refused the token (401): log in again.');
    $('status').textContent = 'update failed: ' + e.message;
    $('status').classList.add('stale');
  } finally {
    refreshing = false;
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
  stopPolling();
  refresh();
  pollTimer = setInterval(refresh, POLL_MS);
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
  } else {
    showLogin('');
  }
});

// The operators' console in a real browser: Debian's chromium, headless,
// driven by puppeteer-core, against a real mosquitto, a real vend-agent, a
// real vend-firmware machine and a vend-sim fleet selling live.
//
//   node console_test.mjs <build dir> <work dir> <dir of the pinned puppeteer-core>
//
// Checks: the agent's --ops-stream-* options reach its event stream (the
// hello's heartbeat and queue, a keep-alive each second, 503 beyond the
// cap); a wrong token is refused with a clear error; the fleet table shows
// every machine; with the event stream refused the console says it polls and
// the table's sold count grows by polling; once the stream is let through
// it says live and the sold count grows from stream events with no poll of
// the table's data; the plots render; the device page
// shows its slots; a NEEDS_REVIEW order (the firmware machine is frozen with
// SIGSTOP right after its payment, so its result never comes) is resolved
// from the review queue and settles COMPLETED. Screenshots go to
// <build dir>/console-screenshots/. Exit 0 on success, 1 with the reason.
import {spawn} from 'node:child_process';
import {createRequire} from 'node:module';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const [buildDir, work, toolDir] = process.argv.slice(2);
// tools/console-test/node_modules (ES modules ignore NODE_PATH).
const puppeteer = createRequire(path.join(toolDir, 'package.json'))('puppeteer-core');
const shots = path.join(buildDir, 'console-screenshots');
fs.mkdirSync(shots, {recursive: true});
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function start(name, argv, opts = {}) {
  const log = fs.openSync(path.join(work, name + '.log'), 'a');
  const child = spawn(argv[0], argv.slice(1), {stdio: ['ignore', log, log], cwd: opts.cwd || work});
  children.push(child);
  return child;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function eventually(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  throw new Error('timed out (' + timeoutMs + ' ms) waiting for ' + what + ' (last: ' + last + ')');
}

// Clicks `selector`. The fleet and device tables are rebuilt by live
// updates, so the element puppeteer found can be replaced before its click
// lands ("Node is detached from document"): then it is looked up again.
async function click(page, selector, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await page.click(selector);
    } catch (e) {
      if (!/detached|not clickable|No node found|not an Element/i.test(String(e.message)) ||
          Date.now() > end) {
        throw e;
      }
      await sleep(50);
    }
  }
}

// The payment gateway's refund endpoint: takes every refund (200), except
// the one of the review resolved "not dispensed" (payment pay-console-1),
// which it refuses for good (400): the agent gives that one up at once and
// raises refund_undeliverable.
const refundCalls = [];
const gateway = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    refundCalls.push(body);
    const refuse = body.includes('pay-console-1');
    res.writeHead(refuse ? 400 : 200, {'Content-Type': 'application/json'});
    res.end(refuse ? '{"error":"refused by the console test gateway"}' : '{"ok":true}');
  });
});
await new Promise((r) => gateway.listen(0, '127.0.0.1', r));
const refundUrl = 'http://127.0.0.1:' + gateway.address().port + '/refunds';

const mqttPort = await freePort();
const httpPort = await freePort();
const api = 'http://127.0.0.1:' + httpPort;
const broker = 'tcp://127.0.0.1:' + mqttPort;
let token = '';
let blockStream = true;
const requests = [];

async function call(method, p, body, headers = {}) {
  const h = {Authorization: 'Bearer ' + token, ...headers};
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(api + p, {method, headers: h, body});
  const text = await res.text();
  if (!res.ok) throw new Error(method + ' ' + p + ' -> ' + res.status + ' ' + text);
  return JSON.parse(text);
}

const MAX_STREAMS = 4;

// One event stream read by this script: resolves once its text holds `want`.
async function openStream(want) {
  const controller = new AbortController();
  const res = await fetch(api + '/v1/ops/stream', {headers: {Authorization: 'Bearer ' + token},
                                                   signal: controller.signal});
  const stream = {status: res.status, text: '', close: () => controller.abort()};
  if (res.status !== 200) {
    stream.text = await res.text();
    return stream;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  stream.until = async (what, timeoutMs) => {
    const end = Date.now() + timeoutMs;
    while (!stream.text.includes(what)) {
      if (Date.now() > end) throw new Error('stream: no ' + JSON.stringify(what) + ' in ' + stream.text);
      const {value, done} = await reader.read();
      if (done) throw new Error('stream ended: ' + stream.text);
      stream.text += decoder.decode(value, {stream: true});
    }
  };
  await stream.until(want, 5000);
  return stream;
}

// vend-agent's --ops-stream-* options reach the event stream: the hello
// says the heartbeat and queue, a keep-alive comes every second, and the
// stream beyond the cap is refused with 503.
async function checkStreamOptions() {
  const open = [];
  for (let i = 0; i < MAX_STREAMS; ++i) open.push(await openStream('event: hello'));
  for (const st of open) {
    if (!/"heartbeat_ms":1000,"queue_events":512,"broker_connected":true/.test(st.text)) {
      throw new Error('hello without the options: ' + st.text);
    }
  }
  const more = await openStream('');
  if (more.status !== 503 || !/at most 4/.test(more.text)) {
    throw new Error('stream beyond the cap: ' + more.status + ' ' + more.text);
  }
  const t0 = Date.now();
  await open[0].until(': keep-alive', 3000);
  console.log('console browser test: stream options ok (keep-alive after ' + (Date.now() - t0) +
              ' ms, stream ' + (MAX_STREAMS + 1) + ' refused 503)');
  for (const st of open) st.close();
  await eventually('the streams closed', async () => {
    const m = await (await fetch(api + '/metrics')).text();
    return /vend_ops_stream_subscribers 0/.test(m);
  }, 10000);
}

let brokerProcess = null;
function startBroker() {
  brokerProcess = start('mosquitto', ['mosquitto', '-c', path.join(work, 'mosquitto.conf')]);
}

async function main() {
  fs.writeFileSync(path.join(work, 'mosquitto.conf'),
                   `listener ${mqttPort} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
  startBroker();
  start('vend-agent', [path.join(buildDir, 'cloud-agent/vend-agent'), '--http',
                       '127.0.0.1:' + httpPort, '--mqtt', broker, '--db',
                       path.join(work, 'agent.db'), '--operator-token-file',
                       path.join(work, 'operator.token'), '--gateway-secret-file',
                       path.join(work, 'gateway.secret'), '--dispatch-ttl-s', '5',
                       '--review-after-s', '60', '--refund-url', refundUrl,
                       '--ops-stream-max-subscribers', String(MAX_STREAMS),
                       '--ops-stream-heartbeat-ms', '1000', '--ops-stream-queue-events', '512',
                       '--log-level', 'info']);
  await eventually('the agent connected to the broker', async () => {
    const h = await (await fetch(api + '/healthz')).json();
    return h.mqtt_connected === true;
  }, 15000);
  token = fs.readFileSync(path.join(work, 'operator.token'), 'utf8').trim();
  const secret = fs.readFileSync(path.join(work, 'gateway.secret'), 'utf8').trim();
  await checkStreamOptions();

  // The machine that will stop answering: a real vend-firmware.
  const dev = await call('POST', '/v1/devices', JSON.stringify(
      {id: 'vm-frozen', slots: [{slot: 1, product: 'cola', price_cents: 150, capacity: 10}]}));
  fs.writeFileSync(path.join(work, 'device.key'), dev.key + '\n', {mode: 0o600});
  fs.writeFileSync(path.join(work, 'device.json'), JSON.stringify({
    device_id: 'vm-frozen', key_file: 'device.key', broker_url: broker, ledger_path: 'ledger.db',
    slots: [{slot: 1, capacity: 10, product: 'cola'}], sim: {motor_run_ms: 200},
    core: {reconnect_jitter_max_ms: 0, auto_confirm_restock: true}}));
  const firmware = start('vend-firmware', [path.join(buildDir, 'firmware/vend-firmware'),
                                           '--config', path.join(work, 'device.json')]);
  await eventually('vm-frozen online', async () =>
    (await call('GET', '/v1/devices')).devices.some((d) => d.id === 'vm-frozen' && d.online),
  15000);
  await call('POST', '/v1/devices/vm-frozen/restock', JSON.stringify({slot: 1, count: 3}));
  await eventually('vm-frozen stocked', async () =>
    (await call('GET', '/v1/devices/vm-frozen/slots')).slots[0].pool === 3, 15000);

  // The live fleet: 3 simulated machines selling for 40 s.
  start('vend-sim', [path.join(buildDir, 'simulator/vend-sim'), '--mqtt', broker,
                                 '--agent', api, '--operator-token', token, '--gateway-secret',
                                 secret, '--machines', '3', '--slots', '3', '--capacity', '30',
                                 '--customers', '2', '--rate', '2', '--duration', '40',
                                 '--jam-rate', '0', '--no-progress', '--seed', '7']);

  const browser = await puppeteer.launch({
    executablePath: process.env.VEND_CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 800});
    // The event stream is refused until blockStream is cleared; every
    // request's URL is noted (the live check asserts on them).
    await page.setRequestInterception(true);
    page.on('request', (r) => {
      if (r.url().includes('/v1/ops/stream') && blockStream) return r.abort('connectionrefused');
      requests.push(r.url());
      return r.continue();
    });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const consoleLines = [];  // diagnostics only: the wrong token's 401 is one
    page.on('console', (m) => consoleLines.push(m.type() + ': ' + m.text()));
    try {
      await drive(page, errors, firmware, secret);
    } catch (e) {
      const status = await page.$eval('#status', (s) => s.textContent).catch(() => '?');
      await page.screenshot({path: path.join(shots, 'console-failure.png'), fullPage: true})
          .catch(() => {});
      throw new Error(e.stack + '\n  page status: ' + status + '\n  page errors: ' +
                      errors.join('; ') + '\n  page console: ' + consoleLines.join('; ') + '\n  page at failure: ' + path.join(shots,
                                                                            'console-failure.png'));
    }
  } finally {
    await browser.close();
  }
}

async function drive(page, errors, firmware, secret) {
  {

    // Log in: a wrong token first.
    await page.goto(api + '/console/', {waitUntil: 'load'});
    await page.type('#token', 'not-the-token');
    await click(page, '#login-form button');
    await page.waitForFunction(() => /Wrong operator token/.test(
        document.getElementById('login-error').textContent), {timeout: 10000});
    await page.type('#token', token);
    await click(page, '#login-form button');
    await page.waitForSelector('#fleet-table', {timeout: 10000});

    // The fleet table shows the four machines. The event stream is refused
    // at first (intercepted): the header says "polling" and the table is
    // polled; then the stream is let through and the console goes live.
    const machines = () => page.$$eval('#fleet-table tbody tr', (rows) =>
      rows.map((r) => r.dataset.device));
    await eventually('4 machines in the fleet table', async () => (await machines()).length === 4,
                     20000);
    // Stock per slot: vm-frozen's one slot holds 3 of 10.
    await eventually('vm-frozen stock per slot 3/10', async () => (await page.$eval(
        '#fleet-table tr[data-device="vm-frozen"] td[data-field=stock]',
        (td) => td.dataset.stock + ':' + td.querySelectorAll('rect').length)) === '3/10:1', 10000);
    await page.waitForFunction(() => document.getElementById('live').dataset.state === 'polling',
                               {timeout: 10000});
    const liveText = await page.$eval('#live', (e) => e.textContent);
    if (!/polling every 2 s/.test(liveText)) throw new Error('indicator says ' + liveText);
    const soldTotal = () => page.$$eval('#fleet-table td[data-field=sold]',
      (cells) => cells.reduce((n, c) => n + Number(c.textContent), 0));
    const polled = await soldTotal();
    await eventually('the sold count to grow by polling', async () => (await soldTotal()) > polled,
                     30000);
    blockStream = false;
    await page.waitForFunction(() => document.getElementById('live').dataset.state === 'live',
                               {timeout: 25000});  // the retry backoff is at most 10 s
    await sleep(500);  // the one fetch after the stream's hello

    // Live: the table moves from stream events alone, with no poll of the
    // table's data (only the summary counts and the per-minute series may be
    // fetched meanwhile), faster than the 2 s poll would.
    requests.length = 0;
    const sold0 = await soldTotal();
    const t0 = Date.now();
    await eventually('the sold count to grow from the stream', async () =>
      (await soldTotal()) > sold0 + 2, 30000);
    const polls = requests.filter((u) => /\/v1\/(fleet\?|devices|orders|reconcile)/.test(u));
    if (polls.length) throw new Error('the table was polled while live: ' + polls.join(', '));
    const state = await page.$eval('#live', (e) => e.dataset.state);
    if (state !== 'live') throw new Error('the stream dropped meanwhile: ' + state);
    console.log('console browser test: +' + ((await soldTotal()) - sold0) + ' sold in ' +
                (Date.now() - t0) + ' ms from the stream, ' + requests.length +
                ' other requests (' + [...new Set(requests.map((u) => new URL(u).pathname))]
                    .join(', ') + ')');
    await page.screenshot({path: path.join(shots, 'console-fleet.png'), fullPage: true});

    // The plots: orders and sales, latency percentiles, availability.
    await click(page, 'nav a[href="#/plots"]');
    await page.waitForSelector('#orders-plot rect[data-series=sales]', {timeout: 10000});
    await page.waitForSelector('#latency-plot [data-series=P99]', {timeout: 10000});
    await eventually('availability of 4 machines', async () =>
      (await page.$$('#availability-plot rect')).length === 4, 10000);
    await page.screenshot({path: path.join(shots, 'console-plots.png'), fullPage: true});
    await click(page, 'nav a[href="#/fleet"]');
    await page.waitForSelector('#fleet-table tbody tr', {timeout: 10000});

    // Restock from vm-frozen's page: the machine confirms, and the slot's
    // pool moves in place from the stream's device event (3 -> 5).
    await click(page, '#fleet-table tr[data-device="vm-frozen"] a');
    await page.waitForSelector('#slots-table tbody tr', {timeout: 10000});
    await page.$eval('#restock-count', (e) => { e.value = '2'; });
    await click(page, '#restock-form button');
    await page.waitForFunction(() => /restock .* sent: slot 1 \+2/.test(
        document.getElementById('device-msg').textContent), {timeout: 10000});
    await page.waitForFunction(() => document.querySelector(
        '#slots-table tr[data-slot="1"] td[data-field=pool]')?.textContent === '5',
    {timeout: 20000});
    await click(page, 'nav a[href="#/fleet"]');
    await page.waitForSelector('#fleet-table tbody tr', {timeout: 10000});

    // The orders that will need review: paid, dispatched to a frozen machine.
    const orders = [];
    for (const n of [1, 2]) {
      orders.push(await call('POST', '/v1/orders',
                             JSON.stringify({device: 'vm-frozen', slot: 1}),
                             {'Idempotency-Key': 'console-test-' + n}));
    }
    firmware.kill('SIGSTOP');
    for (const [n, order] of orders.entries()) {
      const body = JSON.stringify({payment_id: 'pay-console-' + n, amount_cents: 150});
      const t = Math.floor(Date.now() / 1000);
      const sig = crypto.createHmac('sha256', secret).update(`${t}.${order.id}.${body}`)
                      .digest('hex');
      const paid = await call('POST', '/v1/orders/' + order.id + '/payment', body,
                              {'Vend-Signature': `t=${t},v1=${sig}`});
      if (paid.state !== 'DISPATCHED') throw new Error('payment gave ' + JSON.stringify(paid));
    }
    const [kept, refunded] = orders.map((o) => o.id);

    // The device page of a sim machine.
    const simMachine = (await machines()).find((id) => id !== 'vm-frozen');
    requests.length = 0;
    await click(page, `#fleet-table tr[data-device="${simMachine}"] a`);
    await page.waitForSelector('#slots-table tbody tr', {timeout: 10000});
    await page.waitForSelector('#device-orders tbody tr', {timeout: 10000});
    await page.waitForSelector('#faults-none, #faults-table', {timeout: 10000});
    const slotRows = await page.$$eval('#slots-table tbody tr', (rows) => rows.length);
    if (slotRows !== 3) throw new Error('device page shows ' + slotRows + ' slots, not 3');
    const others = await page.$$eval('#device-orders td:nth-child(2)',
                                      (cells) => cells.map((c) => c.textContent));
    if (others.some((d) => d !== simMachine)) {
      throw new Error('device page lists orders of ' + [...new Set(others)].join(', '));
    }
    await click(page, '#reconcile-now');
    await page.waitForFunction(() => /reconciliation .* requested/.test(
        document.getElementById('device-msg').textContent), {timeout: 10000});
    await page.waitForSelector('#report-verdict', {timeout: 30000});
    // Per-device reads only: nothing of the whole fleet is downloaded.
    const paths = requests.map((u) => new URL(u)).map((u) => u.pathname + u.search);
    const fleetWide = paths.filter((p) => p === '/v1/devices' || /^\/v1\/orders\?limit=/.test(p));
    if (fleetWide.length) throw new Error('the device page fetched ' + fleetWide.join(', '));
    for (const want of ['/v1/devices/' + simMachine, '/v1/orders?device=' + simMachine,
                        '/v1/devices/' + simMachine + '/faults']) {
      if (!paths.some((p) => p.startsWith(want))) {
        throw new Error('the device page did not ask for ' + want + ': ' + paths.join(', '));
      }
    }
    await page.screenshot({path: path.join(shots, 'console-device.png'), fullPage: true});

    // Order search, by the agent: a machine's orders, then one order by id.
    await click(page, 'nav a[href="#/orders"]');
    // The device page shows an #orders-table too: wait for this page's own box first.
    await page.waitForSelector('#orders-search', {timeout: 10000});
    await page.waitForSelector('#orders #orders-table', {timeout: 10000});
    await page.type('#orders-search', 'vm-frozen');
    const shownOrders = () => page.$$eval('#orders-table tbody tr',
                                          (rows) => rows.map((r) => r.dataset.order).sort());
    await eventually('the two orders of vm-frozen', async () =>
      JSON.stringify(await shownOrders()) === JSON.stringify([kept, refunded].sort()), 10000);
    await page.$eval('#orders-search', (e) => { e.value = ''; });
    await page.type('#orders-search', kept);
    await eventually('order ' + kept + ' alone', async () =>
      JSON.stringify(await shownOrders()) === JSON.stringify([kept]), 10000);
    if (!requests.some((u) => u.includes('/v1/orders?device=vm-frozen'))) {
      throw new Error('the order search did not ask the agent for vm-frozen\'s orders');
    }

    // The broker stops: the agent is cut off from its machines, and the
    // header says so (the stream itself is still up); back, it says live.
    await click(page, 'nav a[href="#/fleet"]');
    await page.waitForSelector('#fleet-table tbody tr', {timeout: 10000});
    brokerProcess.kill('SIGTERM');
    await page.waitForFunction(() => document.getElementById('live').dataset.state ===
                                     'broker-down', {timeout: 15000});
    const cutOff = await page.$eval('#live', (e) => e.textContent);
    if (!/MQTT broker is down/.test(cutOff)) throw new Error('indicator says ' + cutOff);
    await page.screenshot({path: path.join(shots, 'console-broker-down.png')});
    await sleep(1000);
    startBroker();
    await page.waitForFunction(() => document.getElementById('live').dataset.state === 'live',
                               {timeout: 45000});  // the agent's reconnect backs off to 30 s

    // The review queue: both orders show up (about 65 s after dispatch); one
    // came out of the machine, the other did not (refund).
    await page.goto(api + '/console/#/review', {waitUntil: 'load'});
    const row = (id) => `#review-table tr[data-order="${id}"]`;
    await page.waitForSelector(row(kept), {timeout: 120000});
    await page.waitForSelector(row(refunded), {timeout: 10000});
    await page.type(row(kept) + ' .resolve-note', 'checked the tray: the can came out');
    await page.screenshot({path: path.join(shots, 'console-review.png'), fullPage: true});
    await click(page, row(kept) + ' .resolve-dispensed');
    await page.type(row(refunded) + ' .resolve-note', 'tray empty: refund');
    await click(page, row(refunded) + ' .resolve-not-dispensed');
    const settledHere = (id, state) => page.waitForFunction((i, s) =>
      [...document.querySelectorAll('#review-done li')].some(
          (li) => li.dataset.order === i && li.textContent.includes(s)),
    {timeout: 10000}, id, state);
    await settledHere(kept, 'COMPLETED');
    await settledHere(refunded, 'REFUNDED');

    // The order's page: its detail and full state history, who decided.
    await page.goto(api + '/console/#/order/' + kept, {waitUntil: 'load'});
    await page.waitForFunction(() => document.querySelector('#order-detail td[data-field=state]')
        ?.textContent === 'COMPLETED', {timeout: 10000});
    await page.waitForSelector('#history-table tr[data-to=COMPLETED]', {timeout: 10000});
    const history = await page.$$eval('#history-table tbody tr', (rows) =>
      rows.map((r) => r.dataset.to));
    const wanted = ['RESERVED', 'PAID', 'DISPATCHED', 'NEEDS_REVIEW', 'COMPLETED'];
    if (JSON.stringify(history) !== JSON.stringify(wanted)) {
      throw new Error('history shows ' + history.join(' -> '));
    }
    const decided = await page.$eval('#history-table tr[data-to=COMPLETED] td[data-field=detail]',
                                     (td) => td.textContent);
    if (!/by operator-token/.test(decided) || !/the can came out/.test(decided)) {
      throw new Error('the resolution\'s history says ' + decided);
    }
    await page.screenshot({path: path.join(shots, 'console-order.png'), fullPage: true});
    const settled = await call('GET', '/v1/orders/' + kept);
    if (settled.state !== 'COMPLETED') throw new Error('order is ' + settled.state);

    // Its refund: delivered to the gateway, refused for good: GAVE_UP.
    await click(page, 'nav a[href="#/refunds"]');
    const refundRow = `#refunds-table tr[data-order="${refunded}"]`;
    await page.waitForFunction((sel) => document.querySelector(sel + ' td[data-field=state]')
        ?.textContent === 'GAVE_UP', {timeout: 20000}, refundRow);
    const lastError = await page.$eval(refundRow + ' td[data-field=last_error]',
                                       (td) => td.textContent);
    if (!/400/.test(lastError)) throw new Error('refund last error: ' + lastError);
    const refundMachine = await page.$eval(refundRow + ' td[data-field=device]',
                                           (td) => td.textContent);
    if (refundMachine !== 'vm-frozen') throw new Error('refund machine: ' + refundMachine);
    if (!refundCalls.some((b) => b.includes(refunded))) {
      throw new Error('the gateway got no refund of ' + refunded);
    }
    await page.screenshot({path: path.join(shots, 'console-refunds.png'), fullPage: true});

    // The alert the gave-up refund raised, with its machine.
    await click(page, 'nav a[href="#/alerts"]');
    const alertRow = '#alerts-table tr[data-alert="vm-frozen/1/refund_undeliverable"]';
    await page.waitForSelector(alertRow, {timeout: 10000});
    const count = await page.$eval('#alert-count', (e) => Number(e.textContent));
    if (count < 1) throw new Error('the alerts badge says ' + count);
    await page.screenshot({path: path.join(shots, 'console-alerts.png'), fullPage: true});
    if (errors.length) throw new Error('page errors: ' + errors.join('; '));
  }
}

let rc = 0;
try {
  await main();
  console.log('console browser test: ok; screenshots in ' + shots);
} catch (e) {
  console.error('console browser test FAILED: ' + (e.stack || e) + '\nlogs in ' + work);
  rc = 1;
}
for (const c of children.reverse()) {
  try {
    c.kill('SIGCONT');
    c.kill('SIGTERM');
  } catch (_) { /* gone */ }
}
gateway.close();
await sleep(500);
process.exit(rc);

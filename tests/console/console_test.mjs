// The operators' console in a real browser: Debian's chromium, headless,
// driven by puppeteer-core, against a real mosquitto, a real vend-agent, a
// real vend-firmware machine and a vend-sim fleet selling live.
//
//   node console_test.mjs <build dir> <work dir> <dir of the pinned puppeteer-core>
//
// Checks: a wrong token is refused with a clear error; the fleet table shows
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

async function main() {
  fs.writeFileSync(path.join(work, 'mosquitto.conf'),
                   `listener ${mqttPort} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
  start('mosquitto', ['mosquitto', '-c', path.join(work, 'mosquitto.conf')]);
  start('vend-agent', [path.join(buildDir, 'cloud-agent/vend-agent'), '--http',
                       '127.0.0.1:' + httpPort, '--mqtt', broker, '--db',
                       path.join(work, 'agent.db'), '--operator-token-file',
                       path.join(work, 'operator.token'), '--gateway-secret-file',
                       path.join(work, 'gateway.secret'), '--dispatch-ttl-s', '5',
                       '--review-after-s', '60', '--log-level', 'info']);
  await eventually('the agent connected to the broker', async () => {
    const h = await (await fetch(api + '/healthz')).json();
    return h.mqtt_connected === true;
  }, 15000);
  token = fs.readFileSync(path.join(work, 'operator.token'), 'utf8').trim();
  const secret = fs.readFileSync(path.join(work, 'gateway.secret'), 'utf8').trim();

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
  start('vend-sim', [path.join(buildDir, 'simulator/vend-sim'), '--broker', broker,
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
      throw new Error(e.message + '\n  page status: ' + status + '\n  page errors: ' +
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
    await page.click('#login-form button');
    await page.waitForFunction(() => /Wrong operator token/.test(
        document.getElementById('login-error').textContent), {timeout: 10000});
    await page.type('#token', token);
    await page.click('#login-form button');
    await page.waitForSelector('#fleet-table', {timeout: 10000});

    // The fleet table shows the four machines. The event stream is refused
    // at first (intercepted): the header says "polling" and the table is
    // polled; then the stream is let through and the console goes live.
    const machines = () => page.$$eval('#fleet-table tbody tr', (rows) =>
      rows.map((r) => r.dataset.device));
    await eventually('4 machines in the fleet table', async () => (await machines()).length === 4,
                     20000);
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
    await page.click('nav a[href="#/plots"]');
    await page.waitForSelector('#orders-plot rect[data-series=sales]', {timeout: 10000});
    await page.waitForSelector('#latency-plot [data-series=P99]', {timeout: 10000});
    await eventually('availability of 4 machines', async () =>
      (await page.$$('#availability-plot rect')).length === 4, 10000);
    await page.screenshot({path: path.join(shots, 'console-plots.png'), fullPage: true});
    await page.click('nav a[href="#/fleet"]');
    await page.waitForSelector('#fleet-table tbody tr', {timeout: 10000});

    // The order that will need review: paid, dispatched to a frozen machine.
    const order = await call('POST', '/v1/orders', JSON.stringify({device: 'vm-frozen', slot: 1}),
                             {'Idempotency-Key': 'console-test-1'});
    firmware.kill('SIGSTOP');
    const body = JSON.stringify({payment_id: 'pay-console-1', amount_cents: 150});
    const t = Math.floor(Date.now() / 1000);
    const sig = crypto.createHmac('sha256', secret).update(`${t}.${order.id}.${body}`)
                    .digest('hex');
    const paid = await call('POST', '/v1/orders/' + order.id + '/payment', body,
                            {'Vend-Signature': `t=${t},v1=${sig}`});
    if (paid.state !== 'DISPATCHED') throw new Error('payment gave ' + JSON.stringify(paid));

    // The device page of a sim machine.
    const simMachine = (await machines()).find((id) => id !== 'vm-frozen');
    await page.click(`#fleet-table tr[data-device="${simMachine}"] a`);
    await page.waitForSelector('#slots-table tbody tr', {timeout: 10000});
    const slotRows = await page.$$eval('#slots-table tbody tr', (rows) => rows.length);
    if (slotRows !== 3) throw new Error('device page shows ' + slotRows + ' slots, not 3');
    await page.click('#reconcile-now');
    await page.waitForFunction(() => /reconciliation .* requested/.test(
        document.getElementById('device-msg').textContent), {timeout: 10000});
    await page.waitForSelector('#report-verdict', {timeout: 30000});
    await page.screenshot({path: path.join(shots, 'console-device.png'), fullPage: true});

    // The review queue: the order shows up (about 65 s after dispatch), is resolved.
    await page.goto(api + '/console/#/review', {waitUntil: 'load'});
    const row = `#review-table tr[data-order="${order.id}"]`;
    await page.waitForSelector(row, {timeout: 120000});
    await page.type(row + ' .resolve-by', 'console-test');
    await page.type(row + ' .resolve-note', 'checked the tray: the can came out');
    await page.click(row + ' .resolve-dispensed');
    await page.waitForFunction((id) => [...document.querySelectorAll('#review-done li')].some(
        (li) => li.dataset.order === id && /COMPLETED/.test(li.textContent)),
    {timeout: 10000}, order.id);
    await page.goto(api + '/console/#/order/' + order.id, {waitUntil: 'load'});
    await page.waitForFunction(() => document.querySelector('#order-detail td[data-field=state]')
        ?.textContent === 'COMPLETED', {timeout: 10000});
    const settled = await call('GET', '/v1/orders/' + order.id);
    if (settled.state !== 'COMPLETED') throw new Error('order is ' + settled.state);
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
await sleep(500);
process.exit(rc);

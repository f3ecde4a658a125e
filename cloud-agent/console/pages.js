// The console's pages (console.js routes to them): fleet, machine, orders,
// order, needs review, refunds, alerts (plots.js: plots). Each is
// {mount(root, arg), update(arg)} and maybe onEvent and tick (console.js
// "pages"): mount builds what stays (forms), update fetches and fills what
// changes, onEvent applies one stream event in place.
'use strict';

// ---- fleet -----------------------------------------------------------------
// One page of the fleet table at a time, filtered by the agent (GET
// /v1/fleet): usable with thousands of machines. Rows change in place from
// the stream's device events; the cards from fleet events (and the counts
// only the agent can compute, at most every 10 s while events come).

function sum(slots, field) { return slots.reduce((n, s) => n + (s[field] || 0), 0); }

const FLEET_FILTERS = [['all', 'all machines'], ['online', 'online'], ['offline', 'offline'],
                       ['out_of_stock', 'out of stock'], ['mismatch', 'reconcile mismatch'],
                       ['backlog', 'outbox backlog']];

// A /v1/fleet row from a device event (vend/ops.hpp DeviceStatus).
function fleetRowOf(st) {
  const slots = st.slots || [];
  return {id: st.device, online: st.online, last_seen_ms: st.last_seen_ms,
          clock_skew_ms: st.clock_skew_ms ?? null, slots: slots.length,
          empty_slots: slots.filter((x) => x.pool === 0).length, pool: sum(slots, 'pool'),
          in_flight: sum(slots, 'reserved') + sum(slots, 'dispatched'), sold: sum(slots, 'sold'),
          burned: sum(slots, 'burned'), outbox_depth: st.outbox_depth,
          last_verdict: st.last_verdict,
          stock: slots.map((x) => ({slot: x.slot, pool: x.pool, capacity: x.capacity}))};
}

// Stock per slot: one bar per slot, its height the pool's share of the
// capacity (red: empty); the cell's text and title say "pool/capacity".
function stockCell(stock) {
  const w = 120;
  const h = 18;
  const bw = Math.max(1, Math.min(10, w / Math.max(1, stock.length)));
  const bars = svg('svg', {class: 'stock', width: bw * stock.length, height: h,
                           viewBox: `0 0 ${bw * stock.length} ${h}`});
  stock.forEach((x, i) => {
    const share = x.capacity > 0 ? Math.min(1, x.pool / x.capacity) : 0;
    const bh = x.pool === 0 ? 2 : Math.max(2, share * h);
    bars.append(svg('rect', {x: i * bw, y: h - bh, width: Math.max(1, bw - 1), height: bh,
                             fill: x.pool === 0 ? '#b42318' : share < 0.25 ? '#b54708'
                                                                              : '#067647'},
                    svg('title', {}, 'slot ' + x.slot + ': ' + x.pool + '/' + x.capacity)));
  });
  const text = stock.map((x) => x.pool + '/' + x.capacity).join(' ');
  // A few slots: their pools in figures too.
  const figures = stock.length <= 6 ? el('span', {class: 'hint'},
                                         ' ' + stock.map((x) => x.pool).join(' · ')) : null;
  return el('td', {'data-field': 'stock', 'data-stock': text, title: text}, bars, figures);
}

function fleetRow(d) {
  return el('tr', {'data-device': d.id},
            el('td', {}, el('a', {href: '#/device/' + encodeURIComponent(d.id)}, d.id)),
            el('td', {class: d.online ? 'online' : 'offline', 'data-field': 'online'},
               d.online ? 'online' : 'offline'),
            el('td', {'data-field': 'last_seen'}, ago(d.last_seen_ms)),
            num(d.clock_skew_ms, 'clock_skew_ms'), num(d.slots, 'slots'),
            num(d.empty_slots, 'empty_slots'), stockCell(d.stock || []), num(d.pool, 'pool'),
            num(d.in_flight, 'in_flight'), num(d.sold, 'sold'), num(d.burned, 'burned'),
            num(d.outbox_depth, 'outbox_depth'),
            el('td', {'data-field': 'verdict', class: d.last_verdict === 'alert' ? 'error' : null},
               d.last_verdict || 'no report yet'));
}

const FLEET_HEADERS = ['Machine', 'Status', 'Last seen', {label: 'Clock skew ms', num: 1},
  {label: 'Slots', num: 1}, {label: 'Empty slots', num: 1}, 'Stock per slot',
  {label: 'Pool', num: 1},
  {label: 'Reserved + dispatched', num: 1}, {label: 'Sold', num: 1}, {label: 'Burned', num: 1},
  {label: 'Outbox', num: 1}, 'Reconcile'];

pages.fleet = {
  tickMs: 30000,
  mount(root) {
    this.query = {offset: 0, limit: 50, filter: 'all', q: ''};
    this.summary = {};
    this.series = null;
    const filter = el('select', {id: 'fleet-filter', onchange: (e) => {
      this.query.filter = e.target.value;
      this.query.offset = 0;
      refresh();
    }}, FLEET_FILTERS.map(([v, label]) => el('option', {value: v}, label)));
    const search = el('input', {id: 'fleet-search', placeholder: 'machine id contains',
                                oninput: (e) => {
                                  this.query.q = e.target.value.trim();
                                  this.query.offset = 0;
                                  refresh();
                                }});
    const move = (step) => () => {
      this.query.offset = Math.max(0, this.query.offset + step * this.query.limit);
      refresh();
    };
    root.append(el('h2', {}, 'Fleet'), el('div', {class: 'cards', id: 'fleet-cards'}),
                el('h3', {}, 'Orders and sales per minute (last 60 minutes)'),
                el('div', {id: 'fleet-chart'}),
                el('h3', {}, 'Machines'),
                el('div', {class: 'pager'}, 'Show ', filter, ' ', search,
                   el('button', {type: 'button', id: 'fleet-prev', onclick: move(-1)}, '‹ prev'),
                   el('span', {id: 'fleet-page', class: 'hint'}),
                   el('button', {type: 'button', id: 'fleet-next', onclick: move(1)}, 'next ›')),
                el('div', {id: 'fleet'}));
  },
  async update() {
    const q = this.query;
    const query = '?offset=' + q.offset + '&limit=' + q.limit + '&filter=' + q.filter +
                  (q.q ? '&q=' + encodeURIComponent(q.q) : '');
    const fleet = await api('/v1/fleet' + query);
    $('fleet').replaceChildren(table('fleet-table', FLEET_HEADERS, fleet.devices.map(fleetRow)));
    const last = Math.min(fleet.total, q.offset + fleet.devices.length);
    $('fleet-page').textContent = fleet.total ? (q.offset + 1) + '–' + last + ' of ' + fleet.total
                                              : 'no machine matches';
    $('fleet-prev').disabled = q.offset === 0;
    $('fleet-next').disabled = last >= fleet.total;
    this.summary = fleet.summary;
    this.cards();
    // The series too, unless fetched while live (events kept it current)
    // less than 10 s ago: while polling no event adds to it.
    if (!this.series || !this.seriesLive || !live.up || Date.now() - this.seriesAt > 10000) {
      await this.tick();
    }
  },
  async tick() {
    const wasLive = live.up;
    this.series = await api('/v1/ops/series');
    this.seriesAt = Date.now();
    this.seriesLive = wasLive;
    this.chart();
  },
  cards() {
    const s = this.summary;
    $('fleet-cards').replaceChildren(
        card('Machines', s.devices, 'cards-devices'), card('Online', s.online, 'cards-online'),
        card('Offline', s.offline, 'cards-offline'),
        card('Out of stock', s.out_of_stock, 'cards-out-of-stock'),
        card('Reconcile mismatches', s.mismatches, 'cards-mismatches'),
        card('Outbox backlog', s.outbox_total, 'cards-outbox'));
  },
  chart() {
    const minutes = this.series.minutes;
    drawBarsSvg($('fleet-chart'), 'orders-chart', minutes.map((m) => m.start_ms),
                [{name: 'orders', values: minutes.map((m) => m.orders)},
                 {name: 'sales', values: minutes.map((m) => m.sales)}]);
  },
  onEvent(kind, msg) {
    if (kind === 'device') {
      const row = document.querySelector(`#fleet-table tr[data-device="${CSS.escape(msg.device)}"]`);
      if (row) {
        const fresh = fleetRow(fleetRowOf(msg));
        fresh.classList.add('flash');
        row.replaceWith(fresh);
        setTimeout(() => fresh.classList.remove('flash'), 600);
      }
      later('fleet-summary', () => this.refreshSummary(), 10000);
    } else if (kind === 'fleet') {
      Object.assign(this.summary, {devices: msg.devices, online: msg.online,
                                   offline: msg.devices - msg.online});
      this.cards();
    } else if (kind === 'orders' && this.series) {
      for (const e of msg.events) addToSeries(this.series, e);
      this.chart();
    }
  },
  // Its fetch may end on another page (the console test met that under
  // ASan: a TypeError from cards()), so the page is checked again after it.
  async refreshSummary() {
    if (current?.page !== this || !live.up) return;
    const summary = await api('/v1/fleet/summary');
    if (current?.page !== this) return;
    this.summary = summary;
    this.cards();
  },
};

// An order event counted into the current minute of a /v1/ops/series answer.
function addToSeries(series, e) {
  const minutes = series.minutes;
  const start = Math.floor(e.ts_ms / 60000) * 60000;
  let m = minutes[minutes.length - 1];
  if (start > m.start_ms) {  // a new minute began
    minutes.push({start_ms: start, orders: 0, sales: 0, failed: 0, latency_ms: null});
    minutes.shift();
    m = minutes[minutes.length - 1];
  }
  if (m.start_ms !== start) return;
  if (!e.from_state) m.orders += 1;
  if (e.to_state === 'COMPLETED') m.sales += 1;
  if (e.to_state === 'FAILED') m.failed += 1;
}

function card(label, value, id) {
  return el('div', {class: 'card', id}, el('b', {}, value ?? '—'), label);
}

// ---- device ----------------------------------------------------------------

pages.device = {
  mount(root, id) {
    const restock = el('form', {class: 'inline', id: 'restock-form', onsubmit: async (e) => {
      e.preventDefault();
      const body = {slot: Number($('restock-slot').value), count: Number($('restock-count').value)};
      try {
        const r = await api('/v1/devices/' + encodeURIComponent(id) + '/restock',
                            {method: 'POST', body});
        message('device-msg', 'restock ' + r.restock_id + ' sent: slot ' + body.slot + ' +' +
                                  body.count);
      } catch (err) { message('device-msg', 'restock refused: ' + err.message, true); }
    }}, 'Restock slot', el('input', {id: 'restock-slot', type: 'number', min: 1, value: 1,
                                     required: true}),
       'count', el('input', {id: 'restock-count', type: 'number', min: 1, value: 5,
                             required: true}),
       el('button', {type: 'submit'}, 'Restock'));
    const reconcile = el('button', {id: 'reconcile-now', type: 'button', onclick: async () => {
      try {
        const r = await api('/v1/devices/' + encodeURIComponent(id) + '/reconcile',
                            {method: 'POST'});
        message('device-msg', 'reconciliation ' + r.request_id + ' requested');
      } catch (err) { message('device-msg', 'reconcile refused: ' + err.message, true); }
    }}, 'Reconcile now');
    root.append(el('h2', {}, 'Machine ', el('span', {id: 'device-id'}, id)),
                el('p', {id: 'device-summary'}), el('div', {}, restock, ' ', reconcile),
                el('p', {id: 'device-msg', class: 'hint'}), el('h3', {}, 'Slots'),
                el('div', {id: 'slots'}), el('h3', {}, 'Reconciliation report'),
                el('div', {id: 'report'}), el('h3', {}, 'Recent orders'),
                el('div', {id: 'device-orders'}), el('h3', {}, 'Faults'),
                el('div', {id: 'faults'}));
  },
  // Only this machine's data (per-device endpoints): the page costs the
  // same in a fleet of 10 or 10,000.
  async update(id) {
    const enc = encodeURIComponent(id);
    const base = '/v1/devices/' + enc;
    const [device, {slots}, {orders}, {faults}, report] = await Promise.all([
      api(base), api(base + '/slots'),
      api('/v1/orders?device=' + enc + '&limit=' + DEVICE_ORDERS), api(base + '/faults?limit=20'),
      api('/v1/reconcile/' + enc).catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    deviceSummary(device);
    $('slots').replaceChildren(table('slots-table', ['Slot', 'Product', {label: 'Price', num: 1},
      {label: 'Capacity', num: 1}, {label: 'Pool', num: 1}, {label: 'Reserved', num: 1},
      {label: 'Dispatched', num: 1}, {label: 'Sold', num: 1}, {label: 'Burned', num: 1}],
      slots.map((s) => el('tr', {'data-slot': s.slot}, num(s.slot), el('td', {}, s.product),
                          num((s.price_cents / 100).toFixed(2)), num(s.capacity),
                          num(s.pool, 'pool'), num(s.reserved, 'reserved'),
                          num(s.dispatched, 'dispatched'), num(s.sold, 'sold'),
                          num(s.burned, 'burned')))));
    $('report').replaceChildren(report ? reportView(report)
                                       : el('p', {class: 'hint'}, 'No reconciliation yet.'));
    $('device-orders').replaceChildren(orders.length ? ordersTable(orders)
                                                     : el('p', {class: 'hint'}, 'No orders yet.'));
    $('faults').replaceChildren(faults.length
        ? table('faults-table', ['When', 'Code', {label: 'Slot', num: 1}, 'What'],
                faults.map((f) => el('tr', {}, el('td', {}, when(f.at_ms)),
                                     el('td', {class: 'error'}, f.code), num(f.slot || '—'),
                                     el('td', {}, f.message))))
        : el('p', {class: 'hint', id: 'faults-none'}, 'No faults recorded.'));
  },
};

const DEVICE_ORDERS = 20;

// The device page in place: its status and slots from device events, its
// orders from order events, its report from reconcile events.
pages.device.onEvent = function(kind, msg, id) {
  if (kind === 'device' && msg.device === id) {
    deviceSummary({online: msg.online, last_seen_ms: msg.last_seen_ms,
                   clock_skew_ms: msg.clock_skew_ms, boot_id: msg.boot_id,
                   last_processed_seq: msg.last_seq});
    for (const s of msg.slots || []) {
      const row = document.querySelector(`#slots-table tr[data-slot="${s.slot}"]`);
      if (!row) continue;
      for (const f of ['pool', 'reserved', 'dispatched', 'sold', 'burned']) {
        const cell = row.querySelector(`td[data-field=${f}]`);
        if (cell) cell.textContent = s[f];
      }
    }
  } else if (kind === 'orders') {
    const tbody = document.querySelector('#device-orders tbody');
    for (const e of msg.events.filter((x) => x.device === id)) {
      const cell = document.querySelector(
          `#device-orders tr[data-order="${CSS.escape(e.order_id)}"] td[data-field=state]`);
      if (cell) cell.textContent = e.to_state;
      else if (!tbody) later('page', refresh, 500);  // its first order: the table appears
      else {
        tbody.prepend(ordersTable([{id: e.order_id, device: e.device, slot: e.slot,
                                    state: e.to_state, reason: e.reason, created_ms: e.ts_ms,
                                    updated_ms: e.ts_ms}]).querySelector('tbody tr'));
        while (tbody.rows.length > DEVICE_ORDERS) tbody.deleteRow(-1);
      }
    }
  } else if (kind === 'reconcile' && msg.device === id) {
    $('report').replaceChildren(reportView(msg));
  }
};

function deviceSummary(d) {
  $('device-summary').replaceChildren(
      el('span', {class: d.online ? 'online' : 'offline', 'data-field': 'online'},
         d.online ? 'online' : 'offline'),
      ', last seen ' + ago(d.last_seen_ms) + ', clock skew ' + (d.clock_skew_ms ?? '—') +
          ' ms, boot ' + (d.boot_id || '—') + ', last processed seq ' +
          (d.last_processed_seq ?? '—'));
}

function reportView(r) {
  const slots = r.slots || [];
  return el('div', {}, el('p', {}, 'Verdict: ', el('b', {id: 'report-verdict'}, r.verdict),
                          r.finished_ms ? ' (' + when(r.finished_ms) + ')' : ''),
            table('report-table', ['Slot', 'Verdict', {label: 'Pool', num: 1},
              {label: 'Device tokens', num: 1}, {label: 'Physical count', num: 1}],
              slots.map((s) => el('tr', {}, num(s.slot), el('td', {}, s.verdict), num(s.pool),
                                  num(s.device_tokens), num(s.physical_count)))));
}

// ---- orders ----------------------------------------------------------------

function ordersTable(orders) {
  return table('orders-table', ['Order', 'Machine', {label: 'Slot', num: 1}, 'State', 'Reason',
                                'Created', 'Updated'],
               orders.map((o) => el('tr', {'data-order': o.id},
                 el('td', {}, el('a', {href: '#/order/' + encodeURIComponent(o.id)}, o.id)),
                 el('td', {}, el('a', {href: '#/device/' + encodeURIComponent(o.device)}, o.device)),
                 num(o.slot), el('td', {'data-field': 'state'}, o.state),
                 el('td', {}, o.reason || ''), el('td', {}, when(o.created_ms)),
                 el('td', {}, when(o.updated_ms)))));
}

// Searched by the agent: an order id is looked up (GET /v1/orders/{id}), a
// machine id lists that machine's orders (?device=), with the state filter;
// no list is downloaded to be filtered here.
const ID_RE = /^[A-Za-z0-9._-]{1,64}$/;
const ORDERS_LIMIT = 200;

pages.orders = {
  mount(root) {
    const state = el('select', {id: 'orders-state', onchange: () => refresh()},
                     el('option', {value: ''}, 'any state'),
                     ORDER_STATES.map((s) => el('option', {value: s}, s)));
    const search = el('input', {id: 'orders-search', placeholder: 'order id or machine id',
                                oninput: () => later('orders-search', refresh, 250)});
    root.append(el('h2', {}, 'Orders'), el('div', {class: 'inline'}, 'State ', state, ' ', search),
                el('p', {class: 'hint', id: 'orders-count'}), el('div', {id: 'orders'}));
  },
  async update() {
    const state = $('orders-state').value;
    const q = $('orders-search').value.trim();
    const filter = (state ? '&state=' + state : '');
    if (q && !ID_RE.test(q)) {
      $('orders-count').textContent = 'not an id: 1..64 of A-Z a-z 0-9 . _ -';
      $('orders').replaceChildren();
      return;
    }
    let orders;
    let what;
    if (!q) {
      orders = (await api('/v1/orders?limit=' + ORDERS_LIMIT + filter)).orders;
      what = 'the latest ' + (state || '') + ' orders';
    } else {
      const [one, ofDevice] = await Promise.all([
        api('/v1/orders/' + encodeURIComponent(q))
            .catch((e) => (e.status === 404 ? null : Promise.reject(e))),
        api('/v1/orders?device=' + encodeURIComponent(q) + '&limit=' + ORDERS_LIMIT + filter)]);
      orders = ofDevice.orders;
      if (one && (!state || one.state === state)) orders = [one, ...orders];
      what = one ? 'order ' + q : 'orders of machine ' + q;
    }
    $('orders-count').textContent = orders.length + ' shown: ' + what +
        (orders.length >= ORDERS_LIMIT ? ' (the newest ' + ORDERS_LIMIT + ')' : '');
    $('orders').replaceChildren(ordersTable(orders));
  },
};

// The order and its full history from the agent's log: every state change
// (with who resolved a review and their note), its payments and refunds.
pages.order = {
  mount(root, id) {
    root.append(el('h2', {}, 'Order ', el('span', {id: 'order-id'}, id)), el('div', {id: 'order'}),
                el('div', {id: 'order-resolve'}), el('h3', {}, 'State history'),
                el('div', {id: 'order-history'}), el('h3', {}, 'Payments and refunds'),
                el('div', {id: 'order-money'}));
  },
  async update(id) {
    const enc = encodeURIComponent(id);
    const [o, h] = await Promise.all([
      api('/v1/orders/' + enc),
      api('/v1/orders/' + enc + '/history')
          .catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    $('order').replaceChildren(el('table', {id: 'order-detail'}, el('tbody', {},
        Object.entries(o).map(([k, v]) => el('tr', {}, el('th', {}, k),
            el('td', {'data-field': k}, k.endsWith('_ms') && v > 1e12 ? when(v) : String(v)))))));
    const box = $('order-resolve');
    if (o.state !== 'NEEDS_REVIEW') box.replaceChildren();
    else if (!box.firstChild) box.append(el('h3', {}, 'Resolve'), resolveForm(o));
    if (!h) {
      $('order-history').replaceChildren(el('p', {class: 'hint'}, 'Not in the log yet.'));
      $('order-money').replaceChildren();
      return;
    }
    $('order-history').replaceChildren(table('history-table', ['When', 'From', 'To', 'Detail'],
        h.events.map((e) => el('tr', {'data-to': e.to_state}, el('td', {}, when(e.at_ms)),
                               el('td', {}, e.from_state || '(created)'),
                               el('td', {'data-field': 'to_state'}, e.to_state),
                               el('td', {'data-field': 'detail'}, e.detail)))));
    const money = [
      ...h.payments.map((p) => el('tr', {}, el('td', {}, when(p.at_ms)), el('td', {}, 'payment'),
                                  el('td', {}, p.payment_id), num((p.amount_cents / 100).toFixed(2)),
                                  el('td', {}, p.outcome))),
      ...h.refunds.map((r) => el('tr', {'data-refund': r.refund_id}, el('td', {}, when(r.at_ms)),
                                 el('td', {}, 'refund'), el('td', {}, r.refund_id),
                                 num((r.amount_cents / 100).toFixed(2)),
                                 el('td', {class: r.state === 'GAVE_UP' ? 'error' : null},
                                    r.state + ' (' + r.attempts + ' attempts)' +
                                        (r.last_error ? ': ' + r.last_error : ''))))];
    $('order-money').replaceChildren(money.length
        ? table('money-table', ['When', 'What', 'Id', {label: 'Amount', num: 1}, 'Outcome'], money)
        : el('p', {class: 'hint'}, 'No payment.'));
  },
};

// ---- needs review ----------------------------------------------------------

// Dispensed / not dispensed, with a note; who decides is the account of
// the console's token (the agent records it, not a typed name).
function resolveForm(o) {
  const note = el('input', {class: 'resolve-note', placeholder: 'note (what you checked)'});
  const msg = el('span', {class: 'resolve-msg hint'});
  async function resolve(dispensed) {
    const body = {dispensed};
    if (note.value.trim()) body.note = note.value.trim();
    try {
      const r = await api('/v1/orders/' + encodeURIComponent(o.id) + '/resolve',
                          {method: 'POST', body});
      msg.textContent = 'order ' + r.id + ' is now ' + r.state;
      msg.className = 'resolve-msg resolved';
    } catch (err) {
      msg.textContent = 'refused: ' + err.message;
      msg.className = 'resolve-msg error';
    }
  }
  return el('form', {class: 'inline', onsubmit: (e) => e.preventDefault()}, note,
            el('button', {type: 'button', class: 'resolve-dispensed',
                          onclick: () => resolve(true)}, 'Dispensed'),
            el('button', {type: 'button', class: 'resolve-not-dispensed',
                          onclick: () => resolve(false)}, 'Not dispensed (refund)'), msg);
}

pages.review = {
  mount(root) {
    root.append(el('h2', {}, 'Needs review'),
                el('p', {class: 'hint'}, 'Dispatched orders without a result from their machine. ' +
                   'Check the machine, then record whether the item came out: dispensed ' +
                   'completes the order, not dispensed refunds it.'),
                el('div', {id: 'review'}), el('h3', {}, 'Resolved here'),
                el('ul', {id: 'review-done'}));
    this.rows = new Map();
  },
  async update() {
    const {orders} = await api('/v1/orders?state=NEEDS_REVIEW&limit=1000');
    const box = $('review');
    if (!box.querySelector('table')) {
      box.replaceChildren(table('review-table', ['Order', 'Machine', {label: 'Slot', num: 1},
                                                 'Why', 'Since', 'Decision'], []));
    }
    const tbody = box.querySelector('tbody');
    const ids = new Set(orders.map((o) => o.id));
    for (const [id, row] of this.rows) {  // resolved (here or elsewhere)
      if (ids.has(id)) continue;
      const msg = row.querySelector('.resolve-msg').textContent;
      $('review-done').append(el('li', {'data-order': id}, msg || 'order ' + id + ' resolved'));
      row.remove();
      this.rows.delete(id);
    }
    for (const o of orders) {  // rows with inputs are kept, not redrawn
      if (this.rows.has(o.id)) continue;
      const row = el('tr', {'data-order': o.id},
                     el('td', {}, el('a', {href: '#/order/' + encodeURIComponent(o.id)}, o.id)),
                     el('td', {}, o.device), num(o.slot), el('td', {}, o.reason || ''),
                     el('td', {}, ago(o.updated_ms)), el('td', {}, resolveForm(o)));
      tbody.append(row);
      this.rows.set(o.id, row);
    }
    if (!orders.length && !box.querySelector('.empty')) {
      box.append(el('p', {class: 'hint empty'}, 'Nothing to review.'));
    } else if (orders.length) {
      box.querySelector('.empty')?.remove();
    }
  },
};

// ---- refunds ---------------------------------------------------------------

pages.refunds = {
  mount(root) {
    const state = el('select', {id: 'refunds-state', onchange: () => refresh()},
                     el('option', {value: ''}, 'any state'),
                     ['PENDING', 'DELIVERED', 'GAVE_UP'].map((s) => el('option', {value: s}, s)));
    root.append(el('h2', {}, 'Refunds'), el('div', {}, 'State ', state),
                el('p', {class: 'hint'}, 'Refunds the agent owes the payment gateway, and ' +
                   'whether they were delivered.'), el('div', {id: 'refunds'}));
  },
  async update() {
    const state = $('refunds-state').value;
    const {refunds} = await api('/v1/refunds?limit=1000' + (state ? '&state=' + state : ''));
    $('refunds').replaceChildren(table('refunds-table', ['Refund', 'Order', 'Machine', 'Payment',
      {label: 'Amount', num: 1}, 'Delivery', {label: 'Attempts', num: 1}, 'Last error', 'Why',
      'Updated'],
      refunds.map((r) => el('tr', {'data-order': r.order_id, 'data-refund': r.refund_id},
        el('td', {class: 'id'}, r.refund_id),
        el('td', {class: 'id'}, el('a', {href: '#/order/' + encodeURIComponent(r.order_id)},
                                   r.order_id)),
        // No machine: a payment for an order the agent never had.
        el('td', {'data-field': 'device'}, r.device
          ? el('a', {href: '#/device/' + encodeURIComponent(r.device)}, r.device) : '—'),
        el('td', {class: 'id'}, r.payment_id), num((r.amount_cents / 100).toFixed(2)),
        el('td', {class: r.state === 'GAVE_UP' ? 'error' : null, 'data-field': 'state'}, r.state),
        num(r.attempts, 'attempts'),
        el('td', {class: 'id', 'data-field': 'last_error'}, r.last_error || ''),
        el('td', {}, r.reason), el('td', {}, when(r.updated_ms))))));
  },
};

// ---- alerts ----------------------------------------------------------------

// One row per active alert (GET /v1/alerts); the stream's alert events add,
// update and remove rows in place.
function alertRow(a) {
  return el('tr', {'data-alert': a.device + '/' + a.slot + '/' + a.code},
            el('td', {class: a.severity === 'critical' ? 'error' : 'warn'}, a.severity),
            el('td', {'data-field': 'code'}, a.code),
            el('td', {class: 'nowrap'},
               a.device ? el('a', {href: '#/device/' + encodeURIComponent(a.device)}, a.device)
                        : 'fleet'),
            num(a.slot || '—'), el('td', {}, a.message), el('td', {}, when(a.ts_ms)));
}

pages.alerts = {
  mount(root) {
    root.append(el('h2', {}, 'Active alerts'),
                el('p', {class: 'hint'}, 'Raised by the agent and not cleared, one per machine, ' +
                   'slot and code (also on the MQTT ops topics, vendctl watch, and as ' +
                   'vend_alerts_active in /metrics for Prometheus).'), el('div', {id: 'alerts'}));
  },
  async update() {
    const {alerts} = await api('/v1/alerts');
    $('alerts').replaceChildren(alerts.length
        ? table('alerts-table', ['Severity', 'Code', 'Machine', {label: 'Slot', num: 1},
                                 'Message', 'Since'], alerts.map(alertRow))
        : el('p', {id: 'alerts-none'}, 'No active alerts.'));
  },
  onEvent(kind, msg) {
    if (kind !== 'alert') return;
    const key = msg.device + '/' + msg.slot + '/' + msg.code;
    const row = document.querySelector(`#alerts-table tr[data-alert="${CSS.escape(key)}"]`);
    if (msg.state === 'cleared') row?.remove();
    else if (row) row.replaceWith(alertRow(msg));
    else return later('page', refresh, 300);  // a new one (or the first): the table again
    if (!document.querySelector('#alerts-table tbody tr')) later('page', refresh, 300);
  },
};

// The console's pages (console.js routes to them): fleet, machine, orders,
// order, needs review, refunds, alerts. Each is {mount(root, arg),
// update(arg)}: mount builds what stays (forms), update fetches and fills
// what changes, every POLL_MS.
'use strict';

// ---- fleet -----------------------------------------------------------------

function sum(slots, field) { return slots.reduce((n, s) => n + (s[field] || 0), 0); }

pages.fleet = {
  mount(root) {
    root.append(el('h2', {}, 'Fleet'), el('div', {class: 'cards', id: 'fleet-cards'}),
                el('h3', {}, 'Orders per minute (last 30 minutes)'),
                el('canvas', {id: 'orders-chart', width: 720, height: 180}),
                el('h3', {}, 'Machines'), el('div', {id: 'fleet'}));
  },
  async update() {
    const [{devices}, {orders}] = await Promise.all([api('/v1/devices'),
                                                     api('/v1/orders?limit=1000')]);
    const details = await Promise.all(devices.map(async (d) => {
      const slots = (await api('/v1/devices/' + encodeURIComponent(d.id) + '/slots')).slots;
      const report = await api('/v1/reconcile/' + encodeURIComponent(d.id))
                         .catch((e) => (e.status === 404 ? null : Promise.reject(e)));
      return {slots, report};
    }));
    devices.sort((a, b) => a.id.localeCompare(b.id));
    const rows = devices.map((d, i) => {
      const {slots, report} = details[i];
      return el('tr', {'data-device': d.id},
                el('td', {}, el('a', {href: '#/device/' + encodeURIComponent(d.id)}, d.id)),
                el('td', {class: d.online ? 'online' : 'offline', 'data-field': 'online'},
                   d.online ? 'online' : 'offline'),
                el('td', {}, ago(d.last_seen_ms)),
                num(d.clock_skew_ms, 'clock_skew_ms'), num(slots.length, 'slots'),
                num(sum(slots, 'pool'), 'pool'), num(sum(slots, 'reserved') +
                                                     sum(slots, 'dispatched'), 'in_flight'),
                num(sum(slots, 'sold'), 'sold'), num(sum(slots, 'burned'), 'burned'),
                el('td', {'data-field': 'verdict'}, report ? report.verdict : 'no report yet'));
    });
    $('fleet').replaceChildren(table('fleet-table', ['Machine', 'Status', 'Last seen',
      {label: 'Clock skew ms', num: 1}, {label: 'Slots', num: 1}, {label: 'Pool', num: 1},
      {label: 'Reserved + dispatched', num: 1}, {label: 'Sold', num: 1},
      {label: 'Burned', num: 1}, 'Reconcile'], rows));
    const perMinute = ordersPerMinute(orders, 30);
    const online = devices.filter((d) => d.online).length;
    const review = orders.filter((o) => o.state === 'NEEDS_REVIEW').length;
    $('fleet-cards').replaceChildren(
        card('Machines', devices.length), card('Online', online, 'cards-online'),
        card('Orders, last minute', perMinute[perMinute.length - 1]),
        card('Needs review', review));
    drawBars($('orders-chart'), perMinute);
  },
};

function card(label, value, id) { return el('div', {class: 'card', id}, el('b', {}, value), label); }

// Orders created in each of the last `minutes` whole minutes (the last one is
// the current, partial minute).
function ordersPerMinute(orders, minutes) {
  const counts = new Array(minutes).fill(0);
  const nowMin = Math.floor(Date.now() / 60000);
  for (const o of orders) {
    const back = nowMin - Math.floor(o.created_ms / 60000);
    if (back >= 0 && back < minutes) counts[minutes - 1 - back] += 1;
  }
  return counts;
}

function drawBars(canvas, values) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width;
  const h = canvas.height;
  const pad = 28;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...values);
  const bw = (w - pad - 8) / values.length;
  ctx.fillStyle = '#667085';
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillText(String(max), 2, 12);
  ctx.fillText('0', 2, h - pad + 4);
  ctx.fillText('-' + values.length + ' min', pad, h - 8);
  ctx.fillText('now', w - 30, h - 8);
  ctx.strokeStyle = '#d0d5dd';
  ctx.beginPath();
  ctx.moveTo(pad, 8);
  ctx.lineTo(pad, h - pad);
  ctx.lineTo(w - 4, h - pad);
  ctx.stroke();
  ctx.fillStyle = '#1f4fd1';
  values.forEach((v, i) => {
    const bh = ((h - pad - 10) * v) / max;
    ctx.fillRect(pad + 2 + i * bw, h - pad - bh, Math.max(1, bw - 2), bh);
  });
  canvas.dataset.values = values.join(',');
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
                el('div', {id: 'device-orders'}));
  },
  async update(id) {
    const enc = encodeURIComponent(id);
    const [{devices}, {slots}, {orders}, report] = await Promise.all([
      api('/v1/devices'), api('/v1/devices/' + enc + '/slots'), api('/v1/orders?limit=1000'),
      api('/v1/reconcile/' + enc).catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    const d = devices.find((x) => x.id === id) || {};
    $('device-summary').replaceChildren(
        el('span', {class: d.online ? 'online' : 'offline'}, d.online ? 'online' : 'offline'),
        ', last seen ' + ago(d.last_seen_ms) + ', clock skew ' + (d.clock_skew_ms ?? '—') +
            ' ms, boot ' + (d.boot_id || '—') + ', last processed seq ' +
            (d.last_processed_seq ?? '—'));
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
    const mine = orders.filter((o) => o.device === id).slice(0, 20);
    $('device-orders').replaceChildren(ordersTable(mine));
  },
};

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

pages.orders = {
  mount(root) {
    const state = el('select', {id: 'orders-state', onchange: () => refresh()},
                     el('option', {value: ''}, 'any state'),
                     ORDER_STATES.map((s) => el('option', {value: s}, s)));
    const search = el('input', {id: 'orders-search', placeholder: 'order or machine id',
                                oninput: () => refresh()});
    root.append(el('h2', {}, 'Orders'), el('div', {class: 'inline'}, 'State ', state, ' ', search),
                el('p', {class: 'hint', id: 'orders-count'}), el('div', {id: 'orders'}));
  },
  async update() {
    const state = $('orders-state').value;
    const q = $('orders-search').value.trim().toLowerCase();
    const {orders} = await api('/v1/orders?limit=1000' + (state ? '&state=' + state : ''));
    const shown = orders.filter((o) => !q || o.id.toLowerCase().includes(q) ||
                                       o.device.toLowerCase().includes(q));
    $('orders-count').textContent = shown.length + ' of the latest ' + orders.length + ' orders';
    $('orders').replaceChildren(ordersTable(shown));
  },
};

pages.order = {
  mount(root, id) {
    root.append(el('h2', {}, 'Order ', el('span', {id: 'order-id'}, id)), el('div', {id: 'order'}),
                el('div', {id: 'order-resolve'}));
  },
  async update(id) {
    const o = await api('/v1/orders/' + encodeURIComponent(id));
    $('order').replaceChildren(el('table', {id: 'order-detail'}, el('tbody', {},
        Object.entries(o).map(([k, v]) => el('tr', {}, el('th', {}, k),
            el('td', {'data-field': k}, k.endsWith('_ms') && v > 1e12 ? when(v) : String(v)))))));
    const box = $('order-resolve');
    if (o.state !== 'NEEDS_REVIEW') box.replaceChildren();
    else if (!box.firstChild) box.append(el('h3', {}, 'Resolve'), resolveForm(o));
  },
};

// ---- needs review ----------------------------------------------------------

// Dispensed / not dispensed, with who decides and a note.
function resolveForm(o) {
  const by = el('input', {class: 'resolve-by', placeholder: 'your name (by)', required: true,
                          value: localStorage.getItem(BY_KEY) || ''});
  const note = el('input', {class: 'resolve-note', placeholder: 'note (what you checked)'});
  const msg = el('span', {class: 'resolve-msg hint'});
  async function resolve(dispensed) {
    if (!by.value.trim()) {
      msg.textContent = 'say who decides (by)';
      msg.className = 'resolve-msg error';
      return;
    }
    localStorage.setItem(BY_KEY, by.value.trim());
    const body = {dispensed, by: by.value.trim()};
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
  return el('form', {class: 'inline', onsubmit: (e) => e.preventDefault()}, by, note,
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
    $('refunds').replaceChildren(table('refunds-table', ['Refund', 'Order', 'Payment',
      {label: 'Amount', num: 1}, 'State', {label: 'Attempts', num: 1}, 'Last error', 'Updated'],
      refunds.map((r) => el('tr', {},
        el('td', {}, r.refund_id), el('td', {}, el('a', {href: '#/order/' +
                                                       encodeURIComponent(r.order_id)},
                                                   r.order_id)),
        el('td', {}, r.payment_id), num((r.amount_cents / 100).toFixed(2)),
        el('td', {class: r.state === 'GAVE_UP' ? 'error' : null}, r.state), num(r.attempts),
        el('td', {}, r.last_error || ''), el('td', {}, when(r.updated_ms))))));
  },
};

// ---- alerts ----------------------------------------------------------------

pages.alerts = {
  mount(root) {
    root.append(el('h2', {}, 'Active alerts'),
                el('p', {class: 'hint'}, 'The agent reports active alerts as counts by code ' +
                   '(vend_alerts_active in /metrics). Each alert, with its device and slot, ' +
                   'is published on the MQTT ops topics (vendctl watch); the JSON API has no ' +
                   'per-alert list yet.'), el('div', {id: 'alerts'}));
  },
  async update() {
    const text = await api('/metrics', {raw: true});
    const active = [];
    for (const line of text.split('\n')) {
      const m = /^vend_alerts_active\{code="([^"]+)"\} (\d+)/.exec(line);
      if (m && Number(m[2]) > 0) active.push([m[1], Number(m[2])]);
    }
    $('alerts').replaceChildren(active.length
        ? table('alerts-table', ['Code', {label: 'Active', num: 1}],
                active.map(([code, n]) => el('tr', {}, el('td', {}, code), num(n))))
        : el('p', {id: 'alerts-none'}, 'No active alerts.'));
  },
};

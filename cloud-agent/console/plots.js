// The console's plots, plain SVG (no library): orders and sales per minute,
// payment -> dispense result latency P50/P95/P99 per minute, and each
// machine's availability (share of the last hour online), from GET
// /v1/ops/series. The plots page refetches the series every 15 s; the
// current minute's counts also move with the stream's order events.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const COLOURS = ['#1f4fd1', '#067647', '#b54708', '#b42318'];

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function legend(series) {
  return el('div', {class: 'legend'}, series.map((s, i) => el('span', {},
                                                              el('i', {class: 'c' + i}), s.name)));
}

function minuteLabel(ms) {
  const d = new Date(ms);
  return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
}

// The frame of a time plot: axes, the max on the y axis, first and last minute.
function timeFrame(id, w, h, pad, max, xs, unit) {
  const root = svg('svg', {id, class: 'plot', width: w, height: h, viewBox: `0 0 ${w} ${h}`,
                           'data-max': max});
  root.append(svg('path', {d: `M${pad} 8 V${h - 20} H${w - 4}`, stroke: '#d0d5dd', fill: 'none'}),
              svg('text', {x: 2, y: 14}, max + (unit || '')), svg('text', {x: 2, y: h - 22}, 0),
              svg('text', {x: pad, y: h - 6}, minuteLabel(xs[0])),
              svg('text', {x: w - 40, y: h - 6}, minuteLabel(xs[xs.length - 1])));
  return root;
}

// Grouped bars, one group per minute.
function drawBarsSvg(box, id, xs, series) {
  const w = 760;
  const h = 190;
  const pad = 34;
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const root = timeFrame(id, w, h, pad, max, xs);
  const group = (w - pad - 8) / xs.length;
  const bw = Math.max(1, (group - 1) / series.length);
  series.forEach((s, k) => s.values.forEach((v, i) => {
    if (!v) return;
    const bh = ((h - 30) * v) / max;
    root.append(svg('rect', {x: pad + 1 + i * group + k * bw, y: h - 20 - bh, width: bw,
                             height: bh, fill: COLOURS[k], 'data-series': s.name,
                             'data-value': v}, svg('title', {}, s.name + ' ' + v)));
  }));
  root.dataset.values = series.map((s) => s.name + ':' + s.values.join(',')).join(' ');
  box.replaceChildren(legend(series), root);
}

// Lines with gaps where a minute has no value (null).
function drawLinesSvg(box, id, xs, series, unit) {
  const w = 760;
  const h = 190;
  const pad = 52;
  const max = Math.max(1, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
  const root = timeFrame(id, w, h, pad, max, xs, unit);
  const step = (w - pad - 8) / Math.max(1, xs.length - 1);
  series.forEach((s, k) => {
    let run = [];
    const flush = () => {
      if (run.length === 1) {
        const [x, y] = run[0].split(',');
        root.append(svg('circle', {cx: x, cy: y, r: 2.5, fill: COLOURS[k], 'data-series': s.name}));
      } else if (run.length > 1) {
        root.append(svg('polyline', {points: run.join(' '), fill: 'none', stroke: COLOURS[k],
                                     'stroke-width': 2, 'data-series': s.name}));
      }
      run = [];
    };
    s.values.forEach((v, i) => {
      if (v === null) return flush();
      run.push((pad + i * step).toFixed(1) + ',' + (h - 20 - ((h - 30) * v) / max).toFixed(1));
    });
    flush();
  });
  box.replaceChildren(legend(series), root);
}

// One horizontal bar per machine, worst first (at most `limit`).
function drawAvailabilitySvg(box, id, rows, limit) {
  const shown = [...rows].sort((a, b) => a.share - b.share || a.device.localeCompare(b.device))
                    .slice(0, limit);
  const w = 760;
  const rowH = 18;
  const label = 160;
  const h = 10 + rowH * Math.max(1, shown.length);
  const root = svg('svg', {id, class: 'plot', width: w, height: h, viewBox: `0 0 ${w} ${h}`});
  shown.forEach((r, i) => {
    const y = 5 + i * rowH;
    const bw = (w - label - 60) * r.share;
    root.append(svg('text', {x: 4, y: y + 12}, r.device),
                svg('rect', {x: label, y: y + 2, width: Math.max(1, bw), height: rowH - 5,
                             fill: r.share >= 0.99 ? COLOURS[1] : r.share >= 0.9 ? COLOURS[2]
                                                                                 : COLOURS[3],
                             'data-device': r.device, 'data-share': r.share.toFixed(4)}),
                svg('text', {x: label + bw + 6, y: y + 12}, (100 * r.share).toFixed(1) + ' %'));
  });
  box.replaceChildren(shown.length ? root : el('p', {class: 'hint'},
                                               'No machine status seen yet.'));
}

pages.plots = {
  tickMs: 15000,
  mount(root) {
    root.append(el('h2', {}, 'Plots (last 60 minutes, per minute)'),
                el('h3', {}, 'Orders and sales per minute'), el('div', {id: 'plot-orders'}),
                el('h3', {}, 'Payment → dispense result latency'),
                el('p', {class: 'hint'}, 'Percentiles per minute, ms, within 12 % ' +
                   '(the agent keeps a log histogram per minute).'),
                el('div', {id: 'plot-latency'}),
                el('h3', {}, 'Availability: share of the window online (worst 40 machines)'),
                el('div', {id: 'plot-availability'}));
  },
  async update() {
    this.series = await api('/v1/ops/series');
    this.draw();
  },
  tick() { return this.update(); },
  draw() {
    const minutes = this.series.minutes;
    const xs = minutes.map((m) => m.start_ms);
    drawBarsSvg($('plot-orders'), 'orders-plot', xs,
                [{name: 'orders', values: minutes.map((m) => m.orders)},
                 {name: 'sales', values: minutes.map((m) => m.sales)},
                 {name: 'failed', values: minutes.map((m) => m.failed)}]);
    const pct = (p) => minutes.map((m) => (m.latency_ms ? m.latency_ms[p] : null));
    drawLinesSvg($('plot-latency'), 'latency-plot', xs,
                 [{name: 'P50', values: pct('p50')}, {name: 'P95', values: pct('p95')},
                  {name: 'P99', values: pct('p99')}], ' ms');
    drawAvailabilitySvg($('plot-availability'), 'availability-plot', this.series.availability,
                        40);
  },
  onEvent(kind, msg) {
    if (kind !== 'orders' || !this.series) return;
    for (const e of msg.events) addToSeries(this.series, e);
    this.draw();
  },
};

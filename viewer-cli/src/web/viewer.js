// The JETS viewer front-end: vanilla JavaScript, no build step, no external resources.
//
// Data comes either from the `jets view` server (JSON API under api/) or, in a page written by
// `jets gantt`, from a bundle inlined in the page as a JSON script element. Text from
// the trace only ever reaches the page through textContent or canvas fillText, never as markup.
(() => {
  'use strict';

  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- data sources ---------------------------------------------------------------------------

  function httpSource() {
    async function get(name, params) {
      const query = new URLSearchParams();
      for (const [k, v] of Object.entries(params || {})) {
        if (v !== undefined && v !== null) query.set(k, String(v));
      }
      const r = await fetch('api/' + name + '?' + query.toString(), { cache: 'no-store' });
      let body;
      try { body = await r.json(); } catch (e) { throw new Error(name + ': ' + r.status + ' ' + r.statusText); }
      if (!r.ok) throw new Error(body && body.error ? body.error : r.statusText);
      return body;
    }
    return {
      live: true,
      summary: () => get('summary'),
      window: (t0, t1, px, rows) => get('window', { t0, t1, px, rows: rows.join(',') }),
      children: (parent, after, limit) => get('children', { parent, after, limit }),
      record: (id) => get('record', { id }),
      search: (q) => get('search', { q, limit: 200 }),
      bars: (ids, t0, t1, px) => get('bars', { ids: ids.join(','), t0, t1, px }),
      host: () => get('host'),
    };
  }

  function staticSource(bundle) {
    const kids = new Map([['', []]]);
    for (const n of bundle.nodes) {
      const p = n.parent === null ? '' : n.parent;
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(n);
    }
    const rows = new Map(bundle.window.rows.map((r) => [r.row, r]));
    const barOf = new Map(), markersOf = new Map();
    for (const r of bundle.window.rows) {
      for (const b of r.bars) barOf.set(b[2], b);
      for (const m of r.markers) {
        if (!markersOf.has(m[7])) markersOf.set(m[7], []);
        markersOf.get(m[7]).push(m);
      }
    }
    return {
      live: false,
      summary: async () => bundle.summary,
      window: async (t0, t1, px, rowIds) => ({
        version: bundle.summary.version,
        now: bundle.window.now,
        rows: rowIds.filter((r) => rows.has(r)).map((r) => {
          const row = rows.get(r);
          return {
            row: r,
            bars: row.bars.filter((b) => b[1] >= t0 && b[0] < t1),
            markers: row.markers.filter((m) => m[0] >= t0 && m[0] < t1),
          };
        }),
      }),
      children: async (parent, after, limit) => {
        const list = kids.get(parent === null || parent === undefined ? '' : parent) || [];
        const from = after === null || after === undefined ? 0 : list.findIndex((n) => n.id === after) + 1;
        return { children: list.slice(from, from + limit), more: from + limit < list.length };
      },
      record: async (id) => {
        if (!Object.prototype.hasOwnProperty.call(bundle.records, id)) throw new Error('no record with id ' + id);
        return bundle.records[id];
      },
      search: async (q) => {
        const lq = q.toLowerCase();
        const results = bundle.nodes.filter((n) => n.name.toLowerCase().includes(lq) || n.type.toLowerCase().includes(lq));
        return { results: results.slice(0, 200), complete: results.length <= 200 };
      },
      host: async () => bundle.host,
      bars: async (ids, t0, t1) => ({
        version: bundle.summary.version,
        rows: ids.map((id) => {
          const b = barOf.get(id);
          return {
            row: id,
            bars: b && b[1] >= t0 && b[0] < t1 ? [b] : [],
            markers: (markersOf.get(id) || []).filter((m) => m[0] >= t0 && m[0] < t1),
          };
        }),
      }),
    };
  }

  const dataEl = $('jets-data');
  const src = dataEl ? staticSource(JSON.parse(dataEl.textContent)) : httpSource();

  // ---- state ----------------------------------------------------------------------------------

  const ROW_H = 18, LANE_H = 22, BAR_H = 14;
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#8cd17d', '#a0cbe8', '#ffbe7d', '#79706e'];
  const SEVERITY = ['', 'info', 'warning', 'error'];
  const SEV_COLOR = ['#475569', '#2563eb', '#d97706', '#dc2626'];
  const STYLE = ['', 'box', 'diamond', 'circle', 'line'];
  const STATUS = ['', 'running', 'stalled', 'complete', 'flushed'];

  const S = {
    mode: 'lanes', sum: null, version: -1, extent: [0, 1], t0: 0, t1: 1, fitted: true,
    layout: [], height: 0, scrollY: 0, collapsed: new Set(), win: null, winKey: '',
    selected: null, drawn: { bars: 0, clusters: 0, markers: 0, labels: 0 }, hits: [],
    mhz: null, types: [], icons: [], host: null, hostVersion: -1, error: null,
  };

  const canvas = $('timeline'), axis = $('axis'), hostCanvas = $('host-canvas');
  const labelsEl = $('labels');

  function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }
  function cssSize(c) { const r = c.getBoundingClientRect(); return [Math.max(1, r.width), Math.max(1, r.height)]; }
  function prep(c) {
    const [w, h] = cssSize(c);
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return [ctx, w, h];
  }
  const xOf = (clk, w) => (clk - S.t0) / (S.t1 - S.t0) * w;
  const clkOf = (x, w) => S.t0 + x / w * (S.t1 - S.t0);

  function fmtNum(n) {
    if (n === null || n === undefined) return '';
    return Math.round(n).toLocaleString('en-US');
  }
  function fmtTime(seconds) {
    const a = Math.abs(seconds);
    if (a === 0) return '0 s';
    if (a < 1e-6) return (seconds * 1e9).toPrecision(3) + ' ns';
    if (a < 1e-3) return (seconds * 1e6).toPrecision(3) + ' µs';
    if (a < 1) return (seconds * 1e3).toPrecision(3) + ' ms';
    return seconds.toPrecision(4) + ' s';
  }
  // A tick's time, in the unit of the tick spacing and with as many decimals as it needs.
  function fmtTimeTick(seconds, stepSeconds) {
    const units = [[1, 's'], [1e-3, 'ms'], [1e-6, 'µs'], [1e-9, 'ns'], [1e-12, 'ps']];
    const [scale, unit] = units.find(([u]) => stepSeconds >= u / 10) || units[units.length - 1];
    const decimals = clamp(-Math.floor(Math.log10(stepSeconds / scale) + 1e-9), 0, 6);
    return (seconds / scale).toFixed(decimals) + ' ' + unit;
  }
  function fmtCycles(c) {
    let s = fmtNum(c) + ' cyc';
    if (S.mhz) s += ' (' + fmtTime(c / (S.mhz * 1e6)) + ')';
    return s;
  }
  function colorOf(c) { return '#' + (c >>> 0).toString(16).padStart(6, '0'); }
  function barColor(b) { return b[4] !== null ? colorOf(b[4]) : PALETTE[b[3] % PALETTE.length]; }
  function textColorOn(hex) {
    const v = parseInt(hex.slice(1), 16);
    const l = 0.299 * (v >> 16 & 255) + 0.587 * (v >> 8 & 255) + 0.114 * (v & 255);
    return l > 150 ? '#111827' : '#ffffff';
  }

  // ---- layout: lanes and rows -------------------------------------------------------------------

  // Tree mode: one row per record shown in the Records panel (expanded parents' children).
  function treeLayout() {
    const out = [];
    let y = 0;
    for (const rowEl of document.querySelectorAll('#tree .node')) {
      if (rowEl.parentElement.closest('#tree [hidden]')) continue;
      const entry = treeNodes.get(rowEl.dataset.id);
      if (!entry) continue;
      out.push({ kind: 'rec', row: entry.node.id, entry, y, h: ROW_H });
      y += ROW_H;
    }
    return [out, y];
  }

  function buildLayout() {
    if (S.mode === 'tree') {
      [S.layout, S.height] = treeLayout();
      const [, h] = cssSize(canvas);
      S.scrollY = clamp(S.scrollY, 0, Math.max(0, S.height - h));
      return;
    }
    const out = [];
    let y = 0;
    (S.sum.lanes || []).forEach((lane, li) => {
      out.push({ kind: 'lane', lane: li, label: lane.label, rows: lane.rows.length, y, h: LANE_H });
      y += LANE_H;
      if (S.collapsed.has(lane.label)) return;
      let prev = -1;
      for (const [row, depth] of lane.rows) {
        out.push({ kind: 'row', row, depth, lane: li, y, h: ROW_H, first: depth !== prev });
        prev = depth;
        y += ROW_H;
      }
    });
    S.layout = out;
    S.height = y;
    const [, h] = cssSize(canvas);
    S.scrollY = clamp(S.scrollY, 0, Math.max(0, S.height - h));
  }

  function visibleRows() {
    const [, h] = cssSize(canvas);
    return S.layout.filter((e) => e.kind !== 'lane' && e.y + e.h > S.scrollY && e.y < S.scrollY + h);
  }

  function renderLabels() {
    const [, h] = cssSize(canvas);
    labelsEl.replaceChildren();
    for (const e of S.layout) {
      if (e.y + e.h <= S.scrollY || e.y >= S.scrollY + h) continue;
      if (e.kind === 'rec') {
        const d = el('div', 'rowlabel treelabel' + (S.selected === e.row ? ' selected' : ''));
        d.style.top = (e.y - S.scrollY) + 'px';
        d.style.paddingLeft = (2 + e.entry.depth * 12) + 'px';
        const tw = el('span', 'tw', e.entry.node.has_children ? (e.entry.open ? '▾' : '▸') : '');
        tw.addEventListener('click', (ev) => { ev.stopPropagation(); toggle(e.entry); });
        d.append(tw, el('span', null, e.entry.node.name));
        d.title = e.entry.node.name + ' (' + e.entry.node.type + ')';
        d.addEventListener('click', () => select(e.row, true));
        labelsEl.append(d);
        continue;
      }
      if (e.kind === 'lane') {
        const d = el('div', 'lane');
        d.style.top = (e.y - S.scrollY) + 'px';
        const lane = S.sum.lanes[e.lane];
        d.append(el('span', null, S.collapsed.has(lane.label) ? '▸' : '▾'), el('span', null, e.label),
          el('span', 'cnt', e.rows + (e.rows === 1 ? ' row' : ' rows')));
        d.title = 'Click to collapse or expand';
        d.addEventListener('click', () => {
          if (S.collapsed.has(lane.label)) S.collapsed.delete(lane.label); else S.collapsed.add(lane.label);
          buildLayout(); renderLabels(); requestWindow();
        });
        labelsEl.append(d);
      } else {
        const d = el('div', 'rowlabel', e.first ? 'depth ' + e.depth : '');
        d.style.top = (e.y - S.scrollY) + 'px';
        labelsEl.append(d);
      }
    }
  }

  // ---- drawing ----------------------------------------------------------------------------------

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function drawAxis() {
    const [ctx, w, h] = prep(axis);
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = '#ffffff'; ctx.fillRect(0, 0, w, h);
    const step = Math.max(1, niceStep((S.t1 - S.t0) / Math.max(1, w / 110)));
    ctx.font = '11px system-ui, sans-serif';
    ctx.strokeStyle = '#c7ccd4'; ctx.fillStyle = '#374151';
    const first = Math.ceil(S.t0 / step) * step;
    for (let c = first; c <= S.t1; c += step) {
      const x = Math.round(xOf(c, w)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, h - 8); ctx.lineTo(x, h); ctx.stroke();
      ctx.fillText(fmtNum(c), x + 3, 14);
      if (S.mhz) {
        ctx.fillStyle = '#6b7280';
        ctx.fillText(fmtTimeTick(c / (S.mhz * 1e6), step / (S.mhz * 1e6)), x + 3, 28);
        ctx.fillStyle = '#374151';
      }
    }
    $('range').textContent = fmtNum(S.t1 - S.t0) + ' cycles in view';
    return step;
  }

  function drawMarker(ctx, m, x, y) {
    const color = m[5] !== null ? colorOf(m[5]) : SEV_COLOR[m[4]];
    const style = STYLE[m[3]] || (m[4] === 3 ? 'diamond' : 'circle');
    if (m[2] > 1) {
      // Several events within a marker's width: a tick, so dense rows stay readable.
      ctx.fillStyle = color;
      ctx.fillRect(Math.round(x) - 1, y - ROW_H / 2 + 2, 2, ROW_H - 4);
      return;
    }
    const r = 4;
    ctx.fillStyle = color; ctx.strokeStyle = '#ffffff'; ctx.lineWidth = 1;
    ctx.beginPath();
    if (style === 'line') {
      ctx.strokeStyle = color; ctx.lineWidth = 2;
      ctx.moveTo(x, y - ROW_H / 2 + 1); ctx.lineTo(x, y + ROW_H / 2 - 1); ctx.stroke();
      ctx.lineWidth = 1;
      return;
    }
    if (style === 'box') ctx.rect(x - r, y - r, 2 * r, 2 * r);
    else if (style === 'diamond') { ctx.moveTo(x, y - r - 1); ctx.lineTo(x + r + 1, y); ctx.lineTo(x, y + r + 1); ctx.lineTo(x - r - 1, y); ctx.closePath(); }
    else ctx.arc(x, y, r, 0, Math.PI * 2);
    ctx.fill(); ctx.stroke();
  }

  function draw() {
    const [ctx, w, h] = prep(canvas);
    const step = drawAxis();
    ctx.clearRect(0, 0, w, h);
    const drawn = { bars: 0, clusters: 0, markers: 0, labels: 0 };
    const hits = [];
    // Grid lines on the axis ticks.
    ctx.strokeStyle = '#f0f2f5';
    for (let c = Math.ceil(S.t0 / step) * step; c <= S.t1; c += step) {
      const x = Math.round(xOf(c, w)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, h); ctx.stroke();
    }
    const rows = new Map();
    if (S.win) for (const r of S.win.rows) rows.set(r.row, r);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const e of S.layout) {
      const y = e.y - S.scrollY;
      if (y + e.h <= 0 || y >= h) continue;
      if (e.kind === 'lane') {
        ctx.fillStyle = '#eef1f5'; ctx.fillRect(0, y, w, e.h);
        ctx.fillStyle = '#dde1e7'; ctx.fillRect(0, y + e.h - 1, w, 1);
        continue;
      }
      const data = rows.get(e.row);
      if (!data) continue;
      const top = y + (ROW_H - BAR_H) / 2;
      for (const b of data.bars) {
        const x0 = xOf(b[0], w), x1 = xOf(b[1], w);
        if (x1 < -1 || x0 > w + 1) continue;
        const bx = Math.max(-2, x0), bw = Math.max(1, Math.min(w + 2, x1) - bx);
        const color = barColor(b);
        const cluster = b[7] > 1;
        ctx.globalAlpha = cluster ? 0.55 : (b[5] === 4 ? 0.35 : 1); // flushed: faded
        ctx.fillStyle = color;
        ctx.fillRect(bx, top, bw, BAR_H);
        ctx.globalAlpha = 1;
        if (cluster) drawn.clusters++; else drawn.bars++;
        if (!cluster && b[5] === 2 && bw > 3) { // stalled: hatched
          ctx.save(); ctx.beginPath(); ctx.rect(bx, top, bw, BAR_H); ctx.clip();
          ctx.strokeStyle = 'rgba(127,29,29,0.55)'; ctx.lineWidth = 1.5;
          for (let sx = bx - BAR_H; sx < bx + bw; sx += 6) { ctx.beginPath(); ctx.moveTo(sx, top + BAR_H); ctx.lineTo(sx + BAR_H, top); ctx.stroke(); }
          ctx.restore();
        }
        if (b[8] === 1 && bw > 4) { // still open: dashed right edge
          ctx.strokeStyle = '#111827'; ctx.setLineDash([2, 2]);
          ctx.beginPath(); ctx.moveTo(bx + bw - 0.5, top); ctx.lineTo(bx + bw - 0.5, top + BAR_H); ctx.stroke();
          ctx.setLineDash([]);
        }
        if (b[6] !== null && b[6] > 0) { // criticality: a red stripe whose strength is the weight
          ctx.fillStyle = 'rgba(220,38,38,' + (0.25 + 0.75 * b[6]).toFixed(2) + ')';
          ctx.fillRect(bx, top, bw, 3);
        }
        if (S.selected !== null && b[2] === S.selected && !cluster) {
          ctx.strokeStyle = '#111827'; ctx.lineWidth = 2;
          ctx.strokeRect(bx + 1, top - 1, Math.max(1, bw - 2), BAR_H + 2); ctx.lineWidth = 1;
        }
        if (b[9] !== null && bw > 24) {
          ctx.save(); ctx.beginPath(); ctx.rect(bx + 2, top, bw - 4, BAR_H); ctx.clip();
          ctx.fillStyle = textColorOn(color);
          ctx.fillText(b[9], Math.max(bx, 0) + 3, top + BAR_H / 2 + 0.5);
          ctx.restore();
          drawn.labels++;
        }
        hits.push({ x0: bx, x1: bx + bw, y0: top, y1: top + BAR_H, bar: b, row: e.row });
      }
      for (const m of data.markers) {
        const x = xOf(m[0], w);
        if (x < -5 || x > w + 5) continue;
        drawMarker(ctx, m, x, y + ROW_H / 2);
        drawn.markers++;
        hits.push({ x0: x - 5, x1: x + 5, y0: y + 2, y1: y + ROW_H - 2, marker: m, row: e.row });
      }
    }
    S.drawn = drawn;
    S.hits = hits;
    drawHost();
  }

  function drawHost() {
    if (!S.host || !S.host.samples || S.host.samples.length === 0) { $('host').hidden = true; return; }
    $('host').hidden = false;
    const [ctx, w, h] = prep(hostCanvas);
    ctx.clearRect(0, 0, w, h);
    const series = [
      { name: 'CPU %', pts: S.host.samples.filter((s) => s[2] !== null).map((s) => [s[0], s[2]]), color: '#2563eb' },
      { name: 'RSS MiB', pts: S.host.samples.filter((s) => s[3] !== null).map((s) => [s[0], s[3] / 1024]), color: '#7c3aed' },
      { name: 'cycles/s', pts: (S.host.speed || []).flatMap((s) => [[s[0], s[2]], [s[1], s[2]]]), color: '#059669' },
    ].filter((s) => s.pts.length > 0);
    const band = h / Math.max(1, series.length);
    const labels = $('host-labels');
    labels.replaceChildren();
    series.forEach((s, i) => {
      const top = i * band + 4, bh = band - 10;
      const max = Math.max(1e-9, ...s.pts.map((p) => p[1]));
      ctx.fillStyle = '#e5e7eb'; ctx.fillRect(0, i * band + band - 1, w, 1);
      ctx.strokeStyle = s.color; ctx.lineWidth = 1.5; ctx.beginPath();
      s.pts.forEach((p, j) => {
        const x = xOf(p[0], w), y = top + bh - p[1] / max * bh;
        if (j === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke(); ctx.lineWidth = 1;
      const d = el('div', null, s.name + ' (max ' + (max >= 100 ? fmtNum(max) : max.toPrecision(3)) + ')');
      d.style.top = (i * band + 2) + 'px';
      labels.append(d);
    });
  }

  // ---- fetching -------------------------------------------------------------------------------

  let inFlight = false, dirty = false;
  async function requestWindow() {
    if (!S.sum) return;
    if (inFlight) { dirty = true; draw(); return; }
    const rows = visibleRows().map((e) => e.row);
    const [w] = cssSize(canvas);
    const t0 = Math.max(0, Math.floor(S.t0)), t1 = Math.max(t0 + 1, Math.ceil(S.t1));
    inFlight = true;
    draw(); // redraw the previous answer at the new scale while the new one comes
    try {
      if (!rows.length) S.win = { rows: [] };
      else if (S.mode === 'tree') S.win = await src.bars(rows, t0, t1, Math.round(w));
      else S.win = await src.window(t0, t1, Math.round(w), rows);
      S.error = null;
    } catch (e) {
      S.error = 'window: ' + e.message;
    }
    inFlight = false;
    draw();
    renderStatus();
    if (dirty) { dirty = false; requestWindow(); }
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; requestWindow(); });
  }

  function setView(t0, t1, keepFit) {
    const minSpan = 10;
    let span = Math.max(minSpan, t1 - t0);
    const [lo, hi] = [S.extent[0], Math.max(S.extent[0] + minSpan, S.extent[1] + 1)];
    span = Math.min(span, (hi - lo) * 1.05 + minSpan);
    let a = t0;
    a = clamp(a, lo - span * 0.5, hi - span * 0.5);
    S.t0 = a; S.t1 = a + span;
    S.fitted = !!keepFit;
    schedule();
  }
  function fit() { setView(S.extent[0], Math.max(S.extent[0] + 10, S.extent[1] + 1), true); }
  function zoom(factor, atX) {
    const [w] = cssSize(canvas);
    const x = atX === undefined ? w / 2 : atX;
    const c = clkOf(x, w);
    const span = (S.t1 - S.t0) * factor;
    setView(c - x / w * span, c - x / w * span + span, false);
  }
  function pan(fraction) {
    const span = S.t1 - S.t0;
    setView(S.t0 + span * fraction, S.t1 + span * fraction, false);
  }

  async function poll() {
    let sum;
    try { sum = await src.summary(); } catch (e) { S.error = 'summary: ' + e.message; renderStatus(); return true; }
    const first = !S.sum;
    const changed = sum.version !== S.version;
    S.sum = sum; S.version = sum.version;
    S.extent = sum.extent;
    S.mhz = sum.metadata && typeof sum.metadata.clock_frequency_mhz === 'number' && sum.metadata.clock_frequency_mhz > 0
      ? sum.metadata.clock_frequency_mhz : null;
    S.types = sum.types.map((t) => t.name);
    S.icons = sum.icons;
    if (first) {
      for (const lane of sum.lanes) if (lane.host) S.collapsed.add(lane.label);
      renderTitle();
    }
    if (changed || first) {
      buildLayout();
      renderLabels();
      const follow = $('follow').checked;
      if (first || S.fitted) fit();
      else if (follow && src.live && sum.following) {
        const span = S.t1 - S.t0;
        if (S.t1 < sum.extent[1]) setView(sum.extent[1] - span * 0.9, sum.extent[1] + span * 0.1, false);
        else schedule();
      } else schedule();
      if (sum.counts.host_samples !== S.hostVersion) {
        S.hostVersion = sum.counts.host_samples;
        try { S.host = await src.host(); } catch (e) { S.host = null; }
      }
      refreshTree();
    }
    renderStatus();
    return !sum.done || sum.following;
  }

  async function pollLoop() {
    const again = await poll();
    if (src.live && again) setTimeout(pollLoop, 500);
    else if (src.live) setTimeout(pollLoop, 5000);
  }

  // ---- title and status -----------------------------------------------------------------------

  function renderTitle() {
    const m = S.sum.metadata || {};
    const parts = [m.hardware_model, m.architecture, S.sum.file.split('/').pop()].filter((v) => typeof v === 'string' && v);
    $('title').textContent = parts.join(' · ');
    document.title = 'JETS · ' + (parts[0] || 'trace');
  }

  function renderStatus() {
    if (!S.sum) return;
    const c = S.sum.counts;
    const parts = [fmtNum(c.records) + ' records', fmtNum(c.open) + ' open', fmtNum(c.events) + ' events',
      fmtNum(c.annotations) + ' annotations', 'cycles ' + fmtNum(S.extent[0]) + '–' + fmtNum(S.extent[1])];
    if (S.mhz) parts.push(S.mhz + ' MHz');
    if (S.sum.note) parts.push(S.sum.note);
    if (S.sum.build_error) parts.push('read error: ' + S.sum.build_error);
    if (S.error) parts.push(S.error);
    $('status-text').textContent = parts.join('  ·  ');
    const live = $('live');
    if (src.live) {
      live.hidden = false;
      live.textContent = S.sum.following ? 'following' : (S.sum.done ? 'complete' : 'indexing');
      live.classList.toggle('done', !S.sum.following);
    }
    const errs = $('errors');
    errs.hidden = c.errors === 0;
    if (c.errors > 0) {
      $('errors-summary').textContent = fmtNum(c.errors) + ' lines skipped';
      const list = $('errors-list');
      list.replaceChildren(...S.sum.errors.map((t) => el('li', null, t)));
    }
  }

  // ---- tree -----------------------------------------------------------------------------------

  const treeNodes = new Map(); // id -> {node, rowEl, kidsEl, open, last, more}

  function durationText(n) {
    return n.end === null ? 'open' : fmtNum(n.end - n.start) + ' cyc';
  }

  function nodeEl(n, depth) {
    const wrap = el('div');
    const row = el('div', 'node');
    row.setAttribute('role', 'treeitem');
    row.dataset.id = n.id;
    row.style.paddingLeft = (4 + depth * 14) + 'px';
    const tw = el('span', 'tw', n.has_children ? '▸' : '');
    row.append(tw, el('span', 'nm', n.name), el('span', 'ty', n.type), el('span', 'du', durationText(n)));
    row.title = n.name + ' (' + n.type + ')';
    const kids = el('div');
    kids.hidden = true;
    wrap.append(row, kids);
    const entry = { node: n, rowEl: row, kidsEl: kids, open: false, last: null, more: false, loaded: false, depth };
    treeNodes.set(n.id, entry);
    tw.addEventListener('click', (ev) => { ev.stopPropagation(); toggle(entry); });
    row.addEventListener('click', () => select(n.id, true));
    row.addEventListener('dblclick', () => toggle(entry));
    return wrap;
  }

  async function loadChildren(container, parent, after, depth, entry) {
    let page;
    try { page = await src.children(parent, after, 200); } catch (e) { container.append(el('div', 'hint', e.message)); return; }
    const oldMore = container.querySelector(':scope > .more');
    if (oldMore) oldMore.remove();
    for (const n of page.children) {
      if (treeNodes.has(n.id)) continue;
      container.append(nodeEl(n, depth));
    }
    const last = page.children.length ? page.children[page.children.length - 1].id : after;
    if (entry) { entry.last = last; entry.more = page.more; }
    if (page.more) {
      const b = el('button', 'more', 'more…');
      b.type = 'button';
      b.addEventListener('click', () => loadChildren(container, parent, last, depth, entry));
      container.append(b);
    }
    if (page.children.length) treeChanged();
  }

  const rootEntry = { last: null, more: false };
  async function toggle(entry) {
    if (!entry.node.has_children) return;
    entry.open = !entry.open;
    entry.kidsEl.hidden = !entry.open;
    entry.rowEl.querySelector('.tw').textContent = entry.open ? '▾' : '▸';
    if (entry.open && !entry.loaded) {
      entry.loaded = true;
      await loadChildren(entry.kidsEl, entry.node.id, null, entry.depth + 1, entry);
    }
    treeChanged();
  }

  function treeChanged() {
    if (S.mode !== 'tree' || !S.sum) return;
    buildLayout(); renderLabels(); schedule();
  }

  async function refreshTree() {
    const tree = $('tree');
    if (!rootEntry.started) {
      rootEntry.started = true;
      await loadChildren(tree, null, null, 0, rootEntry);
      return;
    }
    // New roots, and new children of open nodes whose list was complete, appear as the file grows.
    if (!rootEntry.more) await loadChildren(tree, null, rootEntry.last, 0, rootEntry);
    // Records shown as open may have ended since.
    const open = [...treeNodes.values()].filter((e) => e.node.end === null).slice(0, 50);
    for (const entry of open) {
      try {
        const r = await src.record(entry.node.id);
        entry.node.end = r.end;
        entry.rowEl.querySelector('.du').textContent = durationText(entry.node);
      } catch (e) { /* shown again on the next poll */ }
    }
    for (const entry of treeNodes.values()) {
      if (entry.open && entry.loaded && !entry.more) {
        await loadChildren(entry.kidsEl, entry.node.id, entry.last, entry.depth + 1, entry);
      }
    }
  }

  // ---- details --------------------------------------------------------------------------------

  function kv(list) {
    const dl = el('dl', 'kv');
    for (const [k, v] of list) {
      if (v === undefined || v === null || v === '') continue;
      dl.append(el('dt', null, k));
      const dd = el('dd');
      if (v instanceof Node) dd.append(v); else dd.textContent = String(v);
      dl.append(dd);
    }
    return dl;
  }
  function pre(value) { return el('pre', null, JSON.stringify(value, null, 2)); }

  async function showDetails(id) {
    const body = $('details-body');
    let r;
    try { r = await src.record(id); } catch (e) { body.replaceChildren(el('p', 'hint', e.message)); return; }
    if (S.selected !== id) return;
    const line = r.line || {};
    const data = line.data && typeof line.data === 'object' ? line.data : null;
    const parts = [el('h2', null, line.name)];
    const badges = el('div');
    badges.append(el('span', 'badge', r.type));
    if (typeof r.status === 'string') badges.append(el('span', 'badge ' + r.status, r.status));
    if (r.end === null) badges.append(el('span', 'badge running', 'open'));
    parts.push(badges);
    let parentLink = null;
    if (r.parent !== null) {
      parentLink = el('a', 'link', '#' + r.parent);
      parentLink.addEventListener('click', () => select(r.parent, true));
    }
    parts.push(kv([
      ['id', r.id], ['start', fmtCycles(r.start)], ['end', r.end === null ? 'not ended yet' : fmtCycles(r.end)],
      ['duration', r.duration === null ? null : fmtCycles(r.duration)], ['lane', r.lane], ['parent', parentLink],
      ['criticality', data && typeof data.criticality === 'number' ? data.criticality : null],
      ['label', data && typeof data.display_label === 'string' ? data.display_label : null],
      ['description', line.description],
    ]));
    if (data) { parts.push(el('h3', null, 'Data')); parts.push(pre(data)); }
    parts.push(el('h3', null, 'Annotations (' + r.annotations_total + ')'));
    for (const a of r.annotations) {
      const it = el('div', 'item');
      const head = el('div', 'head'); head.append(el('strong', null, a.name), el('span', 'clk', a.description));
      it.append(head, pre(a.data));
      parts.push(it);
    }
    parts.push(el('h3', null, 'Events (' + r.events_total + ')'));
    for (const ev of r.events) {
      const it = el('div', 'item');
      const head = el('div', 'head');
      head.append(el('span', 'clk', fmtNum(ev.clk)), el('strong', null, ev.name));
      const sev = ev.data && typeof ev.data.severity === 'string' ? ev.data.severity : null;
      if (sev) head.append(el('span', 'sev ' + sev, sev));
      it.append(head);
      if (ev.description) it.append(el('div', 'hint', ev.description));
      if (ev.data !== undefined && ev.data !== null) it.append(pre(ev.data));
      parts.push(it);
    }
    if (r.events_total > r.events.length) parts.push(el('p', 'hint', 'first ' + r.events.length + ' shown'));
    body.replaceChildren(...parts);
    body.dataset.id = r.id;
  }

  async function select(id, reveal) {
    S.selected = id;
    for (const e of document.querySelectorAll('.node.selected')) e.classList.remove('selected');
    const t = treeNodes.get(id);
    if (t) t.rowEl.classList.add('selected');
    if (S.mode === 'tree') renderLabels();
    draw();
    await showDetails(id);
    if (!reveal) return;
    let r;
    try { r = await src.record(id); } catch (e) { return; }
    const end = r.end === null ? S.extent[1] : r.end;
    if (r.start < S.t0 || end > S.t1 || end - r.start < (S.t1 - S.t0) / 50) {
      const span = Math.max(10, (end - r.start) * 1.6);
      setView(r.start - (span - (end - r.start)) / 2, r.start - (span - (end - r.start)) / 2 + span, false);
    }
    const row = S.layout.find((e) => (e.kind === 'row' && e.row === r.row) || (e.kind === 'rec' && e.row === r.id));
    if (row) {
      const [, h] = cssSize(canvas);
      if (row.y < S.scrollY || row.y + row.h > S.scrollY + h) {
        S.scrollY = clamp(row.y - h / 3, 0, Math.max(0, S.height - h));
        renderLabels();
      }
    }
    schedule();
  }

  // ---- search ---------------------------------------------------------------------------------

  async function runSearch(q) {
    const box = $('results');
    box.replaceChildren(el('div', 'hint', 'searching…'));
    box.hidden = false; $('tree').hidden = true; $('side-back').hidden = false;
    $('side-title').textContent = 'Search';
    let res;
    try { res = await src.search(q); } catch (e) { box.replaceChildren(el('div', 'hint', e.message)); return; }
    const items = res.results.map((n) => {
      const row = el('div', 'node');
      row.dataset.id = n.id;
      row.append(el('span', 'tw', ''), el('span', 'nm', n.name), el('span', 'ty', n.type), el('span', 'du', durationText(n)));
      row.addEventListener('click', () => {
        for (const e of box.querySelectorAll('.selected')) e.classList.remove('selected');
        row.classList.add('selected');
        select(n.id, true);
      });
      return row;
    });
    const head = el('div', 'hint', res.results.length + ' result' + (res.results.length === 1 ? '' : 's') + (res.complete ? '' : ' (first ones)'));
    head.style.padding = '2px 10px';
    box.replaceChildren(head, ...items);
  }

  // ---- interaction ----------------------------------------------------------------------------

  function hitAt(x, y) {
    for (let i = S.hits.length - 1; i >= 0; i--) {
      const h = S.hits[i];
      if (x >= h.x0 - 1 && x <= h.x1 + 1 && y >= h.y0 && y <= h.y1) return h;
    }
    return null;
  }
  function localXY(ev) { const r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }

  let drag = null;
  canvas.addEventListener('mousedown', (ev) => {
    canvas.focus();
    drag = { x: ev.clientX, y: ev.clientY, t0: S.t0, t1: S.t1, sy: S.scrollY, moved: false };
    canvas.classList.add('dragging');
  });
  window.addEventListener('mousemove', (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        const [w, h] = cssSize(canvas);
        const span = drag.t1 - drag.t0;
        setView(drag.t0 - dx / w * span, drag.t1 - dx / w * span, false);
        S.scrollY = clamp(drag.sy - dy, 0, Math.max(0, S.height - h));
        renderLabels();
      }
      return;
    }
    if (ev.target !== canvas) { $('tooltip').hidden = true; return; }
    const [x, y] = localXY(ev);
    const hit = hitAt(x, y);
    const tip = $('tooltip');
    if (!hit) { tip.hidden = true; return; }
    let text;
    if (hit.bar) {
      const b = hit.bar;
      text = b[7] > 1
        ? fmtNum(b[7]) + ' records (click to zoom in)\n' + fmtNum(b[0]) + ' – ' + fmtNum(b[1])
        : (b[9] !== null ? b[9] + '\n' : '') + S.types[b[3]] + ' #' + b[2] + '\n' + fmtNum(b[0]) + ' – ' + fmtNum(b[1])
          + ' (' + fmtCycles(b[1] - b[0]) + ')' + (b[8] ? ', open' : '') + (b[5] ? '\nstatus: ' + STATUS[b[5]] : '')
          + (b[6] !== null ? '\ncriticality: ' + b[6].toFixed(2) : '');
    } else {
      const m = hit.marker;
      text = (m[2] > 1 ? m[2] + ' events from ' : 'event at ') + fmtNum(m[0]) + (m[4] ? '\nseverity: ' + SEVERITY[m[4]] : '')
        + (m[6] !== null ? '\nicon: ' + S.icons[m[6]] : '') + '\nrecord #' + m[7];
    }
    tip.textContent = text;
    const mr = $('main').getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - mr.left + 12, mr.width - 300) + 'px';
    tip.style.top = (ev.clientY - mr.top + 14) + 'px';
    tip.hidden = false;
  });
  window.addEventListener('mouseup', (ev) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    canvas.classList.remove('dragging');
    if (moved || ev.target !== canvas) return;
    const [x, y] = localXY(ev);
    const hit = hitAt(x, y);
    if (!hit) return;
    if (hit.bar && hit.bar[7] > 1) {
      const b = hit.bar, span = Math.max(10, (b[1] - b[0]) * 1.2);
      setView(b[0] - (span - (b[1] - b[0])) / 2, b[0] - (span - (b[1] - b[0])) / 2 + span, false);
    } else if (hit.bar) select(hit.bar[2], false);
    else select(hit.marker[7], false);
  });
  canvas.addEventListener('dblclick', (ev) => {
    const [x, y] = localXY(ev);
    const hit = hitAt(x, y);
    if (hit && hit.bar) {
      const b = hit.bar, span = Math.max(10, (b[1] - b[0]) * 1.2);
      setView(b[0] - (span - (b[1] - b[0])) / 2, b[0] - (span - (b[1] - b[0])) / 2 + span, false);
    }
  });
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const [x] = localXY(ev);
    if (ev.ctrlKey || ev.metaKey) zoom(Math.pow(1.0015, ev.deltaY), x);
    else if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) pan((ev.shiftKey ? ev.deltaY : ev.deltaX) / 800);
    else {
      const [, h] = cssSize(canvas);
      S.scrollY = clamp(S.scrollY + ev.deltaY, 0, Math.max(0, S.height - h));
      renderLabels(); schedule();
    }
  }, { passive: false });
  window.addEventListener('keydown', (ev) => {
    if (ev.target instanceof HTMLInputElement) return;
    const k = ev.key;
    if (k === '+' || k === '=' || k === 'w' || k === 'W') zoom(0.5);
    else if (k === '-' || k === '_' || k === 's' || k === 'S') zoom(2);
    else if (k === 'a' || k === 'A' || k === 'ArrowLeft') pan(-0.25);
    else if (k === 'd' || k === 'D' || k === 'ArrowRight') pan(0.25);
    else if (k === '0' || k === 'Home') fit();
    else if (k === 'Escape') { S.selected = null; draw(); }
    else return;
    ev.preventDefault();
  });
  function setMode(mode) {
    S.mode = mode;
    $('mode-lanes').classList.toggle('active', mode === 'lanes');
    $('mode-tree').classList.toggle('active', mode === 'tree');
    S.scrollY = 0; S.win = null;
    if (S.sum) { buildLayout(); renderLabels(); schedule(); }
  }
  $('mode-lanes').addEventListener('click', () => setMode('lanes'));
  $('mode-tree').addEventListener('click', () => setMode('tree'));
  $('zoom-in').addEventListener('click', () => zoom(0.5));
  $('zoom-out').addEventListener('click', () => zoom(2));
  $('zoom-fit').addEventListener('click', fit);
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = $('search').value.trim();
    if (q) runSearch(q);
  });
  $('side-back').addEventListener('click', () => {
    $('results').hidden = true; $('tree').hidden = false; $('side-back').hidden = true;
    $('side-title').textContent = 'Records';
  });
  window.addEventListener('resize', () => { if (S.sum) { buildLayout(); renderLabels(); schedule(); } });
  if (!src.live) $('follow').parentElement.hidden = true;

  // For tests and for people poking at the page from the console.
  window.jetsViewer = {
    state: () => ({
      t0: S.t0, t1: S.t1, extent: S.extent.slice(), version: S.version, selected: S.selected,
      drawn: Object.assign({}, S.drawn), rows: S.layout.filter((e) => e.kind !== 'lane').length, mode: S.mode,
      records: S.sum ? S.sum.counts.records : 0, busy: inFlight || pending,
    }),
    // Where a drawn bar of record `id` is, in page coordinates (for clicking it).
    barRect: (id) => {
      const h = S.hits.find((x) => x.bar && x.bar[2] === String(id) && x.bar[7] === 1);
      if (!h) return null;
      const r = canvas.getBoundingClientRect();
      return { x: r.left + Math.max(0, h.x0), y: r.top + h.y0, w: Math.min(h.x1, r.width) - Math.max(0, h.x0), h: h.y1 - h.y0 };
    },
    setView: (t0, t1) => setView(t0, t1, false),
  };

  pollLoop();
})();

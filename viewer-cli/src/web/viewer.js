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

  // Compact arrays from the server become objects with the field names the summary lists
  // (`layouts`): this is the one place that knows their order.
  let LAYOUT = null;
  function objs(list, fields) {
    return (list || []).map((a) => { const o = {}; fields.forEach((f, i) => { o[f] = a[i]; }); return o; });
  }
  function decodeRows(rows) {
    for (const r of rows) { r.bars = objs(r.bars, LAYOUT.bar); r.markers = objs(r.markers, LAYOUT.marker); }
    return rows;
  }
  function decodeWindow(w) { decodeRows(w.rows); return w; }
  function decodeHost(h) { h.samples = objs(h.samples, LAYOUT.sample); h.speed = objs(h.speed, LAYOUT.speed); return h; }
  function decodePipeline(p) {
    for (const g of p.groups) decodePipeRows(g.rows);
    return p;
  }
  function decodePipeRows(rows) {
    for (const r of rows) { r.stages = objs(r.stages, LAYOUT.stage); r.markers = objs(r.markers, LAYOUT.marker); }
    return rows;
  }

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
      window: (t0, t1, px, rows) => get('window', { t0, t1, px, rows: rows.join(',') }).then(decodeWindow),
      children: (parent, after, limit) => get('children', { parent, after, limit }),
      nodes: (ids) => get('nodes', { ids: ids.join(',') }),
      record: (id) => get('record', { id }),
      search: (q) => get('search', { q, limit: 200 }),
      bars: (ids, t0, t1, px) => get('bars', { ids: ids.join(','), t0, t1, px }).then(decodeWindow),
      host: () => get('host').then(decodeHost),
      pipeline: (t0, t1, px, groups) => get('pipeline', { t0, t1, px, groups: groups.join(',') }).then(decodePipeline),
      jump: (type, clk) => get('jump', { type, clk }),
    };
  }

  // Markers (in clk order) within `reach` cycles of a group's first merged into one with the
  // count and the highest severity, as the server does (VW-MARK-2): the static page holds every
  // event and merges them for the zoom it draws.
  function mergeMarkers(list, reach) {
    const out = [];
    let first = -Infinity;
    for (const m of list) {
      const last = out[out.length - 1];
      if (last && m.clk < first + reach) {
        const merged = Object.assign({}, last, { count: last.count + m.count });
        if ((m.severity ?? -1) > (last.severity ?? -1)) Object.assign(merged, { severity: m.severity, ev: m.ev, style: m.style, color: m.color, icon: m.icon, record: m.record, name: m.name });
        out[out.length - 1] = merged;
      } else { first = m.clk; out.push(m); }
    }
    return out;
  }

  function staticSource(bundle) {
    LAYOUT = bundle.summary.layouts;
    decodeRows(bundle.window.rows);
    decodeHost(bundle.host);
    const records = new Map(bundle.records.map((r) => [r.id, r]));
    const kids = new Map([['', []]]);
    for (const n of bundle.nodes) {
      const p = n.parent === null ? '' : n.parent;
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(n);
    }
    const rows = new Map(bundle.window.rows.map((r) => [String(r.row), r]));
    // Pipeline rows per group, in program order, as `api/pipeline` answers them.
    const pipe = new Map(bundle.pipeline.map((g) => [g.seq, decodePipeRows(g.rows)]));
    const barOf = new Map(), markersOf = new Map();
    for (const r of bundle.window.rows) {
      for (const b of r.bars) barOf.set(b.id, b);
      for (const m of r.markers) {
        if (!markersOf.has(m.record)) markersOf.set(m.record, []);
        markersOf.get(m.record).push(m);
      }
    }
    return {
      live: false,
      summary: async () => bundle.summary,
      window: async (t0, t1, px, rowIds) => ({
        version: bundle.summary.version,
        now: bundle.window.now,
        rows: rowIds.filter((r) => rows.has(String(r))).map((r) => {
          const row = rows.get(String(r));
          return {
            row: r,
            bars: row.bars.filter((b) => b.end >= t0 && b.start < t1),
            markers: mergeMarkers(row.markers.filter((m) => m.clk >= t0 && m.clk < t1).sort((a, b) => a.clk - b.clk), (t1 - t0) / px * 8),
          };
        }),
      }),
      children: async (parent, after, limit) => {
        const list = kids.get(parent === null || parent === undefined ? '' : parent) || [];
        const from = after === null || after === undefined ? 0 : list.findIndex((n) => n.id === after) + 1;
        return { children: list.slice(from, from + limit), more: from + limit < list.length };
      },
      record: async (id) => {
        if (!records.has(id)) throw new Error('no record with id ' + id);
        return records.get(id);
      },
      search: async (q) => {
        const lq = q.toLowerCase();
        const results = bundle.nodes.filter((n) => n.name.toLowerCase().includes(lq) || n.type.toLowerCase().includes(lq));
        return { results: results.slice(0, 200).map((n) => Object.assign({ clk: n.start, event: null }, n)), complete: results.length <= 200 };
      },
      host: async () => bundle.host,
      // Rows FIRST..FIRST+COUNT of each group ("SEQ:FIRST:COUNT"), markers merged for this zoom.
      pipeline: async (t0, t1, px, ranges) => ({
        version: bundle.summary.version,
        now: bundle.window.now,
        groups: ranges.map((range) => {
          const [seq, first, count] = range.split(':').map(Number);
          const list = pipe.get(seq) || [];
          const reach = (t1 - t0) / px * 8;
          return { seq, rows: list.slice(first, first + count).map((r) => Object.assign({}, r, { markers: mergeMarkers(r.markers, reach) })) };
        }),
      }),
      // The first row of each group of `type` starting at or after `clk` (a binary search, as
      // `api/jump` does: rows of a group start in program order).
      jump: async (type, clk) => ({
        rows: bundle.summary.groups.filter((g) => g.rtype === type).map((g) => {
          const list = pipe.get(g.seq) || [];
          let lo = 0, hi = list.length;
          while (lo < hi) { const mid = (lo + hi) >> 1; if (list[mid].start < clk) lo = mid + 1; else hi = mid; }
          return [g.seq, lo];
        }),
      }),
      nodes: async (ids) => ({ nodes: bundle.nodes.filter((n) => ids.includes(n.id)) }),
      bars: async (ids, t0, t1, px) => ({
        version: bundle.summary.version,
        rows: ids.map((id) => {
          const b = barOf.get(id);
          return {
            row: id,
            bars: b && b.end >= t0 && b.start < t1 ? [b] : [],
            markers: mergeMarkers((markersOf.get(id) || []).filter((m) => m.clk >= t0 && m.clk < t1).sort((a, b) => a.clk - b.clk), (t1 - t0) / px * 8),
          };
        }),
      }),
    };
  }

  const dataEl = $('jets-data');
  const src = dataEl ? staticSource(JSON.parse(dataEl.textContent)) : httpSource();

  // ---- state ----------------------------------------------------------------------------------

  // A row: the bar on top, markers in the band below it, so markers never cover a bar's text.
  const ROW_H = 22, LANE_H = 22, BAR_H = 13, PIPE_H = 18;
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#8cd17d', '#a0cbe8', '#ffbe7d', '#79706e'];
  // Colors by severity name; the names themselves (and their codes) come from the server's
  // summary (`vocab`, from jets_vocab), never typed here.
  const SEV_COLOR = { none: '#475569', info: '#2563eb', warning: '#d97706', error: '#dc2626' };
  // VOCAB.status[code] is a status's name; CODE.status.flushed its code.
  let VOCAB = { status: [], severity: [], marker_style: [] }, CODE = { status: {}, severity: {}, marker_style: {} };
  function setVocab(v) {
    VOCAB = v;
    CODE = {};
    for (const [k, names] of Object.entries(v)) CODE[k] = Object.fromEntries(names.map((n, i) => [n, i]));
  }
  const nameOf = (set, code) => (code === null || code === undefined ? null : VOCAB[set][code]);

  const S = {
    mode: 'lanes', sum: null, version: -1, extent: [0, 1], t0: 0, t1: 1, fitted: true,
    layout: [], height: 0, scrollY: 0, collapsed: new Set(), win: null, winKey: '',
    selected: null, drawn: { bars: 0, clusters: 0, markers: 0, labels: 0 }, hits: [],
    mhz: null, types: [], icons: [], host: null, hostVersion: -1, error: null, ticks: [],
    pipe: { type: null, groups: [], collapsed: new Set(), win: null, visible: [] }, eventNames: [],
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
    // As many decimals as the step needs to be exact (a 2.5 µs step needs one), so neighbouring
    // ticks never round to the same or a wrong label.
    const step = stepSeconds / scale;
    let decimals = 0;
    while (decimals < 6 && Math.abs(Math.round(step * 10 ** decimals) - step * 10 ** decimals) > 1e-6 * 10 ** decimals) decimals++;
    return (seconds / scale).toFixed(decimals) + ' ' + unit;
  }
  function fmtCycles(c) {
    let s = fmtNum(c) + ' cyc';
    if (S.mhz) s += ' (' + fmtTime(c / (S.mhz * 1e6)) + ')';
    return s;
  }
  function colorOf(c) { return '#' + (c >>> 0).toString(16).padStart(6, '0'); }
  function barColor(b) { return b.color !== null ? colorOf(b.color) : PALETTE[b.rtype % PALETTE.length]; }
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

  // Pipeline mode: a header per group (the instructions of one parent), then one row per
  // instruction. Groups may hold millions of rows, so rows are never listed: the visible ones are
  // computed from the scroll position.
  function pipeLayout() {
    const out = [];
    let y = 0;
    for (const g of S.pipe.groups) {
      out.push({ kind: 'group', seq: g.seq, label: g.label, count: g.count, y, h: LANE_H });
      y += LANE_H;
      if (S.pipe.collapsed.has(g.seq)) continue;
      out[out.length - 1].rowsY = y;
      y += g.count * PIPE_H;
    }
    return [out, y];
  }
  function pipeVisible() {
    const [, h] = cssSize(canvas);
    const vis = [];
    for (const g of S.layout) {
      if (g.rowsY === undefined) continue;
      const k0 = Math.max(0, Math.floor((S.scrollY - g.rowsY) / PIPE_H));
      const k1 = Math.min(g.count, Math.ceil((S.scrollY + h - g.rowsY) / PIPE_H));
      if (k1 > k0) vis.push({ g, k0, n: k1 - k0 });
    }
    return vis;
  }

  function buildLayout() {
    if (S.mode === 'pipeline') {
      [S.layout, S.height] = pipeLayout();
      const [, h] = cssSize(canvas);
      S.scrollY = clamp(S.scrollY, 0, Math.max(0, S.height - h));
      return;
    }
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
    return S.layout.filter((e) => (e.kind === 'row' || e.kind === 'rec') && e.y + e.h > S.scrollY && e.y < S.scrollY + h);
  }

  function renderLabels() {
    const [, h] = cssSize(canvas);
    labelsEl.replaceChildren();
    if (S.mode === 'pipeline') { renderPipeLabels(h); return; }
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
        d.append(el('span', null, S.collapsed.has(lane.label) ? '▸' : '▾'), el('span', 'nm', e.label),
          el('span', 'cnt', e.rows + (e.rows === 1 ? ' row' : ' rows')));
        d.title = e.label + ' (click to collapse or expand)';
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

  function renderPipeLabels(h) {
    const rowsBy = pipeRows();
    for (const e of S.layout) {
      if (e.y + e.h > S.scrollY && e.y < S.scrollY + h) {
        const d = el('div', 'lane');
        d.style.top = (e.y - S.scrollY) + 'px';
        d.append(el('span', null, S.pipe.collapsed.has(e.seq) ? '▸' : '▾'), el('span', 'nm', e.label),
          el('span', 'cnt', fmtNum(e.count)));
        d.title = e.label + ' (click to collapse or expand)';
        d.addEventListener('click', () => {
          if (S.pipe.collapsed.has(e.seq)) S.pipe.collapsed.delete(e.seq); else S.pipe.collapsed.add(e.seq);
          buildLayout(); renderLabels(); schedule();
        });
        labelsEl.append(d);
      }
    }
    for (const v of pipeVisible()) {
      for (let k = v.k0; k < v.k0 + v.n; k++) {
        const r = rowsBy.get(v.g.seq + ':' + k);
        const flushed = r && r.status === CODE.status.flushed;
        const d = el('div', 'rowlabel pipelabel' + (flushed ? ' flushed' : '') + (r && S.selected === r.id ? ' selected' : ''));
        d.style.top = (v.g.rowsY + k * PIPE_H - S.scrollY) + 'px';
        d.style.height = PIPE_H + 'px'; d.style.lineHeight = PIPE_H + 'px';
        d.append(el('span', 'k', fmtNum(k)), el('span', null, r ? r.name : ''));
        if (r) { d.title = r.name + ' #' + r.id; d.addEventListener('click', () => select(r.id, false)); }
        labelsEl.append(d);
      }
    }
  }
  function pipeRows() {
    const m = new Map();
    if (S.pipe.win) for (const g of S.pipe.win.groups) for (const r of g.rows) m.set(g.seq + ':' + r.k, r);
    return m;
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
    const first = Math.ceil(S.t0 / step) * step + 0; // + 0: never a tick labelled -0
    const ticks = [];
    for (let c = first; c <= S.t1; c += step) {
      const x = Math.round(xOf(c, w)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, h - 8); ctx.lineTo(x, h); ctx.stroke();
      ctx.fillText(fmtNum(c), x + 3, 14);
      const tick = { clk: c, text: fmtNum(c), time: null };
      if (S.mhz) {
        ctx.fillStyle = '#6b7280';
        tick.time = fmtTimeTick(c / (S.mhz * 1e6), step / (S.mhz * 1e6));
        ctx.fillText(tick.time, x + 3, 28);
        ctx.fillStyle = '#374151';
      }
      ticks.push(tick);
    }
    S.ticks = ticks;
    $('range').textContent = fmtNum(S.t1 - S.t0) + ' cycles in view';
    return step;
  }

  // A marker centred at (x, y), 7 px tall. A merged marker (count > 1) takes the color of its
  // highest severity and is drawn as a bar with a dark edge, so it reads as "several" (VW-MARK-2).
  function drawMarker(ctx, m, x, y) {
    const sev = nameOf('severity', m.severity) || 'none';
    const color = m.count > 1 || m.color === null ? SEV_COLOR[sev] : colorOf(m.color);
    const style = nameOf('marker_style', m.style) || (sev === 'error' ? 'diamond' : 'circle');
    if (m.count > 1) {
      ctx.fillStyle = color; ctx.strokeStyle = '#111827'; ctx.lineWidth = 1;
      ctx.fillRect(Math.round(x) - 2, y - 3.5, 5, 7);
      ctx.strokeRect(Math.round(x) - 2.5, y - 4, 6, 8);
      return;
    }
    const r = 3.5;
    ctx.fillStyle = color; ctx.strokeStyle = '#ffffff'; ctx.lineWidth = 1;
    ctx.beginPath();
    if (style === 'line') {
      ctx.strokeStyle = color; ctx.lineWidth = 2;
      ctx.moveTo(x, y - 4); ctx.lineTo(x, y + 4); ctx.stroke();
      ctx.lineWidth = 1;
      return;
    }
    if (style === 'box') ctx.rect(x - r, y - r, 2 * r, 2 * r);
    else if (style === 'diamond') { ctx.moveTo(x, y - r - 1); ctx.lineTo(x + r + 1, y); ctx.lineTo(x, y + r + 1); ctx.lineTo(x - r - 1, y); ctx.closePath(); }
    else ctx.arc(x, y, r, 0, Math.PI * 2);
    ctx.fill(); ctx.stroke();
  }

  // The cycles in [a, b) that capture left out (VW-CAP-1): outside `clk=A..B`, or, with
  // `every=P`, outside every [A + kP, B + kP); and past the last line when a size limit stopped
  // capture there (`stopped_at`, CAP-LIM-1), the run going on. Nothing was captured there, so a
  // record that spans them (an ancestor begun before the window) says nothing of what ran. At
  // most `max` gaps.
  function captureGaps(a, b, max) {
    const cap = S.sum && S.sum.capture;
    if (!cap) return [];
    const stop = cap.stopped_at == null ? b : Math.max(a, Math.min(b, cap.stopped_at));
    const gaps = cap.window ? windowGaps(cap, a, stop, max) : [];
    if (stop < b && gaps.length < max) gaps.push([stop, b]);
    return gaps.filter(([x, y]) => y > x);
  }

  // The gaps of `cap`'s window (repeated every `cap.every`) in [a, b).
  function windowGaps(cap, a, b, max) {
    const [start, end] = cap.window;
    const every = cap.every || 0;
    const gaps = [];
    let at = a;
    // The first window that ends after `a`, then each next one while they start in view.
    for (let k = every ? Math.max(0, Math.floor((a - end) / every) + 1) : 0; at < b && gaps.length < max; k++) {
      const ws = start + k * every, we = end + k * every;
      if (ws > at) gaps.push([at, Math.min(ws, b)]);
      at = Math.max(at, we);
      if (!every) {
        if (at < b) gaps.push([at, b]);
        break;
      }
    }
    return gaps;
  }

  // Shades what `captureGaps` finds in view; returns how many gaps it shaded. Windows that repeat
  // more often than every 4 pixels are not drawn one by one (a grey wash with nothing to read):
  // the badge and the status bar still say the trace is a part of the run.
  function shadeOutsideCapture(ctx, w, h) {
    const cap = S.sum && S.sum.capture;
    if (!cap || (!cap.window && cap.stopped_at == null)) return 0;
    if (cap.every && (S.t1 - S.t0) / cap.every > w / 4) return 0;
    const gaps = captureGaps(S.t0, S.t1, 1000);
    ctx.fillStyle = 'rgba(100, 116, 139, 0.14)';
    for (const [a, b] of gaps) {
      const x0 = Math.max(0, xOf(a, w)), x1 = Math.min(w, xOf(b, w));
      if (x1 > x0) ctx.fillRect(x0, 0, x1 - x0, h);
    }
    return gaps.length;
  }

  function draw() {
    const [ctx, w, h] = prep(canvas);
    const step = drawAxis();
    ctx.clearRect(0, 0, w, h);
    // What was drawn, for tests and measurements: `events` counts what the markers stand for,
    // `merged` the markers that stand for more than one event.
    const drawn = { bars: 0, clusters: 0, markers: 0, labels: 0, severities: {}, events: 0, merged: 0 };
    const hits = [];
    // Grid lines on the axis ticks.
    ctx.strokeStyle = '#f0f2f5';
    for (let c = Math.ceil(S.t0 / step) * step; c <= S.t1; c += step) {
      const x = Math.round(xOf(c, w)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, h); ctx.stroke();
    }
    drawn.outside = shadeOutsideCapture(ctx, w, h);
    const rows = new Map();
    if (S.win) for (const r of S.win.rows) rows.set(String(r.row), r);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    if (S.mode === 'pipeline') { drawPipeline(ctx, w, h, drawn, hits); S.drawn = drawn; S.hits = hits; drawHost(); return; }
    for (const e of S.layout) {
      const y = e.y - S.scrollY;
      if (y + e.h <= 0 || y >= h) continue;
      if (e.kind === 'lane') {
        ctx.fillStyle = '#eef1f5'; ctx.fillRect(0, y, w, e.h);
        ctx.fillStyle = '#dde1e7'; ctx.fillRect(0, y + e.h - 1, w, 1);
        continue;
      }
      const data = rows.get(String(e.row));
      if (!data) continue;
      const top = y + 2;
      for (const b of data.bars) {
        const x0 = xOf(b.start, w), x1 = xOf(b.end, w);
        if (x1 < -1 || x0 > w + 1) continue;
        const bx = Math.max(-2, x0), bw = Math.max(1, Math.min(w + 2, x1) - bx);
        const color = barColor(b);
        const cluster = b.count > 1;
        ctx.globalAlpha = cluster ? 0.55 : (b.status === CODE.status.flushed ? 0.35 : 1); // flushed: faded
        ctx.fillStyle = color;
        ctx.fillRect(bx, top, bw, BAR_H);
        ctx.globalAlpha = 1;
        if (cluster) drawn.clusters++; else drawn.bars++;
        if (!cluster && b.status === CODE.status.stalled && bw > 3) { // stalled: hatched
          ctx.save(); ctx.beginPath(); ctx.rect(bx, top, bw, BAR_H); ctx.clip();
          ctx.strokeStyle = 'rgba(127,29,29,0.55)'; ctx.lineWidth = 1.5;
          for (let sx = bx - BAR_H; sx < bx + bw; sx += 6) { ctx.beginPath(); ctx.moveTo(sx, top + BAR_H); ctx.lineTo(sx + BAR_H, top); ctx.stroke(); }
          ctx.restore();
        }
        if (b.open && bw > 4) { // still open: dashed right edge
          ctx.strokeStyle = '#111827'; ctx.setLineDash([2, 2]);
          ctx.beginPath(); ctx.moveTo(bx + bw - 0.5, top); ctx.lineTo(bx + bw - 0.5, top + BAR_H); ctx.stroke();
          ctx.setLineDash([]);
        }
        if (b.crit !== null && b.crit > 0) { // criticality: a red stripe whose strength is the weight
          ctx.fillStyle = 'rgba(220,38,38,' + (0.25 + 0.75 * b.crit).toFixed(2) + ')';
          ctx.fillRect(bx, top, bw, 3);
        }
        if (S.selected !== null && b.id === S.selected && !cluster) {
          ctx.strokeStyle = '#111827'; ctx.lineWidth = 2;
          ctx.strokeRect(bx + 1, top - 1, Math.max(1, bw - 2), BAR_H + 2); ctx.lineWidth = 1;
        }
        if (b.label !== null && bw > 24) {
          ctx.save(); ctx.beginPath(); ctx.rect(bx + 2, top, bw - 4, BAR_H); ctx.clip();
          ctx.fillStyle = textColorOn(color);
          ctx.fillText(b.label, Math.max(bx, 0) + 3, top + BAR_H / 2 + 0.5);
          ctx.restore();
          drawn.labels++;
        }
        hits.push({ x0: bx, x1: bx + bw, y0: top, y1: top + BAR_H, bar: b, row: e.row });
      }
      for (const m of data.markers) {
        const x = xOf(m.clk, w);
        if (x < -5 || x > w + 5) continue;
        drawMarker(ctx, m, x, top + BAR_H + 3.5);
        countMarker(drawn, m);
        hits.push({ x0: x - 5, x1: x + 5, y0: top + BAR_H, y1: y + ROW_H, marker: m, row: e.row });
      }
    }
    S.drawn = drawn;
    S.hits = hits;
    drawHost();
  }

  function countMarker(drawn, m) {
    drawn.markers++;
    drawn.events += m.count;
    if (m.count > 1) drawn.merged++;
    const sev = nameOf('severity', m.severity) || 'none';
    drawn.severities[sev] = (drawn.severities[sev] || 0) + 1;
  }

  // Pipeline mode: per instruction, its stages as segments from each stage event to the next (or
  // the end), named in every cycle when a cycle is at least 12 px wide, else once when it fits;
  // the cycles after a warning or error inside a stage hatched (a stall); a flushed instruction
  // faded and crossed at its end, a retired one closed with a tick (VW-PIPE-2).
  function drawPipeline(ctx, w, h, drawn, hits) {
    const cw = w / (S.t1 - S.t0);
    const rowsBy = pipeRows();
    drawn.stageLabels = 0; drawn.stageNames = []; drawn.stalls = 0; drawn.flushes = 0;
    const names = new Set();
    for (const e of S.layout) {
      const y = e.y - S.scrollY;
      if (y + e.h > 0 && y < h) {
        ctx.fillStyle = '#eef1f5'; ctx.fillRect(0, y, w, e.h);
        ctx.fillStyle = '#dde1e7'; ctx.fillRect(0, y + e.h - 1, w, 1);
      }
    }
    for (const v of pipeVisible()) {
      for (let k = v.k0; k < v.k0 + v.n; k++) {
        const r = rowsBy.get(v.g.seq + ':' + k);
        if (!r) continue;
        const y = v.g.rowsY + k * PIPE_H - S.scrollY;
        const top = y + 1, bh = PIPE_H - 6;
        const flushed = r.status === CODE.status.flushed;
        ctx.globalAlpha = flushed ? 0.45 : 1;
        if (!r.stages.length) { // no stages: the record's bar
          const x0 = xOf(r.start, w), x1 = Math.max(x0 + 1, xOf(r.end, w));
          ctx.fillStyle = '#94a3b8'; ctx.fillRect(x0, top, x1 - x0, bh);
        }
        r.stages.forEach((st, i) => {
          const end = i + 1 < r.stages.length ? r.stages[i + 1].clk : r.end;
          const x0 = xOf(st.clk, w), x1 = Math.max(x0 + 1, xOf(Math.max(end, st.clk + (i + 1 < r.stages.length ? 0 : 1)), w));
          if (x1 < 0 || x0 > w) return;
          const color = PALETTE[st.name % PALETTE.length];
          ctx.fillStyle = color; ctx.fillRect(x0, top, x1 - x0, bh);
          ctx.fillStyle = 'rgba(255,255,255,0.6)'; ctx.fillRect(Math.round(x0), top, 1, bh);
          // A warning or error inside a stage: its cycles after the first are a stall.
          const stall = r.markers.find((m) => m.severity !== null && m.clk >= st.clk && m.clk < end);
          if (stall && end - st.clk > 1) {
            drawn.stalls++;
            const sx = xOf(Math.max(stall.clk, st.clk + 1), w);
            ctx.save(); ctx.beginPath(); ctx.rect(sx, top, x1 - sx, bh); ctx.clip();
            ctx.strokeStyle = 'rgba(127,29,29,0.6)'; ctx.lineWidth = 1.5;
            for (let hx = sx - bh; hx < x1; hx += 5) { ctx.beginPath(); ctx.moveTo(hx, top + bh); ctx.lineTo(hx + bh, top); ctx.stroke(); }
            ctx.restore();
          }
          const name = S.eventNames[st.name] || '';
          ctx.fillStyle = textColorOn(color);
          ctx.font = '10px system-ui, sans-serif';
          if (cw >= 12) {
            for (let c = Math.max(st.clk, Math.floor(S.t0)); c < Math.max(end, st.clk + 1) && c <= S.t1; c++) {
              const cx = xOf(c, w);
              ctx.save(); ctx.beginPath(); ctx.rect(cx, top, cw, bh); ctx.clip();
              ctx.fillText(name, cx + 1.5, top + bh / 2 + 0.5);
              ctx.restore();
              drawn.stageLabels++; names.add(name);
            }
          } else if (x1 - x0 >= ctx.measureText(name).width + 4) {
            ctx.fillText(name, x0 + 2, top + bh / 2 + 0.5);
            drawn.stageLabels++; names.add(name);
          }
          drawn.bars++;
        });
        ctx.globalAlpha = 1;
        const xe = xOf(r.end, w);
        if (!r.open) {
          ctx.strokeStyle = flushed ? '#dc2626' : '#111827'; ctx.lineWidth = flushed ? 2 : 1.5;
          ctx.beginPath();
          if (flushed) { drawn.flushes++; ctx.moveTo(xe - 4, top); ctx.lineTo(xe + 4, top + bh); ctx.moveTo(xe + 4, top); ctx.lineTo(xe - 4, top + bh); }
          else { ctx.moveTo(xe, top); ctx.lineTo(xe, top + bh); }
          ctx.stroke(); ctx.lineWidth = 1;
        }
        if (S.selected === r.id) {
          ctx.strokeStyle = '#111827'; ctx.lineWidth = 2;
          ctx.strokeRect(xOf(r.start, w), top - 1, Math.max(2, xe - xOf(r.start, w)), bh + 2); ctx.lineWidth = 1;
        }
        hits.push({ x0: xOf(r.start, w), x1: xe, y0: top, y1: top + bh, pipe: r });
        for (const m of r.markers) {
          const x = xOf(m.clk, w);
          if (x < -5 || x > w + 5) continue;
          drawMarker(ctx, m, x, top + bh + 2.5);
          countMarker(drawn, m);
          hits.push({ x0: x - 5, x1: x + 5, y0: top + bh - 2, y1: y + PIPE_H, marker: m });
        }
      }
    }
    drawn.stageNames = [...names];
  }

  function drawHost() {
    if (!S.host || !S.host.samples || S.host.samples.length === 0) { $('host').hidden = true; return; }
    $('host').hidden = false;
    const [ctx, w, h] = prep(hostCanvas);
    ctx.clearRect(0, 0, w, h);
    const series = [
      { name: 'CPU %', pts: S.host.samples.filter((s) => s.cpu_usage !== null).map((s) => [s.clk, s.cpu_usage]), color: '#2563eb' },
      { name: 'RSS MiB', pts: S.host.samples.filter((s) => s.mem_rss_kb !== null).map((s) => [s.clk, s.mem_rss_kb / 1024]), color: '#7c3aed' },
      { name: 'cycles/s', pts: (S.host.speed || []).flatMap((s) => [[s.start_clk, s.cycles_per_sec], [s.end_clk, s.cycles_per_sec]]), color: '#059669' },
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
    if (S.mode === 'pipeline') return requestPipeline();
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

  async function requestPipeline() {
    const vis = pipeVisible();
    const [w] = cssSize(canvas);
    const t0 = Math.max(0, Math.floor(S.t0)), t1 = Math.max(t0 + 1, Math.ceil(S.t1));
    inFlight = true;
    draw();
    try {
      S.pipe.win = vis.length ? await src.pipeline(t0, t1, Math.round(w), vis.map((v) => v.g.seq + ':' + v.k0 + ':' + v.n)) : { groups: [] };
      S.error = null;
    } catch (e) { S.error = 'pipeline: ' + e.message; }
    inFlight = false;
    const pj = S.pendingJump;
    const at = pj && pipeRows().get(pj.seq + ':' + pj.k);
    if (at) { S.pendingJump = null; setView(at.start - pj.span * 0.2, at.start + pj.span * 0.8, false); }
    renderLabels(); draw(); renderStatus();
    if (dirty) { dirty = false; requestWindow(); }
  }

  // Jump to a cycle ("1234") or an instruction ("#1234", its position in program order): in
  // pipeline mode the rows there come from the index by a binary search (api/jump).
  async function jump(text) {
    $('follow').checked = false; // the user chose where to look: stop following the end
    const t = text.trim().replace(/[,_\s]/g, '');
    const byRow = t.startsWith('#');
    const n = Number(byRow ? t.slice(1) : t);
    if (!Number.isFinite(n) || n < 0) { S.error = 'jump: not a cycle or #instruction: ' + text; renderStatus(); return; }
    if (S.mode !== 'pipeline') {
      if (byRow) { S.error = 'jump: #instruction needs pipeline mode'; renderStatus(); return; }
      const span = Math.min(S.t1 - S.t0, 1000);
      setView(n - span / 2, n + span / 2, false);
      return;
    }
    let target = null;
    if (byRow) {
      const g = S.layout.find((e) => e.rowsY !== undefined && n < e.count);
      if (g) target = { g, k: n };
    } else if (src.jump) {
      const res = await src.jump(S.pipe.type, n);
      for (const [seq, k] of res.rows) {
        const g = S.layout.find((e) => e.seq === seq && e.rowsY !== undefined);
        if (g && k < g.count) { target = { g, k }; break; }
      }
    }
    if (!target) { S.error = 'jump: no instruction there'; renderStatus(); return; }
    const [, h] = cssSize(canvas);
    S.scrollY = clamp(target.g.rowsY + target.k * PIPE_H - h / 4, 0, Math.max(0, S.height - h));
    const span = Math.min(S.t1 - S.t0, 50); // cycles wide enough (≥ 12 px) to name every stage
    if (byRow) {
      // The row's start is not known before the answer: ask for it, then centre on it.
      S.pendingJump = { seq: target.g.seq, k: target.k, span };
    } else setView(n - span * 0.2, n + span * 0.8, false);
    S.jumped = { seq: target.g.seq, k: target.k };
    renderLabels(); schedule();
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
    S.eventNames = sum.event_names;
    LAYOUT = sum.layouts;
    setVocab(sum.vocab);
    updatePipeTypes(sum);
    if (first) {
      for (const lane of sum.lanes) if (lane.host) S.collapsed.add(lane.label);
      renderTitle();
    }
    if (changed || first) {
      buildLayout();
      renderLabels();
      const follow = $('follow').checked;
      if (S.mode === 'pipeline' && follow && src.live && sum.following && !S.jumped) {
        // Live follow in pipeline mode: keep the newest instructions and cycles in view.
        const [, h] = cssSize(canvas);
        S.scrollY = Math.max(0, S.height - h);
        const span = S.fitted ? Math.min(200, sum.extent[1] - sum.extent[0] + 1) : S.t1 - S.t0;
        setView(sum.extent[1] - span * 0.9, sum.extent[1] + span * 0.1, false);
        renderLabels();
      } else if (first || S.fitted) fit();
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

  function updatePipeTypes(sum) {
    const sel = $('pipe-type');
    const candidates = sum.types.map((t, i) => [t, i]).filter(([t]) => t.count > 0);
    if (S.pipe.type === null) S.pipe.type = sum.pipeline_type !== null ? sum.pipeline_type : (candidates.length ? candidates[0][1] : null);
    const texts = candidates.map(([t]) => t.name + ' (' + fmtNum(t.count) + ')');
    if ([...sel.options].map((o) => o.textContent).join('\n') !== texts.join('\n')) {
      sel.replaceChildren(...candidates.map(([, i], j) => { const o = el('option', null, texts[j]); o.value = String(i); return o; }));
    }
    sel.value = String(S.pipe.type);
    S.pipe.groups = sum.groups.filter((g) => g.rtype === S.pipe.type);
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
    const cap = S.sum.capture;
    if (cap) parts.push(cap.text);
    const part = $('part');
    part.hidden = !cap;
    if (cap) { part.textContent = cap.badge; part.title = cap.text; }
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
    // Records shown as open may have ended since, and a record shown before its first child
    // arrived gets its expand arrow now.
    const stale = [...treeNodes.values()].filter((e) => e.node.end === null || !e.node.has_children).slice(-2000);
    if (stale.length) {
      try {
        const res = await src.nodes(stale.map((e) => e.node.id));
        for (const n of res.nodes) {
          const entry = treeNodes.get(n.id);
          if (!entry) continue;
          entry.node.end = n.end;
          entry.rowEl.querySelector('.du').textContent = durationText(entry.node);
          if (n.has_children && !entry.node.has_children) {
            entry.node.has_children = true;
            entry.rowEl.querySelector('.tw').textContent = entry.open ? '▾' : '▸';
            if (S.mode === 'tree') renderLabels();
          }
        }
      } catch (e) { /* asked again on the next poll */ }
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

  async function select(id, reveal, at) {
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
    if (at !== undefined && (at < S.t0 || at > S.t1)) {
      const span = Math.min(S.t1 - S.t0, Math.max(100, (end - r.start) * 2));
      setView(at - span / 2, at + span / 2, false);
    } else if (r.start < S.t0 || end > S.t1 || end - r.start < (S.t1 - S.t0) / 50) {
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
      row.dataset.clk = n.clk;
      row.append(el('span', 'tw', ''), el('span', 'nm', n.event ? n.event + ' · ' + n.name : n.name), el('span', 'ty', n.type),
        el('span', 'clk', '@' + fmtNum(n.clk)));
      row.title = (n.event ? 'event ' + n.event + ' of ' : '') + n.name + ' (' + n.type + ') at cycle ' + fmtNum(n.clk);
      row.addEventListener('click', async () => {
        for (const e of box.querySelectorAll('.selected')) e.classList.remove('selected');
        row.classList.add('selected');
        $('follow').checked = false;
        if (S.mode === 'pipeline') { await jump(String(n.clk)); select(n.id, false); } else await select(n.id, true, n.clk);
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
      const status = nameOf('status', b.status);
      text = b.count > 1
        ? fmtNum(b.count) + ' records (click to zoom in)\n' + fmtNum(b.start) + ' – ' + fmtNum(b.end)
        : (b.label !== null ? b.label + '\n' : '') + S.types[b.rtype] + ' #' + b.id + '\n' + fmtNum(b.start) + ' – ' + fmtNum(b.end)
          + ' (' + fmtCycles(b.end - b.start) + ')' + (b.open ? ', open' : '') + (status ? '\nstatus: ' + status : '')
          + (b.crit !== null ? '\ncriticality: ' + b.crit.toFixed(2) : '');
    } else if (hit.pipe) {
      const r = hit.pipe;
      const status = nameOf('status', r.status);
      text = r.name + ' #' + r.id + '\n' + fmtNum(r.start) + ' – ' + fmtNum(r.end) + (status ? ' (' + status + ')' : '')
        + '\n' + r.stages.map((st) => (S.eventNames[st.name] || '?') + '@' + fmtNum(st.clk)).join(' ');
    } else {
      const m = hit.marker;
      const sev = nameOf('severity', m.severity);
      text = (m.count > 1 ? m.count + ' events from ' : (S.eventNames[m.name] || 'event') + ' at ') + fmtNum(m.clk)
        + (sev ? '\n' + (m.count > 1 ? 'highest severity: ' : 'severity: ') + sev : '')
        + (m.icon !== null ? '\nicon: ' + S.icons[m.icon] : '') + '\nrecord #' + m.record;
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
    if (hit.bar && hit.bar.count > 1) {
      const b = hit.bar, span = Math.max(10, (b.end - b.start) * 1.2);
      setView(b.start - (span - (b.end - b.start)) / 2, b.start - (span - (b.end - b.start)) / 2 + span, false);
    } else if (hit.bar) select(hit.bar.id, false);
    else if (hit.pipe) select(hit.pipe.id, false);
    else select(hit.marker.record, false);
  });
  canvas.addEventListener('dblclick', (ev) => {
    const [x, y] = localXY(ev);
    const hit = hitAt(x, y);
    if (hit && hit.bar) {
      const b = hit.bar, span = Math.max(10, (b.end - b.start) * 1.2);
      setView(b.start - (span - (b.end - b.start)) / 2, b.start - (span - (b.end - b.start)) / 2 + span, false);
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
    $('mode-pipeline').classList.toggle('active', mode === 'pipeline');
    $('pipe-type').hidden = mode !== 'pipeline';
    S.scrollY = 0; S.win = null; S.pipe.win = null;
    if (S.sum) { buildLayout(); renderLabels(); schedule(); }
  }
  $('mode-lanes').addEventListener('click', () => setMode('lanes'));
  $('mode-tree').addEventListener('click', () => setMode('tree'));
  $('mode-pipeline').addEventListener('click', () => setMode('pipeline'));
  $('pipe-type').addEventListener('change', (ev) => {
    S.pipe.type = Number(ev.target.value);
    if (S.sum) updatePipeTypes(S.sum);
    S.scrollY = 0; S.pipe.win = null; buildLayout(); renderLabels(); schedule();
  });
  $('jump-form').addEventListener('submit', (ev) => { ev.preventDefault(); jump($('jump').value); });
  // The canvas is drawn at its laid-out size: redraw whenever that changes (the host panel
  // appearing on first load, a window resize), so rows and their labels never drift apart.
  if (typeof ResizeObserver === 'function') {
    let last = '';
    new ResizeObserver(() => {
      const [w, h] = cssSize(canvas);
      const key = w + 'x' + h;
      if (key === last || !S.sum) { last = key; return; }
      last = key;
      buildLayout(); renderLabels(); draw(); schedule();
    }).observe(canvas);
  }
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
      drawn: JSON.parse(JSON.stringify(S.drawn)), rows: S.layout.filter((e) => e.kind === 'row' || e.kind === 'rec').length, mode: S.mode,
      records: S.sum ? S.sum.counts.records : 0, busy: inFlight || pending, ticks: S.ticks.slice(), scrollY: S.scrollY,
      canvas: cssSize(canvas), canvasPixels: [canvas.width, canvas.height],
      pipe: { type: S.pipe.type, groups: S.pipe.groups.map((g) => ({ seq: g.seq, count: g.count, label: g.label })),
        rows: S.pipe.win ? S.pipe.win.groups.flatMap((g) => g.rows.map((r) => ({ k: r.k, id: r.id, start: r.start, end: r.end, name: r.name }))) : [] },
    }),
    // Where a drawn bar of record `id` is, in page coordinates (for clicking it).
    barRect: (id) => {
      const h = S.hits.find((x) => (x.bar && x.bar.id === String(id) && x.bar.count === 1) || (x.pipe && x.pipe.id === String(id)));
      if (!h) return null;
      const r = canvas.getBoundingClientRect();
      return { x: r.left + Math.max(0, h.x0), y: r.top + h.y0, w: Math.min(h.x1, r.width) - Math.max(0, h.x0), h: h.y1 - h.y0 };
    },
    // Where a drawn marker of severity `sev` is, in page coordinates (for hovering it).
    markerAt: (sev) => {
      const h = S.hits.find((x) => x.marker && nameOf('severity', x.marker.severity) === sev);
      if (!h) return null;
      const r = canvas.getBoundingClientRect();
      return { x: r.left + (h.x0 + h.x1) / 2, y: r.top + (h.y0 + h.y1) / 2, count: h.marker.count };
    },
    setView: (t0, t1) => setView(t0, t1, false),
    jump: (text) => jump(text),
    setMode: (m) => setMode(m),
    fmtTimeTick: (s, step) => fmtTimeTick(s, step),
  };

  pollLoop();
})();

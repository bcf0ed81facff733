// Measures `jets view` on large traces for the README's Performance section (not a test: the
// machine is shared, so figures are reported, never asserted).
//
//   JETS_BIN=target/release/jets node measure.mjs TRACE...
//
// Per trace: indexing time; server memory (VmHWM and VmRSS from /proc/PID/status once indexed,
// and per record+event above a server that indexed an empty trace); server CPU per query (from
// /proc/PID/stat over REPEAT answers) and answer time from a client, for a search that matches
// nothing, the whole-run lanes window, a 1,000-cycle window, a jump to the middle cycle and the
// pipeline rows there; then in headless Chromium: Enter in the Jump box to the rows drawn, and
// pan / zoom latency (key press to the new answer drawn) in pipeline and lanes modes. One JSON
// object per trace on stdout.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { chromium } from 'playwright-core';

const JETS = process.env.JETS_BIN;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const REPEAT = Number(process.env.REPEAT || 20);
const TICK_MS = 1000 / 100; // USER_HZ: /proc/PID/stat counts CPU time in 10 ms ticks
if (!JETS || !fs.existsSync(JETS)) throw new Error('JETS_BIN must name the jets binary');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'jets-measure-'));

function view(file) {
  const child = spawn(JETS, ['view', '--port', '0', '--no-open', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(l);
      if (m) resolve({ child, url: m[1] }); else reject(new Error('no URL in ' + l));
    });
    child.once('exit', (code) => reject(new Error('jets view exited with ' + code)));
  });
}

function status(pid) {
  const kb = (k) => Number(new RegExp(k + ':\\s+(\\d+) kB').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  return { hwm: kb('VmHWM') * 1024, rss: kb('VmRSS') * 1024 };
}
function cpuMs(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_MS; // utime, stime (fields 14 and 15)
}
const get = async (url, q) => {
  const r = await fetch(url + 'api/' + q);
  if (!r.ok) throw new Error(q + ': ' + r.status + ' ' + (await r.text()));
  return r.json();
};
async function untilDone(url) {
  for (;;) {
    const s = await get(url, 'summary');
    if (s.done && !s.following) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Server CPU per answer (ms) and client-side answer time (median, ms) of query `q`. */
async function query(pid, url, q) {
  await get(url, q); // warm
  const times = [];
  const c0 = cpuMs(pid);
  for (let i = 0; i < REPEAT; i++) {
    const t = performance.now();
    await get(url, q);
    times.push(performance.now() - t);
  }
  const cpu = (cpuMs(pid) - c0) / REPEAT;
  times.sort((a, b) => a - b);
  return { cpu_ms: +cpu.toFixed(2), answer_ms_median: +times[times.length >> 1].toFixed(2), answer_ms_max: +times[times.length - 1].toFixed(2) };
}

async function serverFigures(file) {
  const t = performance.now();
  const { child, url } = await view(file);
  const sum = await untilDone(url);
  const index_s = (performance.now() - t) / 1000;
  await new Promise((r) => setTimeout(r, 500));
  return { child, url, sum, index_s, mem: status(child.pid) };
}

// The baseline: a server that indexed a trace of one record.
const empty = path.join(work, 'empty.jets');
fs.writeFileSync(empty, [
  { type: 'header', version: '2.0', metadata: {} },
  { clk: 0, type: 'record', name: 'r', record_type: 'T', id: 1, parent_id: null, description: '' },
  { clk: 1, type: 'record_end', record_id: 1 }, { type: 'footer' },
].map((l) => JSON.stringify(l) + '\n').join(''));
const base = await serverFigures(empty);
base.child.kill();

const context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(work, 'profile-')), {
  executablePath: CHROMIUM, headless: true, bypassCSP: true, viewport: { width: 1500, height: 850 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});

for (const file of process.argv.slice(2)) {
  const s = await serverFigures(file);
  const { child, url, sum } = s;
  const n = sum.counts.records + sum.counts.events;
  const [e0, e1] = sum.extent;
  const mid = Math.round((e0 + e1) / 2);
  const lanes = sum.lanes.filter((l) => !l.host).flatMap((l) => l.rows.map(([r]) => r)).slice(0, 40);
  const type = sum.pipeline_type;
  const jumpAt = await get(url, `jump?type=${type}&clk=${mid}`);
  const [seq, k] = jumpAt.rows[0];
  const out = {
    file: path.basename(file), bytes: fs.statSync(file).size, records: sum.counts.records, events: sum.counts.events,
    index_s: +s.index_s.toFixed(1),
    index_bytes_per: +(sum.counts.index_bytes / n).toFixed(1),
    vm_hwm_mib: +(s.mem.hwm / 2 ** 20).toFixed(1), vm_rss_mib: +(s.mem.rss / 2 ** 20).toFixed(1),
    empty_vm_hwm_mib: +(base.mem.hwm / 2 ** 20).toFixed(1), empty_vm_rss_mib: +(base.mem.rss / 2 ** 20).toFixed(1),
    hwm_delta_bytes_per: +((s.mem.hwm - base.mem.hwm) / n).toFixed(1),
    rss_delta_bytes_per: +((s.mem.rss - base.mem.rss) / n).toFixed(1),
    queries: {
      search_no_match: await query(child.pid, url, 'search?q=zqxjv-no-such-name&limit=200'),
      window_whole_run: await query(child.pid, url, `window?t0=${e0}&t1=${e1 + 1}&px=1200&rows=${lanes.join(',')}`),
      window_1000_cycles: await query(child.pid, url, `window?t0=${mid}&t1=${mid + 1000}&px=1200&rows=${lanes.join(',')}`),
      jump_middle: await query(child.pid, url, `jump?type=${type}&clk=${mid}`),
      pipeline_40_rows: await query(child.pid, url, `pipeline?t0=${mid - 10}&t1=${mid + 40}&px=1200&groups=${seq}:${Math.max(0, k - 10)}:40`),
    },
  };

  // The browser: the same queries timed from the page, then the user's view of it.
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => window.jetsViewer && window.jetsViewer.state().records > 0 && document.querySelector('#live').textContent === 'complete', null, { timeout: 600000 });
  out.browser_fetch_ms = await page.evaluate(async (qs) => {
    const res = {};
    for (const [name, q] of Object.entries(qs)) {
      await fetch('api/' + q);
      const t = performance.now();
      for (let i = 0; i < 5; i++) await (await fetch('api/' + q)).json();
      res[name] = +((performance.now() - t) / 5).toFixed(1);
    }
    return res;
  }, {
    search_no_match: 'search?q=zqxjv-no-such-name&limit=200',
    jump_middle: `jump?type=${type}&clk=${mid}`,
    pipeline_40_rows: `pipeline?t0=${mid - 10}&t1=${mid + 40}&px=1200&groups=${seq}:${Math.max(0, k - 10)}:40`,
  });
  const idle = () => page.waitForFunction(() => !window.jetsViewer.state().busy);
  await page.click('#mode-pipeline');
  await idle();
  const jumps = [];
  for (const at of [mid, Math.round(e0 + (e1 - e0) / 4), Math.round(e0 + 3 * (e1 - e0) / 4)]) {
    const t = performance.now();
    await page.fill('#jump', String(at));
    await page.press('#jump', 'Enter');
    await page.waitForFunction((at) => { const s = window.jetsViewer.state(); return !s.busy && s.pipe.rows.some((r) => Math.abs(r.start - at) < 50); }, at);
    jumps.push(Math.round(performance.now() - t));
  }
  out.browser_jump_enter_to_drawn_ms = jumps;
  const latency = async (key) => {
    const ms = [];
    for (let i = 0; i < 8; i++) {
      const t = performance.now();
      await page.keyboard.press(key);
      await idle();
      ms.push(Math.round(performance.now() - t));
    }
    ms.sort((a, b) => a - b);
    return { median: ms[ms.length >> 1], max: ms[ms.length - 1] };
  };
  await page.locator('#timeline').focus();
  out.browser_pipeline = { pan: await latency('d'), zoom_out: await latency('-'), zoom_in: await latency('+') };
  await page.click('#mode-lanes');
  await idle();
  await page.locator('#timeline').focus();
  await page.keyboard.press('0');
  await idle();
  out.browser_lanes_whole_run = { zoom_in: await latency('+'), pan: await latency('d'), zoom_out: await latency('-') };
  await page.close();
  child.kill();
  console.log(JSON.stringify(out));
}
await context.close();
fs.rmSync(work, { recursive: true, force: true });

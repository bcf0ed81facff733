// Browser tests of `jets view` and `jets gantt` in real headless Chromium (Debian's, never a
// downloaded one). Run by scripts/test.d/40-viewer-browser.sh with JETS_BIN (the `jets` binary)
// and ARTIFACTS (where screenshots go) set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { NASTY, header, writeTrace } from './trace.mjs';

const JETS = process.env.JETS_BIN;
const ARTIFACTS = process.env.ARTIFACTS || path.join(os.tmpdir(), 'viewer-artifacts');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
assert.ok(JETS && fs.existsSync(JETS), 'JETS_BIN must name the jets binary');
fs.mkdirSync(ARTIFACTS, { recursive: true });

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'jets-view-browser-'));
const children = [];
let context;

before(async () => {
  context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(work, 'profile-')), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1500, height: 850 },
    // The page's Content-Security-Policy forbids eval, which waitForFunction uses.
    bypassCSP: true,
  });
});

after(async () => {
  for (const c of children) c.kill();
  if (context) await context.close();
  fs.rmSync(work, { recursive: true, force: true });
});

/** Starts `jets view FILE` on a free port; resolves to its URL. */
function view(file) {
  const child = spawn(JETS, ['view', '--port', '0', '--no-open', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(l);
      if (m) resolve(m[1]); else reject(new Error('no URL in ' + l));
    });
    child.once('exit', (code) => reject(new Error('jets view exited with ' + code)));
  });
}

async function openPage(url) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(url);
  await page.waitForFunction(() => window.jetsViewer && window.jetsViewer.state().records > 0);
  return { page, errors };
}

const state = (page) => page.evaluate(() => window.jetsViewer.state());
async function settled(page) {
  await page.waitForFunction(() => !window.jetsViewer.state().busy);
  await page.waitForTimeout(50);
  return state(page);
}
const shot = (page, name) => page.screenshot({ path: path.join(ARTIFACTS, name) });

test('renders bars and markers, zooms from the whole run to single cycles and back, opens details', async () => {
  const file = path.join(work, 'pipeline.jets');
  const trace = writeTrace(file, 1500);
  const { page, errors } = await openPage(await view(file));
  await page.waitForFunction((n) => window.jetsViewer.state().records === n, trace.records);
  await page.waitForFunction(() => window.jetsViewer.state().drawn.markers > 0);
  let s = await settled(page);
  assert.equal(s.records, trace.records);
  assert.deepEqual(s.extent, [0, trace.last]);
  assert.ok(s.drawn.bars + s.drawn.clusters > 10, JSON.stringify(s.drawn));
  assert.ok(s.drawn.clusters > 0, 'the whole run is drawn with clusters: ' + JSON.stringify(s.drawn));
  assert.ok(s.drawn.markers > 0);
  await shot(page, 'view-overview.png');
  const whole = s.t1 - s.t0;

  // Zoom in with the keyboard, centred on the canvas, until single cycles (10 cycles in view).
  await page.locator('#timeline').click({ position: { x: 5, y: 3 } });
  for (let i = 0; i < 12; i++) await page.keyboard.press('+');
  s = await settled(page);
  assert.equal(Math.round(s.t1 - s.t0), 10, 'zoomed to 10 cycles');
  assert.equal(s.drawn.clusters, 0, 'no clusters at single-cycle zoom');
  assert.ok(s.drawn.bars > 0 && s.drawn.labels > 0, JSON.stringify(s.drawn));
  await shot(page, 'view-cycles.png');

  // Zoom out with the button and the wheel, then back to the whole run.
  for (let i = 0; i < 4; i++) await page.click('#zoom-out');
  s = await settled(page);
  assert.equal(Math.round(s.t1 - s.t0), 160);
  const box = await page.locator('#timeline').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 60);
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, 400);
  await page.keyboard.up('Control');
  s = await settled(page);
  assert.ok(s.t1 - s.t0 > 160, 'ctrl+wheel zooms out');
  await page.click('#zoom-fit');
  s = await settled(page);
  assert.equal(s.t1 - s.t0, whole);

  // Drag pans.
  await page.evaluate(() => window.jetsViewer.setView(1000, 1200));
  s = await settled(page);
  await page.mouse.move(box.x + 400, box.y + 200);
  await page.mouse.down();
  await page.mouse.move(box.x + 200, box.y + 200, { steps: 5 });
  await page.mouse.up();
  const panned = await settled(page);
  assert.ok(panned.t0 > s.t0 + 10, `dragging left moves later in time (${s.t0} -> ${panned.t0})`);

  // Click a bar (record 61 is instruction 24 of core 1, at cycle 48): its details open.
  await page.evaluate(() => window.jetsViewer.setView(40, 80));
  await settled(page);
  const rect = await page.evaluate(() => window.jetsViewer.barRect('61'));
  assert.ok(rect, 'record 61 is drawn');
  await page.mouse.click(rect.x + rect.w / 2, rect.y + rect.h / 2);
  await page.waitForFunction(() => document.querySelector('#details-body').dataset.id === '61');
  const details = await page.locator('#details-body').innerText();
  assert.match(details, /^instruction 24\nInstruction\nid\n61\n/);
  assert.match(details, /duration\n9 cyc \(9\.00 ns\)/);
  assert.match(details, /duration/);
  assert.equal((await state(page)).selected, '61');
  await shot(page, 'view-details.png');

  // Tree mode: one row per record, expanded from the timeline's own label column.
  await page.click('#mode-tree');
  await page.waitForFunction(() => window.jetsViewer.state().mode === 'tree' && window.jetsViewer.state().rows === 2);
  await page.locator('#labels .treelabel .tw').first().click();
  await page.waitForFunction(() => window.jetsViewer.state().rows > 100);
  await page.evaluate(() => window.jetsViewer.setView(0, 60));
  s = await settled(page);
  assert.ok(s.drawn.bars >= 20 && s.drawn.markers > 0, JSON.stringify(s.drawn));
  const labels = await page.locator('#labels .treelabel').allTextContents();
  assert.equal(labels[0], '▾core0');
  assert.match(labels[1], /^instruction 0$/);
  const treeRect = await page.evaluate(() => window.jetsViewer.barRect('16'));
  assert.ok(treeRect, 'instruction 2 of core 0 is drawn on its own row');
  await page.mouse.click(treeRect.x + treeRect.w / 2, treeRect.y + treeRect.h / 2);
  await page.waitForFunction(() => document.querySelector('#details-body').dataset.id === '16');
  assert.equal(await page.locator('#tree .node.selected .nm').textContent(), 'store 2');
  await shot(page, 'view-tree.png');
  assert.deepEqual(errors, []);
  await page.close();
});

test('names with <script> and quotes render as text', async () => {
  const file = path.join(work, 'nasty.jets');
  writeTrace(file, 30);
  const { page, errors } = await openPage(await view(file));
  await page.waitForSelector('#tree .node');
  const names = await page.locator('#tree .node .nm').allTextContents();
  assert.ok(names.includes(NASTY), JSON.stringify(names));
  assert.equal(await page.locator('#title').textContent(), 'Tiny5 <b>bold</b> · nasty.jets');
  // Select the record whose name and description are markup; open its details.
  await page.locator('#tree .node', { hasText: 'window.__pwned' }).first().click();
  await page.waitForFunction(() => document.querySelector('#details-body h2'));
  assert.equal(await page.locator('#details-body h2').textContent(), NASTY);
  // Search for it.
  await page.fill('#search', '<script>');
  await page.press('#search', 'Enter');
  await page.waitForSelector('#results .node');
  const found = await page.locator('#results .node .nm').allTextContents();
  assert.ok(found.length >= 2 && found.every((t) => t === NASTY), JSON.stringify(found));
  await page.locator('#results .node').nth(1).click();
  await page.waitForFunction(() => document.querySelector('#details-body').dataset.id === '23');
  assert.equal(await page.locator('#details-body h2').textContent(), NASTY);
  // An annotation whose description and data hold markup.
  await page.fill('#search', 'instruction 0');
  await page.press('#search', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('#results .node').length === 2);
  await page.locator('#results .node').nth(1).click();
  await page.waitForFunction(() => document.querySelector('#details-body').dataset.id === '13');
  const details = await page.locator('#details-body').textContent();
  assert.ok(details.includes('Operands') && details.includes(NASTY) && details.includes('"<k>"'), details);
  // Nothing ran, and no element came from the trace.
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('img').count(), 0);
  assert.equal(await page.locator('b').count(), 0);
  assert.equal(await page.evaluate(() => document.scripts.length), 1);
  await shot(page, 'view-escaping.png');
  assert.deepEqual(errors, []);
  await page.close();
});

test('follows a file that another process is appending to', async () => {
  const file = path.join(work, 'growing.jets');
  fs.writeFileSync(file, '');
  const writer = spawn(process.execPath, [fileURLToPath(new URL('trace.mjs', import.meta.url)), 'append', file, '16'], { stdio: 'inherit' });
  children.push(writer);
  const { page, errors } = await openPage(await view(file));
  const first = await state(page);
  await page.waitForFunction((n) => window.jetsViewer.state().records > n, first.records);
  const later = await state(page);
  assert.ok(later.extent[1] > first.extent[1], 'the run grows in view');
  await shot(page, 'view-follow-running.png');
  await page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 30000 });
  const s = await settled(page);
  assert.equal(s.records, 16 * 42);
  assert.equal(await page.locator('#errors').isHidden(), true, 'torn lines were waited for, not reported');
  assert.ok(s.drawn.bars + s.drawn.clusters > 0);
  await shot(page, 'view-follow-complete.png');
  assert.deepEqual(errors, []);
  await page.close();
});

test('jets gantt writes a static page that works from a file', async () => {
  const file = path.join(work, 'small.jets');
  const trace = writeTrace(file, 200);
  const html = path.join(work, 'small.html');
  execFileSync(JETS, ['gantt', file, '-o', html], { stdio: 'inherit' });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto('file://' + html);
  await page.waitForFunction(() => window.jetsViewer && window.jetsViewer.state().drawn.bars > 0);
  const s = await settled(page);
  assert.equal(s.records, trace.records);
  assert.ok(s.drawn.markers > 0);
  await page.evaluate(() => window.jetsViewer.setView(0, 60));
  await settled(page);
  const rect = await page.evaluate(() => window.jetsViewer.barRect('12'));
  assert.ok(rect);
  await page.mouse.click(rect.x + rect.w / 2, rect.y + rect.h / 2);
  await page.waitForFunction(() => document.querySelector('#details-body').dataset.id === '12');
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('#tree .node .nm', { hasText: 'window.__pwned' }).first().textContent(), NASTY);
  await shot(page, 'gantt.png');
  assert.deepEqual(errors, []);
  await page.close();
});

const PIPELINE_BIN = process.env.PIPELINE_BIN;

/** Runs `jets demo` into a fresh directory; returns the trace's path. */
function demoTrace(words) {
  const dir = fs.mkdtempSync(path.join(work, 'demo-'));
  execFileSync(JETS, ['demo', '--out', dir, '--words', String(words)], { stdio: 'ignore' });
  return path.join(dir, 'pipeline.jets');
}

test('pipeline mode on the demo trace: stage names per cycle, D-cache misses as warnings at every zoom', async () => {
  const file = demoTrace(24);
  const { page, errors } = await openPage(await view(file));
  await page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 60000 });
  await page.waitForFunction(() => window.jetsViewer.state().drawn.markers > 0);
  let s = await settled(page);
  // First load with host samples: the canvas is drawn at its laid-out size.
  const dpr = await page.evaluate(() => window.devicePixelRatio || 1);
  assert.equal(s.canvasPixels[1], Math.round(s.canvas[1] * dpr), 'canvas drawn at its box height: ' + JSON.stringify(s));
  assert.ok((s.drawn.severities.warning || 0) > 0, 'lanes, whole run: warnings shown ' + JSON.stringify(s.drawn));
  await shot(page, 'lanes-demo.png');

  await page.click('#mode-pipeline');
  await page.waitForFunction(() => window.jetsViewer.state().pipe.rows.length > 10);
  s = await settled(page);
  assert.equal(s.mode, 'pipeline');
  assert.equal(s.pipe.groups.length, 1, 'one core');
  assert.match(s.pipe.groups[0].label, /core/);
  // Find a D-cache miss with the search box (event names are searchable), and go there.
  await page.fill('#search', 'DCacheMiss');
  await page.press('#search', 'Enter');
  await page.waitForSelector('#results .node');
  const hit = await page.locator('#results .node').first().getAttribute('data-clk');
  assert.ok(Number(hit) > 0, 'results carry their cycle');
  await page.locator('#results .node').first().click();
  await page.waitForFunction((c) => { const st = window.jetsViewer.state(); return st.t0 <= c && c <= st.t1 && !st.busy; }, Number(hit));
  const c = Number(hit);
  await page.evaluate((c) => window.jetsViewer.setView(c - 15, c + 25), c);
  s = await settled(page);
  const cyclePx = s.canvas[0] / (s.t1 - s.t0);
  assert.ok(cyclePx >= 12, 'cycles are ' + cyclePx + ' px wide');
  assert.ok(s.drawn.stageLabels > 20, JSON.stringify(s.drawn));
  for (const stage of ['IF', 'ID', 'EX', 'MEM', 'WB']) assert.ok(s.drawn.stageNames.includes(stage), stage + ' drawn: ' + s.drawn.stageNames);
  assert.ok((s.drawn.severities.warning || 0) > 0, 'the miss is a warning marker: ' + JSON.stringify(s.drawn));
  await shot(page, 'pipeline-stages.png');
  // Zoom out step by step to the whole run: the miss stays a warning.
  for (let i = 0; i < 8; i++) {
    await page.click('#zoom-out');
    s = await settled(page);
    assert.ok((s.drawn.severities.warning || 0) > 0, `zoom-out ${i + 1}: ${JSON.stringify(s.drawn)} over ${s.t1 - s.t0} cycles`);
  }
  await page.click('#mode-lanes');
  for (const [a, b] of [[c - 20, c + 20], [c - 2000, c + 2000]]) {
    await page.evaluate(([a, b]) => window.jetsViewer.setView(a, b), [a, b]);
    s = await settled(page);
    assert.ok((s.drawn.severities.warning || 0) > 0, `lanes ${a}..${b}: ${JSON.stringify(s.drawn)}`);
  }
  assert.deepEqual(errors, []);
  await page.close();
});

test('axis labels at 2 GHz are exact', async () => {
  const file = path.join(work, 'ghz.jets');
  writeTrace(file, 6000, 2000);
  const { page, errors } = await openPage(await view(file));
  await page.evaluate(() => window.jetsViewer.setView(0, 20000));
  const s = await settled(page);
  assert.ok(s.ticks.length >= 3, JSON.stringify(s.ticks));
  for (const t of s.ticks) {
    const [value, unit] = t.time.split(' ');
    const scale = { s: 1, ms: 1e-3, 'µs': 1e-6, ns: 1e-9 }[unit];
    const decimals = (value.split('.')[1] || '').length;
    assert.ok(Math.abs(Number(value) * scale - t.clk / 2e9) < 0.51 * scale * 10 ** -decimals, JSON.stringify(t));
  }
  const five = s.ticks.find((t) => t.clk === 5000);
  if (five) assert.equal(five.time, '2.5 µs');
  assert.equal(await page.evaluate(() => window.jetsViewer.fmtTimeTick(2.5e-6, 2.5e-6)), '2.5 µs');
  assert.deepEqual(errors, []);
  await page.close();
});

test('live follow: a record shown before its first child gets its expand arrow', async () => {
  const file = path.join(work, 'arrow.jets');
  fs.writeFileSync(file, header('arrow') + JSON.stringify({ clk: 0, type: 'record', name: 'lonely', record_type: 'Core', id: 1, parent_id: null, description: '' }) + '\n');
  const { page, errors } = await openPage(await view(file));
  await page.waitForSelector('#tree .node');
  assert.equal(await page.locator('#tree .node .tw').first().textContent(), '', 'no children yet');
  fs.appendFileSync(file, JSON.stringify({ clk: 5, type: 'record', name: 'child', record_type: 'Op', id: 2, parent_id: 1, description: '' }) + '\n');
  await page.waitForFunction(() => document.querySelector('#tree .node .tw').textContent === '▸', null, { timeout: 10000 });
  await page.locator('#tree .node .tw').first().click();
  await page.waitForFunction(() => document.querySelectorAll('#tree .node').length === 2);
  fs.appendFileSync(file, JSON.stringify({ type: 'footer' }) + '\n');
  assert.deepEqual(errors, []);
  await page.close();
});

test('jump to a cycle in the middle of a 1 M-instruction run shows the rows there', { skip: !PIPELINE_BIN && 'PIPELINE_BIN not set' }, async () => {
  const file = path.join(work, 'million.jets');
  // Bubble sort of 430 words: about 1.02 M instructions (retired and squashed), 740 MB.
  const out = execFileSync(PIPELINE_BIN, [file, process.env.MILLION_WORDS || '430']).toString();
  const m = /(\d+) retired .*?, (\d+) squashed/.exec(out);
  assert.ok(m && Number(m[1]) + Number(m[2]) >= 1_000_000, out);
  const { page, errors } = await openPage(await view(file));
  await page.waitForFunction(() => { const s = window.jetsViewer.state(); return s.pipe.groups.length && s.records > 1_000_000; }, null, { timeout: 120000 });
  await page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 120000 });
  await page.click('#mode-pipeline');
  let s = await settled(page);
  const insns = s.pipe.groups[0].count;
  assert.ok(insns >= 1_000_000, 'instructions: ' + insns);
  const mid = Math.round((s.extent[0] + s.extent[1]) / 2);
  const t = Date.now();
  await page.fill('#jump', String(mid));
  await page.press('#jump', 'Enter');
  await page.waitForFunction((mid) => { const s = window.jetsViewer.state(); return s.pipe.rows.some((r) => Math.abs(r.start - mid) < 50); }, mid);
  s = await settled(page);
  console.log(`jump to cycle ${mid} of ${s.extent[1]} (${insns} instructions): rows drawn ${Date.now() - t} ms after Enter`);
  assert.ok(s.scrollY > 1000 * 18, 'scrolled into the middle: ' + s.scrollY);
  assert.ok(s.t0 <= mid && mid <= s.t1);
  assert.ok(s.drawn.bars > 10 && s.drawn.stageNames.length >= 3, JSON.stringify(s.drawn));
  await shot(page, 'pipeline-jump-1M.png');
  // Browser-side latency, key press to the new answer drawn (a figure for the README, not an
  // assertion: the machine is shared).
  const lat = async (key) => {
    const ms = [];
    for (let i = 0; i < 6; i++) {
      const t0 = Date.now();
      await page.keyboard.press(key);
      await page.waitForFunction(() => !window.jetsViewer.state().busy);
      ms.push(Date.now() - t0);
    }
    ms.sort((a, b) => a - b);
    return ms[Math.floor(ms.length / 2)];
  };
  await page.locator('#timeline').focus();
  const pipePan = await lat('d'), pipeZoom = await lat('-');
  await page.click('#mode-lanes');
  await settled(page);
  await page.locator('#timeline').focus();
  const lanesPan = await lat('d'), lanesZoom = await lat('+');
  console.log(`latency at ${s.records} records: pipeline pan ${pipePan} ms, zoom ${pipeZoom} ms; lanes pan ${lanesPan} ms, zoom ${lanesZoom} ms (median of 6, key press to drawn)`);
  await page.click('#mode-pipeline');
  await settled(page);
  // And to an instruction by its position.
  await page.fill('#jump', '#' + (insns - 10));
  await page.press('#jump', 'Enter');
  await page.waitForFunction((k) => window.jetsViewer.state().pipe.rows.some((r) => r.k === k), insns - 10);
  assert.deepEqual(errors, []);
  await page.close();
});

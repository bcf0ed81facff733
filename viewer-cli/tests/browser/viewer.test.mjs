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

/** Opens a page written by `jets gantt FILE`; resolves to the page and its error list. */
async function ganttPage(file) {
  const html = file.replace(/\.jets$/, '') + '.html';
  execFileSync(JETS, ['gantt', file, '-o', html], { stdio: 'ignore' });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto('file://' + html);
  await page.waitForFunction(() => window.jetsViewer && window.jetsViewer.state().records > 0);
  return { page, errors };
}

/** For each lane header in the label column: its name, whether the name is cut (ellipsis), and
 * whether its row count shows whole inside the header. */
const laneHeaders = (page) => page.locator('#labels .lane').evaluateAll((els) => els.map((e) => {
  const nm = e.querySelector('.nm'), cnt = e.querySelector('.cnt');
  const box = e.getBoundingClientRect(), c = cnt.getBoundingClientRect();
  return { name: nm.textContent, count: cnt.textContent, nameCut: nm.scrollWidth > nm.clientWidth,
    countWhole: cnt.scrollWidth <= cnt.clientWidth && c.left >= box.left && c.right <= box.right };
}));

test('lane headers are never cut: a long name is shortened, its row count shows whole', async () => {
  const file = path.join(work, 'long-lanes.jets');
  const long = 'a processing element with a name much longer than the label column is wide';
  const lines = [
    { clk: 0, type: 'record', name: long, record_type: 'Core', id: 1, parent_id: null, description: '', data: { unit_id: 1 } },
    { clk: 0, type: 'record', name: 'c', record_type: 'Core', id: 2, parent_id: null, description: '', data: { unit_id: 2 } },
    { clk: 1, type: 'record', name: 'op', record_type: 'Op', id: 3, parent_id: 2, description: '' },
    { clk: 2, type: 'record', name: 'op', record_type: 'Op', id: 4, parent_id: 2, description: '' },
    { clk: 9, type: 'record_end', record_id: 3 }, { clk: 9, type: 'record_end', record_id: 4 },
    { clk: 10, type: 'record_end', record_id: 1 }, { clk: 10, type: 'record_end', record_id: 2 },
  ];
  fs.writeFileSync(file, header('lanes') + lines.map((l) => JSON.stringify(l) + '\n').join('') + JSON.stringify({ type: 'footer' }) + '\n');
  for (const open of [async () => openPage(await view(file)), () => ganttPage(file)]) {
    const { page, errors } = await open();
    await page.waitForFunction(() => document.querySelectorAll('#labels .lane').length === 2);
    const heads = await laneHeaders(page);
    assert.deepEqual(heads.map((h) => h.count), ['1 row', '3 rows'], JSON.stringify(heads));
    assert.ok(heads.every((h) => h.countWhole), 'row counts show whole: ' + JSON.stringify(heads));
    assert.ok(heads[0].name.startsWith('a processing element') && heads[0].nameCut, 'the long name is the part shortened: ' + JSON.stringify(heads[0]));
    assert.equal(heads[1].nameCut, false);
    await shot(page, 'lane-headers.png');
    assert.deepEqual(errors, []);
    await page.close();
  }
});

test('jets gantt: merged markers show the highest severity and the count at every zoom', async () => {
  // 2,000 events of no severity, one per cycle, on one record; a warning at cycle 1,000 and an
  // error at cycle 1,500 among them.
  const file = path.join(work, 'markers.jets');
  const lines = [{ clk: 0, type: 'record', name: 'unit', record_type: 'Unit', id: 1, parent_id: null, description: '', data: { unit_id: 0 } }];
  for (let c = 0; c < 2000; c++) {
    const severity = c === 1000 ? 'warning' : c === 1500 ? 'error' : undefined;
    lines.push({ clk: c, type: 'event', name: severity ? 'Miss' : 'Tick', record_id: 1, description: '', ...(severity ? { data: { severity } } : {}) });
  }
  lines.push({ clk: 2000, type: 'record_end', record_id: 1 });
  fs.writeFileSync(file, header('markers') + lines.map((l) => JSON.stringify(l) + '\n').join('') + JSON.stringify({ type: 'footer' }) + '\n');
  const { page, errors } = await ganttPage(file);
  let s = await settled(page);
  // The whole run: a cycle is less than a pixel, so markers merge; the two with a severity
  // still show as such, and the merged markers count every event.
  assert.ok(s.drawn.markers < 400 && s.drawn.merged > 0, JSON.stringify(s.drawn));
  assert.equal(s.drawn.events, 2000, 'every event is counted in a marker: ' + JSON.stringify(s.drawn));
  assert.equal(s.drawn.severities.warning, 1, JSON.stringify(s.drawn));
  assert.equal(s.drawn.severities.error, 1, JSON.stringify(s.drawn));
  // The tooltip of the merged warning says how many events it stands for.
  const at = await page.evaluate(() => {
    const h = window.jetsViewer.markerAt('warning');
    return h && { x: h.x, y: h.y };
  });
  assert.ok(at, 'the warning marker is drawn');
  await page.mouse.move(at.x, at.y);
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').textContent(), /^\d+ events from [\d,]+\nhighest severity: warning/);
  await shot(page, 'gantt-markers-merged.png');
  // Zooming in step by step down to single cycles: still one warning and one error while they
  // are in view, and fewer events per marker.
  for (const [a, b] of [[900, 1600], [990, 1010]]) {
    await page.evaluate(([a, b]) => window.jetsViewer.setView(a, b), [a, b]);
    s = await settled(page);
    assert.equal(s.drawn.severities.warning, 1, `${a}..${b}: ${JSON.stringify(s.drawn)}`);
    assert.equal(s.drawn.severities.error || 0, b > 1500 ? 1 : 0, `${a}..${b}: ${JSON.stringify(s.drawn)}`);
  }
  assert.equal(s.drawn.merged, 0, 'single cycles: no marker is merged ' + JSON.stringify(s.drawn));
  assert.deepEqual(errors, []);
  await page.close();
});

/** The first line of a JETS file that matches `re`, parsed. */
function firstLine(file, re) {
  const line = fs.readFileSync(file, 'utf8').split('\n').find((l) => re.test(l));
  return line && JSON.parse(line);
}

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

test('a trace of a capture window says it is a part of the run and shades the cycles outside it', async () => {
  const dir = fs.mkdtempSync(path.join(work, 'demo-window-'));
  execFileSync(JETS, ['demo', '--out', dir, '--words', '24'], { stdio: 'ignore', env: { ...process.env, JETS_CAPTURE: 'clk=2000..3000' } });
  const { page, errors } = await openPage(await view(path.join(dir, 'pipeline.jets')));
  await page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 60000 });
  let s = await settled(page);
  assert.equal(await page.isVisible('#part'), true, 'the header has a badge');
  assert.equal(await page.textContent('#part'), 'part of the run');
  assert.match(await page.textContent('#status-text'), /capture: clk=2000\.\.3000: a PART of the run \(left out: \d+ records/);
  // The whole run: before the window and after it are shaded (its ancestors began at cycle 0).
  assert.ok(s.t0 < 2000 && s.t1 > 3000, `view ${s.t0}..${s.t1}`);
  assert.equal(s.drawn.outside, 2, JSON.stringify(s.drawn));
  await shot(page, 'capture-window.png');
  // Inside the window: nothing shaded; across its start: one gap.
  await page.evaluate(() => window.jetsViewer.setView(2200, 2800));
  s = await settled(page);
  assert.equal(s.drawn.outside, 0, JSON.stringify(s.drawn));
  await page.evaluate(() => window.jetsViewer.setView(1900, 2100));
  s = await settled(page);
  assert.equal(s.drawn.outside, 1, JSON.stringify(s.drawn));
  await page.click('#mode-pipeline');
  await page.waitForFunction(() => window.jetsViewer.state().pipe.rows.length > 0);
  s = await settled(page);
  assert.equal(s.drawn.outside, 1, 'pipeline mode shades it too: ' + JSON.stringify(s.drawn));
  assert.deepEqual(errors, []);
  await page.close();

  // A repeated window (every=): [1000 + 10k, 1005 + 10k). Around its first windows, the gaps
  // between them; the whole run (about 400 windows in a few hundred pixels) is not shaded window
  // by window.
  const every = fs.mkdtempSync(path.join(work, 'demo-every-'));
  execFileSync(JETS, ['demo', '--out', every, '--words', '24'], { stdio: 'ignore', env: { ...process.env, JETS_CAPTURE: 'clk=1000..1005;every=10' } });
  const second = await openPage(await view(path.join(every, 'pipeline.jets')));
  await second.page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 60000 });
  for (const [a, b, gaps] of [[990, 1050, 6], [1007, 1033, 3]]) {
    await second.page.evaluate(([a, b]) => window.jetsViewer.setView(a, b), [a, b]);
    s = await settled(second.page);
    assert.equal(s.drawn.outside, gaps, `${a}..${b} (${s.t0}..${s.t1}): ` + JSON.stringify(s.drawn));
  }
  await second.page.click('#zoom-fit');
  s = await settled(second.page);
  assert.ok(s.t1 - s.t0 > 3000, `the whole run: ${s.t0}..${s.t1}`);
  assert.equal(s.drawn.outside, 0, 'windows closer than 4 pixels are not drawn one by one: ' + JSON.stringify(s.drawn));
  assert.deepEqual(second.errors, []);
  await second.page.close();

  // A size limit (CAP-LIM-1): the cycles from the last line written to the run's end (the
  // footer's, which the demo closes at) are shaded; before them, nothing.
  const limited = fs.mkdtempSync(path.join(work, 'demo-limit-'));
  execFileSync(JETS, ['demo', '--out', limited, '--words', '24'], { stdio: 'ignore', env: { ...process.env, JETS_CAPTURE: 'limit=64KiB' } });
  const trace = path.join(limited, 'pipeline.jets');
  const clks = fs.readFileSync(trace, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const stop = Math.max(...clks.filter((l) => l.clk !== undefined).map((l) => l.clk));
  const end = clks[clks.length - 1].capture_end_clk;
  assert.ok(stop < end, `the limit stopped capture at ${stop}, before the run's end ${end}`);
  const third = await openPage(await view(trace));
  await third.page.waitForFunction(() => document.querySelector('#live').textContent === 'complete', null, { timeout: 60000 });
  await third.page.click('#zoom-fit');
  s = await settled(third.page);
  assert.equal(await third.page.textContent('#part'), 'part of the run');
  assert.match(await third.page.textContent('#status-text'), /capture: limit=64KiB: a PART of the run \(stopped at its size limit;/);
  assert.equal(s.drawn.outside, 1, `the whole run ${s.t0}..${s.t1}: ` + JSON.stringify(s.drawn));
  await shot(third.page, 'capture-limit.png');
  await third.page.evaluate((stop) => window.jetsViewer.setView(0, stop), stop);
  s = await settled(third.page);
  assert.equal(s.drawn.outside, 0, 'nothing before the stop: ' + JSON.stringify(s.drawn));
  assert.deepEqual(third.errors, []);
  await third.page.close();
});

test('jets gantt: the same pipeline mode on the demo trace (stage names, stalls hatched, flushes marked, jump)', async () => {
  const file = demoTrace(24);
  const miss = firstLine(file, /"name":"DCacheMiss"/);
  const flush = firstLine(file, /"type":"record_end".*"status":"flushed"/);
  assert.ok(miss && flush, 'the demo trace has a D-cache miss and a flush');
  const { page, errors } = await ganttPage(file);
  await page.click('#mode-pipeline');
  await page.waitForFunction(() => window.jetsViewer.state().pipe.rows.length > 10);
  let s = await settled(page);
  assert.equal(s.mode, 'pipeline');
  assert.equal(s.pipe.groups.length, 1, 'one core: ' + JSON.stringify(s.pipe.groups));
  assert.match(s.pipe.groups[0].label, /core/);
  // Jump to the miss with the Jump box: rows there, stage names in every cycle, the miss a
  // warning and the stage it stalls hatched.
  await page.fill('#jump', String(miss.clk));
  await page.press('#jump', 'Enter');
  await page.waitForFunction((c) => window.jetsViewer.state().pipe.rows.some((r) => r.start <= c && c <= r.end), miss.clk);
  await page.evaluate((c) => window.jetsViewer.setView(c - 15, c + 25), miss.clk);
  s = await settled(page);
  assert.ok(s.canvas[0] / (s.t1 - s.t0) >= 12, 'cycles ≥ 12 px');
  for (const stage of ['IF', 'ID', 'EX', 'MEM', 'WB']) assert.ok(s.drawn.stageNames.includes(stage), stage + ' drawn: ' + s.drawn.stageNames);
  assert.ok((s.drawn.severities.warning || 0) > 0, 'the miss is a warning marker: ' + JSON.stringify(s.drawn));
  assert.ok(s.drawn.stalls > 0, 'a stalled stage is hatched: ' + JSON.stringify(s.drawn));
  await shot(page, 'gantt-pipeline-stages.png');
  // A flushed instruction: faded and crossed at its end.
  await page.fill('#jump', String(flush.clk - 10));
  await page.press('#jump', 'Enter');
  await page.waitForFunction((c) => window.jetsViewer.state().pipe.rows.some((r) => r.end === c), flush.clk);
  s = await settled(page);
  assert.ok(s.drawn.flushes > 0, 'a flush is marked: ' + JSON.stringify(s.drawn));
  await shot(page, 'gantt-pipeline-flush.png');
  // And by position in program order.
  const last = s.pipe.groups[0].count - 1;
  await page.fill('#jump', '#' + last);
  await page.press('#jump', 'Enter');
  await page.waitForFunction((k) => window.jetsViewer.state().pipe.rows.some((r) => r.k === k), last);
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

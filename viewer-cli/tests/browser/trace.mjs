// Generates JETS traces for the browser tests, and appends to one as a separate process would.
import fs from 'node:fs';

/** Names with markup and quotes: they must show up as text, never run. */
export const NASTY = `ld "x" <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> & 'y'`;

const line = (o) => JSON.stringify(o) + '\n';

export function header(model, mhz = 1000) {
  return line({ type: 'header', version: '2.0', metadata: { hardware_model: model, clock_frequency_mhz: mhz } });
}

/** Two cores of `n` instructions each, about five in flight per core, events and annotations. */
export function pipelineLines(n, firstId = 1, clkBase = 0) {
  const out = [];
  const cores = [firstId, firstId + 1];
  out.push(line({ clk: clkBase, type: 'record', name: 'core0', record_type: 'Core', id: cores[0], parent_id: null, description: 'first core', data: { unit_id: 0 } }));
  out.push(line({ clk: clkBase, type: 'record', name: NASTY, record_type: 'Core', id: cores[1], parent_id: null, description: NASTY, data: { unit_id: 1, color: '#3b5b92' } }));
  let id = firstId + 10;
  const ends = [];
  const types = ['Instruction', 'Load', 'Store'];
  for (let i = 0; i < n; i++) {
    const clk = clkBase + i * 2;
    for (const core of cores) {
      id++;
      const data = {};
      if (i % 3 === 0) data.display_label = (core === cores[1] ? '<b>' : '') + 'I' + i;
      if (i % 17 === 0) data.status = 'stalled';
      if (i % 13 === 0) data.criticality = 0.9;
      out.push(line({ clk, type: 'record', name: (core === cores[1] && i === 5 ? NASTY : types[i % 3].toLowerCase() + ' ' + i), record_type: types[i % 3], id, parent_id: core, description: 'op', data }));
      if (i % 6 === 0) {
        out.push(line({ clk: clk + 1, type: 'event', name: 'CacheMiss', record_id: id, description: 'L1 <miss>', data: { severity: ['info', 'warning', 'error'][i % 3], marker_style: ['box', 'diamond', 'circle', 'line'][i % 4], icon: 'cache_miss' } }));
      }
      if (i % 20 === 0) out.push(line({ type: 'annotation', name: 'Operands', record_id: id, description: NASTY, data: { rs1: 2, '<k>': NASTY } }));
      ends.push([clk + 3 + (i * 7) % 9, id]);
    }
    ends.sort((a, b) => a[0] - b[0]);
    while (ends.length && ends[0][0] <= clk + 2) {
      const [c, r] = ends.shift();
      out.push(line({ clk: c, type: 'record_end', record_id: r }));
    }
  }
  for (const [c, r] of ends) out.push(line({ clk: c, type: 'record_end', record_id: r }));
  const last = clkBase + n * 2 + 20;
  for (const core of cores) out.push(line({ clk: last, type: 'record_end', record_id: core }));
  return { lines: out, last, records: 2 + 2 * n };
}

export function writeTrace(path, n, mhz = 1000) {
  const p = pipelineLines(n);
  fs.writeFileSync(path, header('Tiny5 <b>bold</b>', mhz) + p.lines.join('') + line({ type: 'footer', capture_end_clk: p.last }));
  return p;
}

// As a program: `node trace.mjs append FILE BATCHES` writes a header, then BATCHES batches of
// records 150 ms apart, each batch's last line torn in two writes 100 ms apart, then a footer.
if (process.argv[2] === 'append') {
  const [file, batches] = [process.argv[3], Number(process.argv[4])];
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const fd = fs.openSync(file, 'a');
  fs.writeSync(fd, header('growing'));
  let last = 0;
  for (let b = 0; b < batches; b++) {
    const p = pipelineLines(20, 1 + b * 1000, last);
    last = p.last;
    const text = p.lines.join('');
    const cut = text.length - 25;
    fs.writeSync(fd, text.slice(0, cut));
    await sleep(100);
    fs.writeSync(fd, text.slice(cut));
    await sleep(150);
  }
  fs.writeSync(fd, line({ type: 'footer', capture_end_clk: last }));
  fs.closeSync(fd);
}

// The dashboard in headless Chromium (Debian's chromium through playwright-core): a server on the
// tiny-v3 fixture (CPU backend, --threads 1) under load, with a per-token SLO so small that the latency
// alert must fire. Checks that the page loads with no errors, that the plots redraw as samples come
// in (their pixels change and they hold points), that the tpot_slo alert appears as FIRING while the
// TTFT alert (generous SLO) stays OK, that the GPU panels say n/a on the CPU backend, and that the
// page notices when the server goes away. Saves a screenshot under a temp dir and prints its path.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { check, done, startServer } from '../server/lib.mjs';
import { startLoad } from './load.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dsinfer-dashboard-'));
const srv = await startServer(['--threads', '1', '--max-num-seqs', '16', '--slo-tpot-ms', '0.001', '--slo-ttft-ms', '600000',
  '--dashboard-interval', '0.5', '--alert-window', '5', '--served-model-name', 'tiny']);
const load = startLoad(srv.base, { workers: 6 });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, timeout: 60000,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const resp = await page.goto(srv.base + '/dashboard', { waitUntil: 'load' });
  check(resp.status() === 200, 'GET /dashboard in the browser', resp.status());
  const samples = () => page.evaluate(() => Number(document.body.dataset.samples || -1));
  await page.waitForFunction(() => Number(document.body.dataset.samples || -1) >= 1, null, { timeout: 15000 });
  const ids = ['throughput', 'ttft', 'itl', 'requests', 'kv', 'gpu', 'batch'];
  const pixels = () => page.evaluate((ids) => ids.map((id) => document.getElementById('canvas-' + id).toDataURL()), ids);
  const s0 = await samples(), p0 = await pixels();
  await page.waitForFunction((s) => Number(document.body.dataset.samples) >= s + 3, s0, { timeout: 20000 });
  const s1 = await samples(), p1 = await pixels();
  check(s1 >= s0 + 3, 'the page took new samples', [s0, s1]);
  for (const [i, id] of ids.entries())
    if (id !== 'gpu') check(p0[i] !== p1[i], `plot ${id} redrew with new samples`);
  const points = await page.evaluate((ids) => Object.fromEntries(ids.map((id) =>
    [id, Number(document.getElementById('canvas-' + id).dataset.points)])), ids);
  for (const id of ['throughput', 'itl', 'requests', 'kv', 'batch']) check(points[id] > 0, `plot ${id} has points`, points);
  check(points.gpu === 0, 'no GPU points on the CPU backend', points);

  await page.waitForSelector('#alert-tpot_slo.active', { timeout: 20000 });
  const tpot = await page.textContent('#alert-tpot_slo');
  check(/FIRING/.test(tpot) && /service level/.test(tpot), 'tpot_slo alert FIRING on the page', tpot);
  const ttft = await page.getAttribute('#alert-ttft_slo', 'class');
  check(/\bok\b/.test(ttft), 'ttft_slo alert OK (generous SLO)', ttft);
  for (const id of ['gpu_util_low', 'mem_bw_low']) {
    const cls = await page.getAttribute('#alert-' + id, 'class'), txt = await page.textContent('#alert-' + id);
    check(/disabled/.test(cls) && /INACTIVE/.test(txt) && /CPU backend/.test(txt), `${id} inactive, says why`, txt);
  }
  const tiles = await page.textContent('#tiles');
  check(/GPU compute\s*n\/a/.test(tiles) && /batch limit\s*\d+ of 16 \(adaptive\)/.test(tiles), 'tiles: GPU n/a, adaptive limit', tiles);
  check(/tiny/.test(await page.textContent('#model')), 'header names the model');

  const shot = path.join(tmp, 'dashboard.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(fs.statSync(shot).size > 10000, 'screenshot written', shot);
  console.log('screenshot: ' + shot);

  check(errors.length === 0, 'no errors in the page', errors);
  const st = await load.stop();
  check(st.ok > 0 && st.failed === 0, 'load: every request served', st);
  check(await srv.stop() === 0, 'server exits 0');
  await page.waitForSelector('#conn.lost', { timeout: 10000 });
  check(/connection lost/.test(await page.textContent('#conn')), 'the page shows the lost connection');
} finally {
  await browser.close();
  if (srv.proc.exitCode === null) await srv.stop('SIGKILL');
}
done('dashboard_ui');

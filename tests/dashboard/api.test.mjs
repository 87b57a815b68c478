// The dashboard without a browser: /dashboard (self-contained page), /dashboard/data (shape, live
// samples), the alert and adaptive-limit gauges in /metrics, and `dsinfer top --once`, against the
// tiny-v3 fixture under load with a per-token SLO so small that the latency alert must fire and the
// adaptive limit must fall below --max-num-seqs. Also: flags are validated, GPU alerts say why they
// are inactive on the CPU backend, and a server without SLOs keeps its limit and fires nothing.
import { execFile } from 'node:child_process';
import { check, done, startServer, request, json, BIN } from '../server/lib.mjs';
import { startLoad, until } from './load.mjs';

const MAX_SEQS = 16;

function run(args) {
  return new Promise((resolve) => execFile(BIN, args, { timeout: 20000 }, (err, stdout, stderr) =>
    resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr })));
}

async function page(base) {
  const r = await request(base, 'GET', '/dashboard');
  check(r.status === 200 && /text\/html/.test(r.headers['content-type']), '/dashboard is HTML', r.status);
  check(r.body.includes('<canvas') || r.body.includes("el('canvas')"), 'the page draws on canvas');
  check(!/<script[^>]+src=|<link[^>]+href="(?!data:)|https?:\/\/(?!127)/.test(r.body), 'the page loads nothing from elsewhere');
  check(r.body.includes('/dashboard/data'), 'the page polls /dashboard/data');
  const d = await request(base, 'POST', '/dashboard/data');
  check(d.status === 405, 'POST /dashboard/data is 405', d.status);
}

async function data(base) {
  const r = await json(base, 'GET', '/dashboard/data');
  check(r.status === 200 && r.json, '/dashboard/data is JSON', r.body.slice(0, 200));
  return r.json;
}

async function withSlo() {
  const srv = await startServer(['--threads', '1', '--max-num-seqs', String(MAX_SEQS), '--slo-tpot-ms', '0.001',
    '--slo-ttft-ms', '600000', '--dashboard-interval', '0.25', '--alert-window', '4', '--served-model-name', 'tiny']);
  await page(srv.base);
  const d0 = await until(() => data(srv.base), (d) => d.samples >= 1, 5000);
  check(d0.model === 'tiny' && d0.backend === 'cpu' && d0.interval_s === 0.25 && d0.window_s === 4, 'header fields', d0);
  check(d0.gpu.available === false && /CPU backend/.test(d0.gpu.reason), 'GPU n/a on the CPU backend', d0.gpu);
  check(d0.config.slo_tpot_ms === 0.001 && d0.config.max_num_seqs === MAX_SEQS && d0.config.adaptive === true, 'config', d0.config);
  const names = d0.alerts.map((a) => a.name).join(',');
  check(names === 'gpu_util_low,mem_bw_low,ttft_slo,tpot_slo', 'alert names', names);
  for (const k of ['t', 'gen_tps', 'ttft_p90', 'itl_p90', 'running', 'waiting', 'limit', 'kv_used', 'prefix_hit', 'gpu_util',
    'mem_bw', 'batch_mean', 'batch_max'])
    check(Array.isArray(d0.series[k]) && d0.series[k].length === d0.series.t.length, `series ${k}`);

  const load = startLoad(srv.base, { workers: 8 });
  const d1 = await until(() => data(srv.base), (d) => d.alerts[3].active && Math.min(...d.series.limit) < MAX_SEQS &&
    Math.max(...d.series.gen_tps) > 0, 30000);
  const tpot = d1.alerts[3];
  check(tpot.active && tpot.enabled && tpot.fired >= 1 && tpot.value > tpot.threshold, 'tpot_slo fires under load', tpot);
  check(!d1.alerts[2].active && d1.alerts[2].enabled, 'ttft_slo (10 min) does not fire', d1.alerts[2]);
  check(d1.alerts.slice(0, 2).every((a) => !a.enabled && !a.active), 'GPU alerts inactive on the CPU backend', d1.alerts);
  const lim = Math.min(...d1.series.limit);
  check(lim >= 1 && lim < MAX_SEQS, 'the adaptive limit fell below --max-num-seqs', d1.series.limit);
  check(d1.series.limit.every((v) => v >= 1 && v <= MAX_SEQS), 'the limit stays within [1, max-num-seqs]', d1.series.limit);
  check(Math.max(...d1.series.running) <= MAX_SEQS, 'running never above max-num-seqs');
  check(d1.series.itl_p90.some((v) => v !== null && v > 0) && d1.series.ttft_p50.some((v) => v !== null && v > 0),
    'latency percentiles present');
  check(d1.series.batch_max.some((v) => v >= 2), 'batches of several requests', d1.series.batch_max);
  check(d1.samples > d0.samples, 'samples advance', [d0.samples, d1.samples]);

  const m = await request(srv.base, 'GET', '/metrics');
  const gauge = (re) => { const x = m.body.match(re); return x ? Number(x[1]) : NaN; };
  check(gauge(/dsinfer:alert_active\{[^}]*alert="tpot_slo"\} (\S+)/) === 1, '/metrics: tpot_slo active');
  check(gauge(/dsinfer:alert_enabled\{[^}]*alert="gpu_util_low"\} (\S+)/) === 0, '/metrics: gpu_util_low disabled on CPU');
  check(gauge(/dsinfer:alert_threshold\{[^}]*alert="mem_bw_low"\} (\S+)/) === 65, '/metrics: mem_bw threshold 65');
  check(gauge(/dsinfer:alerts_fired_total\{[^}]*alert="tpot_slo"\} (\S+)/) >= 1, '/metrics: fired counter');
  const ml = gauge(/dsinfer:decode_batch_limit\{[^}]*\} (\S+)/);
  check(ml >= 1 && ml <= MAX_SEQS, '/metrics: decode_batch_limit', ml);
  check(/dsinfer:window_token_latency_seconds\{[^}]*quantile="0.9"\} \S+/.test(m.body), '/metrics: token latency quantiles');
  check(/dsinfer:kv_pages_total/.test(m.body) && /dsinfer:request_success_total/.test(m.body), '/metrics: the old series remain');

  const top = await run(['top', '--host', '127.0.0.1', '--port', String(srv.port), '--once']);
  check(top.code === 0, 'dsinfer top --once exits 0', top.stderr);
  check(/model tiny/.test(top.stdout) && /batch limit \d+ of 16 \(adaptive\)/.test(top.stdout), 'top: model and limit', top.stdout);
  check(/FIRING\s+tpot_slo/.test(top.stdout) && /inactive gpu_util_low/.test(top.stdout), 'top: alerts', top.stdout);
  check(!/\x1b\[/.test(top.stdout), 'top --once into a pipe: no escape sequences');
  const st = await load.stop();
  check(st.ok > 0 && st.failed === 0, 'load: every request served', st);
  check(await srv.stop() === 0, 'server exits 0');
  const gone = await run(['top', '--port', String(srv.port), '--once']);
  check(gone.code === 3 && /cannot connect/.test(gone.stderr), 'top: no server -> exit 3', gone);
}

async function withoutSlo() {
  const srv = await startServer(['--threads', '1', '--max-num-seqs', '8', '--dashboard-interval', '0.25']);
  const load = startLoad(srv.base, { workers: 4, maxTokens: 64 });
  const d = await until(() => data(srv.base), (x) => Math.max(...x.series.gen_tps) > 0 && x.samples >= 6, 20000);
  await load.stop();
  check(d.config.adaptive === false && d.series.limit.every((v) => v === 8), 'no SLO: the limit stays at max-num-seqs', d.series.limit);
  check(d.alerts.every((a) => !a.active && !a.enabled), 'no SLO, no GPU: no alert evaluated', d.alerts);
  check(/set --slo-tpot-ms/.test(d.alerts[3].reason), 'the page says how to enable the latency alerts', d.alerts[3]);
  check(await srv.stop() === 0, 'server exits 0');
}

async function badFlags() {
  for (const f of [['--slo-tpot-ms', '-1'], ['--alert-gpu-util', '101'], ['--alert-window', '0'], ['--dashboard-interval', 'x']]) {
    const r = await run(['serve', '--model', 'tests/fixtures/tiny-v3', ...f]);
    check(r.code === 2 && r.stderr.includes(f[0]), `serve ${f.join(' ')} -> exit 2`, r);
  }
  const r = await run(['top', '--port', '0']);
  check(r.code === 2, 'top --port 0 -> exit 2', r);
}

await badFlags();
await withSlo();
await withoutSlo();
done('dashboard_api');

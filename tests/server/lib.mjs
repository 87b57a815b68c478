// Helpers for the server tests: start `dsinfer serve` on a free port, checks that count failures,
// raw HTTP for what the openai client cannot send (bad JSON, bad UTF-8, huge bodies, disconnects).
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';

export const BIN = path.resolve(process.env.DSINFER_BIN || 'build/dsinfer');
export const MODEL = path.resolve(process.env.DSINFER_MODEL || 'tests/fixtures/tiny-v3');

let failures = 0, checks = 0;
export function check(cond, what, detail) {
  checks++;
  if (process.env.SRV_TRACE) console.error("check:", what);
  if (!cond) {
    failures++;
    console.error(`FAIL: ${what}${detail !== undefined ? ': ' + (typeof detail === 'string' ? detail : JSON.stringify(detail)) : ''}`);
  }
  return cond;
}
export function done(name) {
  if (failures) { console.error(`${name}: ${failures} of ${checks} checks failed`); process.exit(1); }
  console.log(`${name}: ${checks} checks ok`);
  process.exit(0);
}

// Starts the server with --port 0 and resolves once it prints its address.
export function startServer(args, { timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, ['serve', '--model', MODEL, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error('server did not start: ' + err)); }, timeoutMs);
    proc.stderr.on('data', (d) => { err += d; if (process.env.SRV_VERBOSE) process.stderr.write(d); });
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/([^:\s]+):(\d+)/);
      if (m && !proc.started) {
        proc.started = true;
        clearTimeout(timer);
        const port = Number(m[2]);
        resolve({
          proc, port, base: `http://127.0.0.1:${port}`, stderr: () => err,
          // SIGTERM, then the exit code (null if killed by a signal)
          stop: (sig = 'SIGTERM', waitMs = 30000) => new Promise((res) => {
            if (proc.exitCode !== null) return res(proc.exitCode);
            const t = setTimeout(() => { proc.kill('SIGKILL'); res('timeout'); }, waitMs);
            proc.on('exit', (code, signal) => { clearTimeout(t); res(code !== null ? code : signal); });
            proc.kill(sig);
          }),
        });
      }
    });
    proc.on('exit', (code) => { if (!proc.started) { clearTimeout(timer); reject(new Error(`server exited ${code}: ${err}`)); } });
  });
}

// One raw HTTP request; resolves {status, headers, body}.
export function request(base, method, urlPath, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(urlPath, base);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method, headers: {
      'content-type': 'application/json', ...headers } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

export async function json(base, method, urlPath, obj, headers) {
  const r = await request(base, method, urlPath, { body: obj === undefined ? undefined : typeof obj === 'string' || Buffer.isBuffer(obj) ? obj : JSON.stringify(obj), headers });
  try { r.json = JSON.parse(r.body); } catch { r.json = null; }
  return r;
}

// The page pool after the server went idle: waits until nothing runs, then runs the check.
export async function poolIdle(base, timeoutMs = 20000) {
  const t0 = Date.now();
  for (;;) {
    const r = await json(base, 'GET', '/debug/pool');
    if (r.json && r.json.running === 0 && r.json.waiting === 0 && r.json.pages_used === 0) return r.json;
    if (Date.now() - t0 > timeoutMs) return r.json;
    await new Promise((res) => setTimeout(res, 50));
  }
}

// Greedy token ids from `dsinfer generate` (the reference for the server's outputs).
export function generateIds(ids, n) {
  const out = execFileSync(BIN, ['generate', '--model', MODEL, '--ids', ids.join(','), '-n', String(n), '--temperature', '0',
    '--print-ids', '--threads', '1'], { encoding: 'utf8' });
  return out.trim().split(/[,\s]+/).filter((s) => s.length).map(Number);
}

export function rng(seed) {   // mulberry32
  let a = seed >>> 0;
  return () => { a = (a + 0x6D2B79F5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

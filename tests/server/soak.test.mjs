// Soak: for SOAK_SECONDS (default 30) a mixed load on a server with a small KV pool (preemption,
// prefix-cache eviction): chat and completions, streaming or not, random lengths and sampling, shared
// prefixes, stop strings, client cancellations and malformed requests. Every answer is checked; at the
// end the pool must be intact and empty and the server must exit 0 on SIGTERM. Run from the ASan
// build in the sanitizer pass, so a leak or a memory error fails it.
import net from 'node:net';
import { check, done, startServer, json, poolIdle, rng } from './lib.mjs';

const SECONDS = Number(process.env.SOAK_SECONDS || 30), WORKERS = 12;
const seed = Number(process.env.SOAK_SEED || Date.now() % 100000);
console.log(`soak: ${SECONDS} s, seed ${seed} (replay: SOAK_SEED=${seed})`);
const srv = await startServer(['--threads', '1', '--kv-cache-memory', '600KiB', '--max-num-seqs', '16',
  '--max-num-batched-tokens', '64', '--max-queue', '64']);
const stats = { ok: 0, cancelled: 0, bad: 0, busy: 0, failed: 0 };
const sharedPrefix = Array.from({ length: 70 }, (_, i) => 100 + i);

function fail(what, detail) { stats.failed++; check(false, what, detail); }

function randomBody(r) {
  const chat = r() < 0.5, stream = r() < 0.5, n = 1 + Math.floor(r() * 150), max = 1 + Math.floor(r() * 80);
  const body = { max_tokens: max, temperature: r() < 0.3 ? 0 : r() * 1.5, seed: Math.floor(r() * 1e6), stream };
  if (r() < 0.3) body.top_k = 1 + Math.floor(r() * 50);
  if (r() < 0.3) body.top_p = 0.5 + r() * 0.5;
  if (r() < 0.3) body.ignore_eos = true;
  if (r() < 0.2) body.stop = ['e', 'th', '\n'][Math.floor(r() * 3)];
  if (stream && r() < 0.7) body.stream_options = { include_usage: true };
  if (chat) {
    body.messages = [{ role: 'user', content: 'word '.repeat(Math.floor(n / 3)) + 'end' }];
    if (r() < 0.3) body.logprobs = true, body.top_logprobs = 2;
  } else {
    body.prompt = r() < 0.3 ? [...sharedPrefix, ...Array.from({ length: Math.floor(r() * 40) }, () => Math.floor(r() * 1000))]
      : r() < 0.5 ? Array.from({ length: n }, () => Math.floor(r() * 1000)) : 'text '.repeat(Math.floor(n / 2)) + '.';
    if (r() < 0.3) body.logprobs = 1;
  }
  if ((body.prompt && Array.isArray(body.prompt) && body.prompt.length + max > 256)) body.max_tokens = 256 - body.prompt.length;
  return { url: chat ? '/v1/chat/completions' : '/v1/completions', body };
}

function checkAnswer(url, body, r) {
  if (r.status === 503) { stats.busy++; return; }
  if (r.status === 400 && /context length/.test(r.body)) { stats.bad++; return; }   // a long chat prompt
  if (r.status !== 200) return fail(`status ${r.status} for a good request`, r.body.slice(0, 300));
  let usage = null, finish = null;
  if (body.stream) {
    if (!r.body.trimEnd().endsWith('data: [DONE]')) return fail('stream ends with [DONE]', r.body.slice(-200));
    for (const line of r.body.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const ch = JSON.parse(line.slice(6));
      if (ch.error) return fail('stream error', ch.error);
      if (ch.usage) usage = ch.usage;
      for (const c of ch.choices) if (c.finish_reason) finish = c.finish_reason;
    }
  } else {
    const j = JSON.parse(r.body);
    usage = j.usage;
    finish = j.choices[0].finish_reason;
  }
  if (!finish || !['stop', 'length'].includes(finish)) return fail('finish_reason', finish);
  if (usage) {
    if (usage.total_tokens !== usage.prompt_tokens + usage.completion_tokens) return fail('usage adds up', usage);
    if (usage.completion_tokens > body.max_tokens || (finish === 'length' && usage.completion_tokens !== body.max_tokens))
      return fail('completion tokens vs max_tokens', { usage, max: body.max_tokens, finish });
  }
  stats.ok++;
}

// Sends a request on a raw socket and drops it after `ms` (a cancellation).
function dropAfter(url, body, ms) {
  return new Promise((resolve) => {
    const s = JSON.stringify(body);
    const sock = net.connect(srv.port, '127.0.0.1', () => {
      sock.write(`POST ${url} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(s)}\r\n\r\n${s}`);
      setTimeout(() => { sock.destroy(); resolve(); }, ms);
    });
    sock.on('error', () => resolve());
  });
}

const BAD = ['{', '{"messages":5}', '{"prompt":"x","max_tokens":0}', '{"prompt":"x","temperature":"a"}',
  '{"prompt":[1,2,3],"model":"nope"}', '{"prompt":' + JSON.stringify(Array(400).fill(3)) + '}', '{"messages":[{"role":"user"}]}'];

async function worker(id, deadline) {
  const r = rng(seed * 100 + id);
  while (Date.now() < deadline) {
    const x = r(), { url, body } = randomBody(r);
    try {
      if (x < 0.12) {
        const bad = BAD[Math.floor(r() * BAD.length)];
        const res = await json(srv.base, 'POST', r() < 0.5 ? '/v1/completions' : '/v1/chat/completions', bad);
        if (res.status === 400 && res.json && res.json.error) stats.bad++; else fail('400 for a bad request', res.status + ' ' + res.body.slice(0, 200));
      } else if (x < 0.27) {
        await dropAfter(url, { ...body, max_tokens: Math.max(body.max_tokens, 40) }, Math.floor(r() * 30));
        stats.cancelled++;
      } else {
        checkAnswer(url, body, await json(srv.base, 'POST', url, body));
      }
    } catch (e) {
      fail('request failed', String(e));
    }
  }
}

try {
  const deadline = Date.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: WORKERS }, (_, i) => worker(i, deadline)));
  const pool = await poolIdle(srv.base, 30000);
  check(pool && pool.ok && pool.pages_used === 0 && pool.running === 0, 'page pool intact and empty after the soak', pool);
  const total = stats.ok + stats.cancelled + stats.bad + stats.busy + stats.failed;
  console.log(`soak: ${total} requests: ${JSON.stringify(stats)}; pool ${JSON.stringify(pool)}`);
  check(total >= 100 && stats.ok >= 50, 'a few hundred requests ran', stats);
} catch (e) {
  check(false, 'no exception', e.stack || String(e));
}
check(await srv.stop() === 0, 'server exits 0 on SIGTERM (no leak under ASan)', srv.stderr().slice(-3000));
done('server_soak');

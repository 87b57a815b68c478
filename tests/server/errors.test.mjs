// Bad input and faults: every malformed request gets a 400 (or 401/404/405/503) with an OpenAI error
// object and the server keeps serving; clients that disconnect mid-stream get their requests aborted
// and their pages freed; SIGTERM with requests in flight ends them and exits 0.
import net from 'node:net';
import { check, done, startServer, json, request, poolIdle } from './lib.mjs';

const CHAT = '/v1/chat/completions', CMPL = '/v1/completions';
const hello = { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 };

function isOpenAIError(r, status, param) {
  const e = r.json && r.json.error;
  return r.status === status && e && typeof e.message === 'string' && e.message.length > 0 &&
    typeof e.type === 'string' && 'param' in e && 'code' in e && (param === undefined || e.param === param);
}

async function stillServes(base, what) {
  const r = await json(base, 'POST', CHAT, hello);
  check(r.status === 200 && r.json.usage.completion_tokens >= 1, `still serves after ${what}`, r.body.slice(0, 300));
}

async function badRequests(base) {
  const cases = [
    ['malformed JSON', CHAT, '{"messages": [', undefined],
    ['JSON not an object', CHAT, '[1,2,3]', undefined],
    ['messages missing', CHAT, { max_tokens: 3 }, 'messages'],
    ['messages wrong type', CHAT, { messages: 'hi' }, 'messages'],
    ['message without role', CHAT, { messages: [{ content: 'x' }] }, 'messages'],
    ['unknown role', CHAT, { messages: [{ role: 'wizard', content: 'x' }] }, 'messages'],
    ['content wrong type', CHAT, { messages: [{ role: 'user', content: 42 }] }, 'messages'],
    ['temperature wrong type', CHAT, { ...hello, temperature: 'hot' }, 'temperature'],
    ['temperature negative', CHAT, { ...hello, temperature: -1 }, 'temperature'],
    ['top_p zero', CHAT, { ...hello, top_p: 0 }, 'top_p'],
    ['max_tokens string', CHAT, { ...hello, max_tokens: '5' }, 'max_tokens'],
    ['max_tokens zero', CHAT, { ...hello, max_tokens: 0 }, 'max_tokens'],
    ['max_tokens negative', CMPL, { prompt: 'x', max_tokens: -3 }, 'max_tokens'],
    ['max_completion_tokens zero', CHAT, { ...hello, max_completion_tokens: 0 }, 'max_completion_tokens'],
    ['max_tokens fractional', CMPL, { prompt: 'x', max_tokens: 2.5 }, 'max_tokens'],
    ['stream wrong type', CHAT, { ...hello, stream: 'yes' }, 'stream'],
    ['stream_options without stream', CHAT, { ...hello, stream_options: { include_usage: true } }, 'stream_options'],
    ['stop wrong type', CHAT, { ...hello, stop: 5 }, 'stop'],
    ['seed wrong type', CHAT, { ...hello, seed: 'abc' }, 'seed'],
    ['n = 2', CHAT, { ...hello, n: 2 }, 'n'],
    ['top_logprobs too big', CHAT, { ...hello, logprobs: true, top_logprobs: 50 }, 'top_logprobs'],
    ['unknown model', CHAT, { ...hello, model: 'gpt-17' }, 'model'],
    ['model wrong type', CHAT, { ...hello, model: 7 }, 'model'],
    ['prompt missing', CMPL, { max_tokens: 3 }, 'prompt'],
    ['prompt wrong type', CMPL, { prompt: { a: 1 } }, 'prompt'],
    ['token id out of range', CMPL, { prompt: [1, 2, 99999] }, 'prompt'],
    ['empty token prompt', CMPL, { prompt: [] }, 'prompt'],
    ['prompt longer than the context', CMPL, { prompt: Array(300).fill(20) }, 'prompt'],
    ['prompt + max_tokens past the context', CMPL, { prompt: Array(250).fill(20), max_tokens: 20 }, 'max_tokens'],
    ['chat longer than the context', CHAT, { messages: [{ role: 'user', content: 'word '.repeat(400) }] }, 'messages'],
  ];
  for (const [what, url, body, param] of cases) {
    const r = await json(base, 'POST', url, typeof body === 'string' ? body : JSON.stringify(body));
    check(isOpenAIError(r, 400, param), `400 for ${what}`, r.status + ' ' + r.body.slice(0, 300));
  }
  const unknown = await json(base, 'POST', CHAT, { ...hello, model: 'gpt-17' });
  check(unknown.json && unknown.json.error.code === 'model_not_found', 'unknown model: code model_not_found', unknown.body);
  const ctx = await json(base, 'POST', CMPL, { prompt: Array(300).fill(20) });
  check(ctx.json && /maximum context length is 256/.test(ctx.json.error.message), 'context error names the limit', ctx.body);
  // invalid UTF-8 inside a JSON string, and a lone surrogate escape
  const bad = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"ab'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]);
  check(isOpenAIError(await json(base, 'POST', CHAT, bad), 400), '400 for invalid UTF-8');
  const overlong = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
  check(isOpenAIError(await json(base, 'POST', CMPL, overlong), 400), '400 for overlong UTF-8');
  check(isOpenAIError(await json(base, 'POST', CMPL, '{"prompt":"\\ud800"}'), 400), '400 for a lone surrogate escape');
  const big = JSON.stringify({ prompt: 'x'.repeat(200 * 1024) });
  check(isOpenAIError(await json(base, 'POST', CMPL, big), 400), '400 for an oversized body');
  check((await json(base, 'GET', '/nope')).status === 404, '404 for an unknown route');
  check((await json(base, 'GET', CHAT)).status === 405, '405 for GET on a POST route');
  await stillServes(base, 'bad requests');
}

async function auth() {
  const s = await startServer(['--threads', '1', '--api-key', 'sekret']);
  check(isOpenAIError(await json(s.base, 'POST', CHAT, hello), 401), '401 without a key');
  check(isOpenAIError(await json(s.base, 'POST', CHAT, hello, { authorization: 'Bearer wrong' }), 401), '401 with a wrong key');
  check((await json(s.base, 'GET', '/v1/models', undefined, { authorization: 'Bearer wrong' })).status === 401, '401 on /v1/models');
  const ok = await json(s.base, 'POST', CHAT, hello, { authorization: 'Bearer sekret' });
  check(ok.status === 200, '200 with the key', ok.body.slice(0, 200));
  check((await request(s.base, 'GET', '/health')).status === 200, '/health needs no key');
  check(await s.stop() === 0, 'auth server exits 0');
}

async function queueFull() {
  const s = await startServer(['--threads', '1', '--max-queue', '2', '--max-num-seqs', '1']);
  const body = JSON.stringify({ prompt: [5, 6, 7], max_tokens: 200, ignore_eos: true });
  const rs = await Promise.all(Array.from({ length: 12 }, () => json(s.base, 'POST', CMPL, body)));
  const busy = rs.filter((r) => r.status === 503), ok = rs.filter((r) => r.status === 200);
  check(busy.length > 0 && busy.every((r) => r.headers['retry-after'] && isOpenAIError(r, 503)), '503 with Retry-After when the queue is full',
    rs.map((r) => r.status));
  check(ok.length >= 1 && ok.every((r) => r.json.usage.completion_tokens === 200), 'queued requests complete', ok.length);
  await stillServes(s.base, 'a full queue');
  check(await s.stop() === 0, 'queue server exits 0');
}

// Reads an SSE response until the first data line arrives, then drops the connection.
function streamThenDrop(port, body, afterBytes = 1) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => {
      sock.write(`POST ${CMPL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    let got = 0;
    sock.on('data', (d) => { got += d.length; if (got >= afterBytes && /data: /.test(d.toString())) { sock.destroy(); resolve(true); } });
    sock.on('error', () => resolve(false));
    sock.on('close', () => resolve(false));
  });
}

function postThenDrop(port, body, ms) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => {
      sock.write(`POST ${CMPL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      setTimeout(() => { sock.destroy(); resolve(true); }, ms);
    });
    sock.on('error', () => resolve(false));
  });
}

async function metricValue(base, name, label) {
  const r = await request(base, 'GET', '/metrics');
  const line = r.body.split('\n').find((l) => l.startsWith(name + '{') && (!label || l.includes(label)));
  return line ? Number(line.split(' ').pop()) : NaN;
}

async function disconnects(base, port) {
  const long = JSON.stringify({ prompt: Array.from({ length: 20 }, (_, i) => 30 + i), max_tokens: 230, ignore_eos: true, stream: true });
  const dropped = await Promise.all(Array.from({ length: 6 }, () => streamThenDrop(port, long)));
  check(dropped.every(Boolean), 'streams started before the drop');
  const slow = JSON.stringify({ prompt: [9, 8, 7], max_tokens: 230, ignore_eos: true });
  await Promise.all(Array.from({ length: 4 }, () => postThenDrop(port, slow, 5)));
  const pool = await poolIdle(base);
  check(pool && pool.ok && pool.running === 0 && pool.pages_used === 0, 'pool intact after disconnects', pool);
  const aborted = await metricValue(base, 'dsinfer:request_success_total', 'finished_reason="abort"');
  check(aborted >= 1, 'disconnected requests were aborted', aborted);
  await stillServes(base, 'disconnects');
}

async function metrics(base) {
  const r = await request(base, 'GET', '/metrics');
  for (const name of ['dsinfer:num_requests_running', 'dsinfer:num_requests_waiting', 'dsinfer:kv_pages_used', 'dsinfer:prefix_cache_hit_rate',
    'dsinfer:prompt_tokens_total', 'dsinfer:generation_tokens_total', 'dsinfer:time_to_first_token_seconds_bucket',
    'dsinfer:time_per_output_token_seconds_count', 'dsinfer:e2e_request_latency_seconds_sum', 'dsinfer:kv_pool_ok'])
    check(r.body.includes(name), `/metrics has ${name}`);
  check(r.headers['content-type'].startsWith('text/plain'), '/metrics is text/plain');
  check(await metricValue(base, 'dsinfer:generation_tokens_total') > 0, 'generation tokens counted');
  check(await metricValue(base, 'dsinfer:cache_config_info', 'cache_dtype="bf16"') === 1, 'the default KV cache is bf16 (cache_config_info)');
}

async function shutdownInFlight() {
  const s = await startServer(['--threads', '1', '--max-num-seqs', '2']);
  const body = JSON.stringify({ prompt: [5, 6, 7], max_tokens: 250, ignore_eos: true, stream: true });
  const inflight = Array.from({ length: 6 }, () => request(s.base, 'POST', CMPL, { body }).catch(() => ({ status: 0, body: '' })));
  await new Promise((res) => setTimeout(res, 30));
  const code = await s.stop('SIGTERM');
  check(code === 0, 'SIGTERM with requests in flight: exit 0', code + ' ' + s.stderr().slice(-500));
  const rs = await Promise.all(inflight);
  check(rs.every((r) => r.status === 0 || r.status === 503 || (r.status === 200 && r.body.includes('[DONE]'))),
    'in-flight streams ended cleanly', rs.map((r) => r.status));
}

const srv = await startServer(['--threads', '1', '--max-body-bytes', '64KiB', '--max-num-seqs', '4']);
try {
  await badRequests(srv.base);
  await auth();
  await queueFull();
  await disconnects(srv.base, srv.port);
  await metrics(srv.base);
  await shutdownInFlight();
  const pool = await poolIdle(srv.base);
  check(pool && pool.ok && pool.pages_used === 0, 'page pool intact at the end', pool);
} catch (e) {
  check(false, 'no exception', e.stack || String(e));
}
check(await srv.stop() === 0, 'server exits 0 on SIGTERM', srv.stderr().slice(-2000));
done('server_errors');

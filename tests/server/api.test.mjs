// The OpenAI API through the official client: chat and completions, streaming and not, usage, seeds,
// stop strings, logprobs, 64 concurrent streams, R1 reasoning, and greedy outputs equal to
// `dsinfer generate` whatever else runs in the batch (chunked prefill and prefix-cache hits included).
import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import { check, done, startServer, generateIds, poolIdle, rng, BIN } from './lib.mjs';

const srv = await startServer(['--threads', '1', '--served-model-name', 'tiny', '--max-num-batched-tokens', '48',
  '--max-num-seqs', '32', '--kv-cache-memory', '4MiB']);
const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'none', maxRetries: 0 });
const user = (content) => [{ role: 'user', content }];

async function collectChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const r = { content: '', reasoning: '', role: null, finish: null, usage: null, chunks: 0, lp: [] };
  for await (const ch of stream) {
    r.chunks++;
    if (ch.usage) r.usage = ch.usage;
    for (const c of ch.choices) {
      if (c.delta.role) r.role = c.delta.role;
      r.content += c.delta.content || '';
      r.reasoning += c.delta.reasoning_content || '';
      if (c.finish_reason) r.finish = c.finish_reason;
      if (c.logprobs && c.logprobs.content) r.lp.push(...c.logprobs.content);
    }
  }
  return r;
}

async function collectCompletion(params) {
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const r = { text: '', finish: null, usage: null, tokens: [] };
  for await (const ch of stream) {
    if (ch.usage) r.usage = ch.usage;
    for (const c of ch.choices) {
      r.text += c.text;
      if (c.finish_reason) r.finish = c.finish_reason;
      if (c.logprobs) r.tokens.push(...c.logprobs.tokens);
    }
  }
  return r;
}

const idsOf = (tokens) => tokens.map((t) => Number(String(t.token ?? t).replace('token_id:', '')));

async function basics() {
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'tiny', 'models list', models.data);
  const c = await client.chat.completions.create({ model: 'tiny', messages: user('Hello'), max_tokens: 12, ignore_eos: true, temperature: 0 });
  check(c.object === 'chat.completion' && typeof c.choices[0].message.content === 'string', 'chat completion shape', c);
  check(c.choices[0].finish_reason === 'length' && c.usage.completion_tokens === 12, 'chat: length at max_tokens', c.usage);
  check(c.usage.prompt_tokens + c.usage.completion_tokens === c.usage.total_tokens, 'chat usage adds up', c.usage);
  const s = await collectChat({ model: 'tiny', messages: user('Hello'), max_tokens: 12, ignore_eos: true, temperature: 0 });
  check(s.role === 'assistant' && s.content === c.choices[0].message.content, 'chat stream = non-stream', [s.content, c.choices[0].message.content]);
  check(s.finish === 'length' && s.usage && s.usage.completion_tokens === 12 && s.usage.total_tokens === s.usage.prompt_tokens + 12,
    'chat stream usage', s.usage);
  const mc = await client.chat.completions.create({ model: 'tiny', messages: user('Hello'), max_completion_tokens: 5, ignore_eos: true });
  check(mc.usage.completion_tokens === 5, 'max_completion_tokens', mc.usage);
  const p = await client.completions.create({ model: 'tiny', prompt: 'In the beginning', max_tokens: 10, ignore_eos: true, temperature: 0 });
  check(p.object === 'text_completion' && p.usage.completion_tokens === 10 && p.choices[0].finish_reason === 'length', 'completion', p);
  const ps = await collectCompletion({ model: 'tiny', prompt: 'In the beginning', max_tokens: 10, ignore_eos: true, temperature: 0 });
  check(ps.text === p.choices[0].text && ps.usage.completion_tokens === 10, 'completion stream = non-stream', [ps.text, p.choices[0].text]);
  const d = await client.completions.create({ prompt: 'x', max_tokens: 3, ignore_eos: true });   // no model: the served one
  check(d.usage.completion_tokens === 3 && d.model === 'tiny', 'default model, completions', d);
}

async function seeds() {
  const req = { model: 'tiny', messages: user('Tell me a story'), max_tokens: 24, ignore_eos: true, temperature: 1.0, top_p: 0.95, top_k: 50, seed: 1234 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  const s = await collectChat(req);
  const other = await client.chat.completions.create({ ...req, seed: 4321 });
  check(a.choices[0].message.content === b.choices[0].message.content, 'same seed, same text');
  check(s.content === a.choices[0].message.content, 'same seed, streamed, same text');
  check(other.choices[0].message.content !== a.choices[0].message.content, 'another seed, another text');
  const pen = await client.chat.completions.create({ ...req, presence_penalty: 1.5, frequency_penalty: 1.0, min_p: 0.01 });
  check(pen.usage.completion_tokens === 24, 'penalties accepted', pen.usage);
}

async function stops() {
  const base = { model: 'tiny', prompt: 'And God said', max_tokens: 40, ignore_eos: true, temperature: 0 };
  const full = (await client.completions.create(base)).choices[0].text;
  const clean = [...full].filter((ch) => ch !== '\ufffd').join('');
  // a stop string taken from the middle of the greedy text, free of replacement characters
  let stop = null;
  for (let i = 4; i + 3 <= full.length && !stop; i++) {
    const cand = full.slice(i, i + 3);
    if (!cand.includes('\ufffd') && !/[\ud800-\udfff]/.test(cand) && cand.trim().length) stop = cand;
  }
  if (!check(stop !== null, 'found a stop string candidate', clean)) return;
  const cut = full.slice(0, full.indexOf(stop));
  const r = await client.completions.create({ ...base, stop: [stop, 'never-appears-zzz'] });
  check(r.choices[0].text === cut && r.choices[0].finish_reason === 'stop' && r.choices[0].stop_reason === stop,
    'stop string cuts the text', { got: r.choices[0].text, want: cut, stop });
  check(r.usage.completion_tokens < 40, 'stop string ends generation early', r.usage);
  const s = await collectCompletion({ ...base, stop });
  check(s.text === cut && s.finish === 'stop', 'stop string, streamed', { got: s.text, want: cut });
  const c = await client.chat.completions.create({ model: 'tiny', messages: user('Hi'), max_tokens: 30, ignore_eos: true, temperature: 0 });
  const ct = c.choices[0].message.content;
  const cs = ct.length > 8 && !ct.slice(5, 7).includes('\ufffd') ? ct.slice(5, 7) : null;
  if (cs) {
    const c2 = await collectChat({ model: 'tiny', messages: user('Hi'), max_tokens: 30, ignore_eos: true, temperature: 0, stop: cs });
    check(c2.content === ct.slice(0, ct.indexOf(cs)) && c2.finish === 'stop', 'chat stop string, streamed', [c2.content, cs]);
  }
}

async function logprobs() {
  const c = await client.chat.completions.create({ model: 'tiny', messages: user('Hello'), max_tokens: 8, ignore_eos: true,
    temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = c.choices[0].logprobs.content;
  check(lp.length === 8, 'one logprob entry per token', lp.length);
  check(lp.every((e) => e.top_logprobs.length === 3 && e.logprob <= 0 && Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4),
    'greedy token = top-1 logprob', lp[0]);
  const s = await collectChat({ model: 'tiny', messages: user('Hello'), max_tokens: 8, ignore_eos: true, temperature: 0, logprobs: true });
  check(s.lp.length === 8, 'streamed logprobs: one per token', s.lp.length);
}

// Greedy outputs equal `dsinfer generate` with other requests in the same batches, chunked prefill
// (--max-num-batched-tokens 48) and, the second time, prompts partly served from the prefix cache.
async function greedyEqualsGenerate() {
  const r = rng(7);
  const prompts = [3, 17, 40, 70, 130].map((n) => Array.from({ length: n }, () => Math.floor(r() * 1000) + 16));
  prompts.push([0, 17, 99]);
  const want = prompts.map((p) => generateIds(p, 24));
  for (let round = 0; round < 2; round++) {
    const noise = Array.from({ length: 12 }, (_, i) => client.completions.create({ prompt: Array.from({ length: 5 + 9 * i }, () => Math.floor(r() * 1000)),
      max_tokens: 10 + i, temperature: 0.8, seed: i }));
    const got = await Promise.all(prompts.map((p) => client.completions.create({ prompt: p, max_tokens: 24, temperature: 0,
      logprobs: 0, return_tokens_as_token_ids: true })));
    await Promise.all(noise);
    got.forEach((g, i) => check(JSON.stringify(idsOf(g.choices[0].logprobs.tokens)) === JSON.stringify(want[i]),
      `round ${round}: greedy ids of prompt ${i} (${prompts[i].length} tokens) equal dsinfer generate`,
      { got: idsOf(g.choices[0].logprobs.tokens), want: want[i] }));
    if (round === 1) check(got.some((g) => g.usage.prompt_tokens_details.cached_tokens > 0), 'prefix cache hits in round 2');
  }
}

async function concurrentStreams() {
  const n = 64;
  const lens = Array.from({ length: n }, (_, i) => 8 + (i * 7) % 25);
  const results = await Promise.all(lens.map((len, i) => collectChat({ model: 'tiny', messages: user(`request ${i}: ${'word '.repeat(i % 9)}`),
    max_tokens: len, ignore_eos: true, temperature: 0.7, seed: i, logprobs: true })));
  const ok = results.filter((r, i) => r.finish === 'length' && r.usage && r.usage.completion_tokens === lens[i] && r.lp.length === lens[i]);
  check(ok.length === n, `${n} concurrent streams complete with their token counts`, `${ok.length} ok`);
}

async function reasoning() {
  const r1 = await startServer(['--threads', '1', '--chat-template', 'deepseek-r1', '--served-model-name', 'r1']);
  const c1 = new OpenAI({ baseURL: r1.base + '/v1', apiKey: 'none', maxRetries: 0 });
  const req = { model: 'r1', messages: user('Why?'), max_tokens: 20, ignore_eos: true, temperature: 0 };
  const c = await c1.chat.completions.create(req);
  const m = c.choices[0].message;
  check(typeof m.reasoning_content === 'string' && m.reasoning_content.length > 0, 'R1: reasoning_content apart', m);
  const stream = await c1.chat.completions.create({ ...req, stream: true });
  let rs = '', cs = '';
  for await (const ch of stream) for (const x of ch.choices) { rs += x.delta.reasoning_content || ''; cs += x.delta.content || ''; }
  check(rs === m.reasoning_content && cs === (m.content || ''), 'R1: streamed reasoning and content deltas', { rs, cs, m });
  check(await r1.stop() === 0, 'R1 server exits 0 on SIGTERM');
}

// `dsinfer bench serve` against this server: every request succeeds, all tokens are counted.
function benchServe() {
  const out = execFileSync(BIN, ['bench', 'serve', '--port', String(srv.port), '--model', 'tiny', '--num-prompts', '24',
    '--input-len', '20', '--output-len', '8', '--max-concurrency', '8', '--request-rate', '200'], { encoding: 'utf8' });
  const num = (label) => Number((out.match(new RegExp(label + '\\s+([0-9.]+)')) || [])[1]);
  check(num('Successful requests:') === 24 && num('Total generated tokens:') === 24 * 8 && /Median TTFT|Mean TTFT/.test(out),
    'bench serve: 24 requests, 192 tokens, latency percentiles', out);
}

try {
  await basics();
  benchServe();
  await seeds();
  await stops();
  await logprobs();
  await greedyEqualsGenerate();
  await concurrentStreams();
  await reasoning();
  const pool = await poolIdle(srv.base);
  check(pool && pool.ok && pool.pages_used === 0, 'page pool intact and empty at the end', pool);
} catch (e) {
  check(false, 'no exception', e.stack || String(e));
}
check(await srv.stop() === 0, 'server exits 0 on SIGTERM', srv.stderr().slice(-2000));
done('server_api');

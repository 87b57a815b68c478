// Load for the dashboard tests: `workers` clients that each send completions (random prompts,
// ignore_eos, max_tokens tokens) back to back until stop() is called; counts what came back.
import { json } from '../server/lib.mjs';

export function startLoad(base, { workers = 6, maxTokens = 160, seed = 1 } = {}) {
  let running = true, ok = 0, failed = 0, s = seed >>> 0;
  const rand = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s; };
  const loop = async () => {
    while (running) {
      const prompt = Array.from({ length: 4 + (rand() % 20) }, () => 'w' + (rand() % 500)).join(' ');
      const r = await json(base, 'POST', '/v1/completions', { prompt, max_tokens: maxTokens, ignore_eos: true, temperature: 0 })
        .catch((e) => ({ status: 0, body: String(e) }));
      if (r.status === 200) ok++; else { failed++; if (failed < 3) console.error('load: request failed:', r.status, r.body); }
    }
  };
  const all = Promise.all(Array.from({ length: workers }, loop));
  return {
    stats: () => ({ ok, failed }),
    stop: async () => { running = false; await all; return { ok, failed }; },
  };
}

// Polls until pred(value of get()) holds or the time runs out; returns the last value.
export async function until(get, pred, timeoutMs, stepMs = 200) {
  const t0 = Date.now();
  for (;;) {
    const v = await get();
    if (pred(v) || Date.now() - t0 > timeoutMs) return v;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

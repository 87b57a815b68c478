// Differential test data: random strings mixing scripts, digits, whitespace runs, CR/LF, emoji,
// combining marks and special-token text, encoded by the reference Rust tokenizer (@anush008/tokenizers,
// HF tokenizers). Writes JSONL {"text", "ids", "decoded"} for tests/unit/test_tok_golden.c.
//   node gen_diff.js TOKENIZER_JSON OUT.jsonl N SEED
'use strict';
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

const [tokPath, outPath, nArg, seedArg] = process.argv.slice(2);
const N = parseInt(nArg || '10000', 10);
const seed = (parseInt(seedArg || '1', 10) >>> 0);

function mulberry32(a) {
  return function () {
    a |= 0; a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry32(seed);
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];
const cp = (lo, hi) => String.fromCodePoint(lo + ri(hi - lo + 1));
const rep = (f, n) => { let s = ''; for (let i = 0; i < n; i++) s += f(); return s; };

const tok = Tokenizer.fromFile(tokPath);
const added = JSON.parse(fs.readFileSync(tokPath, 'utf8')).added_tokens.map((t) => t.content)
  .filter((t) => !/place▁holder/.test(t) || rnd() < 0.02);

const words = ['the', 'Hello', 'world', 'tokenizer', "don't", "I'm", "we'll", 'x', 'A', 'camelCase', 'snake_case',
  'URL', 'https://example.com/a?b=1&c=2', 'foo.bar()', '#include', '<think>', '</think>', '<|EOT|>', 'ﬁ', 'Straße'];
const scripts = [
  () => cp(0x61, 0x7a), () => cp(0x41, 0x5a), () => cp(0x30, 0x39), () => cp(0x21, 0x2f), () => cp(0x3a, 0x40),
  () => cp(0x5b, 0x60), () => cp(0x7b, 0x7e), () => cp(0xc0, 0x24f), () => cp(0x391, 0x3c9), () => cp(0x410, 0x44f),
  () => cp(0x5d0, 0x5ea), () => cp(0x620, 0x64a), () => cp(0x660, 0x669), () => cp(0x900, 0x97f), () => cp(0xe01, 0xe5b),
  () => cp(0x4e00, 0x9fa5), () => cp(0x9fa6, 0x9fff), () => cp(0x3040, 0x30ff), () => cp(0xac00, 0xd7a3),
  () => cp(0xff01, 0xff5e), () => cp(0x2000, 0x206f), () => cp(0x2190, 0x22ff), () => cp(0x2460, 0x24ff),
  () => cp(0x1f300, 0x1f64f), () => cp(0x1f900, 0x1f9ff), () => cp(0x10000, 0x1007f), () => cp(0x20000, 0x2a6df),
  () => cp(0x300, 0x36f), () => cp(0xb2, 0xbe), () => cp(0x80, 0xff), () => cp(0x1d400, 0x1d7ff),
];
const spaces = [' ', '  ', '\t', '\n', '\r\n', '\r', '\n\n', ' \n', '\u00a0', '\u3000', '\u2009', '\u0085', '\u000b',
  '\u000c', '\u2028', '\u200b', '\ufeff', ' \t '];
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇩🇰', '❤️', '✔︎', '🧑🏿‍💻', '☃', '🏳️‍🌈', '1️⃣'];
const combining = () => pick(['e', 'a', 'n', 'क', 'ก', 'A']) + rep(() => cp(0x300, 0x36f), 1 + ri(3));

// kinds < 10 draw only from ranges assigned in Unicode 14 (PCRE2 10.42's tables); kind 10 is any scalar value
function fragment(kinds = 11) {
  switch (ri(kinds)) {
    case 0: return pick(words);
    case 1: return rep(() => cp(0x30, 0x39), 1 + ri(9));
    case 2: return rep(() => pick(spaces), 1 + ri(4));
    case 3: return pick(emoji);
    case 4: return combining();
    case 5: return pick(added);
    case 6: { const t = pick(added); return t.slice(0, 1 + ri(t.length - 1)); }   // partial special text
    case 7: return rep(pick(scripts), 1 + ri(6));
    case 8: return ' ' + pick(words);
    case 9: return rep(() => pick(['.', ',', '!', '?', '"', "'", '(', ')', '-', '—', '…', '。', '、']), 1 + ri(3));
    default: return String.fromCodePoint(safeCp());
  }
}
function safeCp() {   // any scalar value (no surrogates)
  for (;;) { const c = rnd() < 0.8 ? ri(0x10000) : 0x10000 + ri(0x100000); if (c < 0xd800 || c > 0xdfff) return c; }
}

const hex = (s) => Buffer.from(s, 'utf8').toString('hex');   // keeps U+0000 (cJSON strings stop at NUL)

async function main() {
  const texts = [''];
  if (process.env.TOK_DIFF_BIG) {   // 1 MB inputs: mixed text, one whitespace run, one long word, digits
    let mixed = '';
    while (mixed.length < 1 << 20) mixed += fragment(10);   // no random code points: checked exactly
    texts.push(mixed, ' \n\t'.repeat(350000), 'a'.repeat(1 << 20), '7'.repeat(1 << 20));
  }
  while (texts.length < N) {
    const k = ri(4) === 0 ? ri(3) : 1 + ri(25);
    let s = '';
    for (let i = 0; i < k; i++) s += fragment();
    texts.push(s);
  }
  const out = fs.openSync(outPath, 'w');
  const B = 500;
  for (let i = 0; i < texts.length; i += B) {
    const chunk = texts.slice(i, i + B);
    const enc = await tok.encodeBatch(chunk, { addSpecialTokens: false });
    const ids = enc.map((e) => e.getIds());
    const dec = await tok.decodeBatch(ids, false);
    const decSkip = await tok.decodeBatch(ids, true);
    let lines = '';
    for (let j = 0; j < chunk.length; j++) lines += JSON.stringify({ text: chunk[j], ids: ids[j], decoded: dec[j], text_hex: hex(chunk[j]), decoded_hex: hex(dec[j]), decoded_skip_hex: hex(decSkip[j]) }) + '\n';
    fs.writeSync(out, lines);
  }
  fs.closeSync(out);
}
main().catch((e) => { console.error(e); process.exit(1); });

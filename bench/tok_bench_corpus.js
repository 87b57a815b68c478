// Writes a few MB of mixed text for the tokenizer benchmark: English technical prose and C code (this
// repository's docs and sources), Chinese/Japanese/Korean, Cyrillic, numbers, emoji and chat markers,
// interleaved in paragraphs by a seeded PRNG.   node tok_bench_corpus.js OUT [MB]
'use strict';
const fs = require('fs');
const path = require('path');
const [out, mbArg] = process.argv.slice(2);
const target = Math.round(parseFloat(mbArg || '4') * (1 << 20));
let a = 12345;
const rnd = () => { a = (a * 1103515245 + 12345) >>> 0; return a / 4294967296; };
const root = path.join(__dirname, '..');
const files = [];
const walk = (d) => { for (const f of fs.readdirSync(d)) { const p = path.join(d, f);
  if (fs.statSync(p).isDirectory()) walk(p); else if (/\.(c|h|md)$/.test(f)) files.push(p); } };
walk(path.join(root, 'src'));
const docs = ['/work/shared/docs/deepseek-spec.md', path.join(root, 'README.md')].filter((p) => fs.existsSync(p));
const paras = [...docs, ...files].flatMap((p) => fs.readFileSync(p, 'utf8').split(/\n\n+/)).filter((s) => s.length > 20);
const other = [
  '深度求索是一家专注于通用人工智能的公司。今天天气很好，我们去公园散步吧。模型的参数量为6710亿。',
  '日本語のテキストとカタカナ、ひらがなを含む文章です。東京は2024年に多くの観光客を迎えました。',
  '한국어 텍스트도 포함됩니다. 서울의 인구는 약 950만 명입니다.',
  'Привет, мир! Это тестовый текст на русском языке, 12345 рублей.',
  'Emoji 😀👍🏽 and math: ∑_{i=1}^{n} x_i² = 3.14159, ε < 10⁻⁶ 🇩🇰',
  '<｜User｜>What is 2+2?<｜Assistant｜><think>\nSimple arithmetic.\n</think>\n\n2 + 2 = 4.<｜end▁of▁sentence｜>',
];
let s = '';
while (s.length < target) {
  s += (rnd() < 0.8 ? paras[Math.floor(rnd() * paras.length)] : other[Math.floor(rnd() * other.length)]) + '\n\n';
}
fs.writeFileSync(out, s);
console.log(`${out}: ${Buffer.byteLength(s)} bytes`);

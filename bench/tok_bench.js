// Reference side of the tokenizer benchmark: @anush008/tokenizers (HF tokenizers, Rust) encoding the
// same file. Prints MB/s for one encode() of the whole text (best of 3) and for encodeBatch() of its
// paragraphs (HF parallelizes batches over the cores).   node tok_bench.js TOKENIZER_JSON TEXT_FILE
'use strict';
const fs = require('fs');
const { Tokenizer } = require(require.resolve('@anush008/tokenizers', { paths: [__dirname + '/../tests/tokenizer'] }));
async function main() {
  const [tj, file] = process.argv.slice(2);
  const text = fs.readFileSync(file, 'utf8');
  const mb = Buffer.byteLength(text) / 1e6;
  const tok = Tokenizer.fromFile(tj);
  let best = 1e9, n = 0;
  for (let r = 0; r < 3; r++) {
    const t0 = process.hrtime.bigint();
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    n = enc.getIds().length; best = Math.min(best, dt);
  }
  console.log(`hf-tokenizers encode (1 call, whole text): ${(mb / best).toFixed(2)} MB/s  (${n} tokens, ${mb.toFixed(2)} MB, ${best.toFixed(3)} s)`);
  const paras = text.split(/(?<=\n\n)/);
  best = 1e9;
  for (let r = 0; r < 3; r++) {
    const t0 = process.hrtime.bigint();
    await tok.encodeBatch(paras, { addSpecialTokens: false });
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(`hf-tokenizers encodeBatch (${paras.length} paragraphs, all cores): ${(mb / best).toFixed(2)} MB/s`);
  await perParagraph(tok, paras, mb);
}
async function perParagraph(tok, paras, mb) {
  let best = 1e9, total = 0;
  for (let r = 0; r < 3; r++) {
    const t0 = process.hrtime.bigint();
    total = 0;
    for (const p of paras) total += (await tok.encode(p, null, { addSpecialTokens: false })).getIds().length;
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(`hf-tokenizers encode (one call per paragraph, sequential): ${(mb / best).toFixed(2)} MB/s  (${total} tokens)`);
}
main();

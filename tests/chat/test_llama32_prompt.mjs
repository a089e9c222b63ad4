// Acceptance: a Llama 3.2 Instruct model (real tokenizer and real
// tokenizer.chat_template, tiny random weights) prompted through
// npullm-run gets exactly llama.cpp's prompt: the rendered text
// (--print-prompt) and the ids (--json, also of a real generation run).
// The date the template prints is fixed for us by NPULLM_CHAT_DATE to the
// one llama.cpp uses (today).
//
// usage: node test_llama32_prompt.mjs NPULLM_RUN MODEL.gguf
import { spawnSync } from "node:child_process";
import { loadModel } from "@fugood/llama.node";

const [run, modelPath] = process.argv.slice(2);
const ctx = await loadModel({ model: modelPath, vocab_only: true });
const BOS = "<|begin_of_text|>";
const today = () => ctx.getFormattedChat([{ role: "user", content: "x" }], "{{ strftime_now('%Y-%m-%d') }}", { jinja: true }).prompt;

const cases = [
  { name: "--prompt Hello", args: ["--prompt", "Hello"], messages: [{ role: "user", content: "Hello" }] },
  { name: "--system and --prompt", args: ["--system", "Be brief.", "--prompt", "Hi <|eot_id|> there"],
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi <|eot_id|> there" }] },
];
const conv = [{ role: "system", content: "You are a pirate." }, { role: "user", content: "Ahoy" },
  { role: "assistant", content: "Arr!" }, { role: "user", content: "Where is the treasure?" }];
cases.push({ name: "--messages", args: ["--messages", JSON.stringify(conv)], messages: conv });

let failures = 0;
let date = today();
for (let attempt = 0; attempt < 2; attempt++) {
  failures = 0;
  date = today();
  for (const c of cases) {
    const env = { ...process.env, NPULLM_CHAT_DATE: date };
    const p = spawnSync(run, [modelPath, ...c.args, "--print-prompt", "--json"], { encoding: "utf8", env });
    if (p.status !== 0) {
      failures++;
      console.log(`not ok - ${c.name}: npullm-run failed (${p.status}): ${p.stderr}`);
      continue;
    }
    const ours = JSON.parse(p.stdout);
    const expected = BOS + ctx.getFormattedChat(c.messages, null, { jinja: true, add_generation_prompt: true }).prompt;
    // llama.cpp parses control tokens in the whole rendering; our ids differ
    // only where content carries control-token text (it stays text).
    const oracle = Array.from((await ctx.tokenize(expected)).tokens);
    if (ours.prompt !== expected) {
      failures++;
      console.log(`not ok - ${c.name}: prompt ${JSON.stringify(ours.prompt)}, llama.cpp ${JSON.stringify(expected)}`);
      continue;
    }
    const injected = c.messages.some((m) => m.content.includes("<|eot_id|>"));
    const same = JSON.stringify(ours.prompt_tokens) === JSON.stringify(oracle);
    if (injected ? same : !same) {
      failures++;
      console.log(`not ok - ${c.name}: ids ${ours.prompt_tokens.join(" ")}\n   llama.cpp ${oracle.join(" ")}`);
      continue;
    }
    if (injected && ours.prompt_tokens.includes(128009) &&
        ours.prompt_tokens.filter((t) => t === 128009).length !== oracle.filter((t) => t === 128009).length - 1) {
      failures++;
      console.log(`not ok - ${c.name}: <|eot_id|> typed by the user became a control token`);
      continue;
    }
    // A real run reports the same prompt ids.
    const g = spawnSync(run, [modelPath, ...c.args, "-n", "2", "--temperature", "0", "--json"], { encoding: "utf8", env });
    const gen = g.status === 0 ? JSON.parse(g.stdout) : null;
    if (!gen || JSON.stringify(gen.prompt_tokens) !== JSON.stringify(ours.prompt_tokens)) {
      failures++;
      console.log(`not ok - ${c.name}: generation run reports other prompt ids (${g.status}: ${g.stderr})`);
      continue;
    }
    console.log(`ok - ${c.name}: ${ours.prompt_tokens.length} tokens, as llama.cpp${injected ? " (typed <|eot_id|> kept as text)" : ""}`);
  }
  if (today() === date) break;
}
await ctx.release();
process.exit(failures ? 1 : 0);

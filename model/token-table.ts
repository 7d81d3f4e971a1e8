/**
 * A tokenizer's decoding half as a few flat arrays: each id's bytes and its text as the vocabulary
 * lists it, and the special ids. What a chat server's slot worker needs of the tokenizer (it turns
 * generated ids into text, and never samples a special id), sent to it by message in place of the
 * tokenizer files: building Qwen3's 151,936-id tokenizer from its files cost about 200 MB of resident
 * memory in each Deno worker, and this table about 2 MB. The server's thread keeps the whole tokenizer
 * and does every encoding.
 *
 * @example
 * ```ts
 * import { tableTokenizer, tokenTable } from "./token-table.ts";
 * import type { Tokenizer } from "./tokenizer-types.ts";
 * declare const tokenizer: Tokenizer;
 * const decoding = tableTokenizer(tokenTable(tokenizer), "out/qwen3.lut4");
 * decoding.decode([9707, 11]) === tokenizer.decode([9707, 11]); // true
 * ```
 * @module
 */
import type { EncodeOptions, Tokenizer } from "./tokenizer-types.ts";

/** The table: ids' bytes and texts back to back, `…Ends[i]` where id i's ends. Plain data: it crosses to a worker. */
export interface TokenTable {
  kind: Tokenizer["kind"];
  size: number;
  bos: number | undefined;
  eos: number[];
  pad: number | undefined;
  specials: number[];
  bytes: Uint8Array;
  bytesEnds: Uint32Array;
  /** `tokenText` of each id, UTF-8. */
  texts: Uint8Array;
  textsEnds: Uint32Array;
}

/** The decoding half of `tokenizer`, every id's bytes and text read once. */
export function tokenTable(tokenizer: Tokenizer): TokenTable {
  const utf8 = new TextEncoder();
  const bytes = packed(tokenizer.size, (id) => tokenizer.tokenBytes(id));
  const texts = packed(tokenizer.size, (id) => utf8.encode(tokenizer.tokenText(id)));
  return {
    kind: tokenizer.kind,
    size: tokenizer.size,
    bos: tokenizer.bos,
    eos: [...tokenizer.eos],
    pad: tokenizer.pad,
    specials: [...tokenizer.specials],
    bytes: bytes.all,
    bytesEnds: bytes.ends,
    texts: texts.all,
    textsEnds: texts.ends,
  };
}

/** `size` byte strings back to back, and where each ends. */
function packed(size: number, of: (id: number) => Uint8Array): { all: Uint8Array; ends: Uint32Array } {
  const parts: Uint8Array[] = [];
  const ends = new Uint32Array(size);
  let total = 0;
  for (let id = 0; id < size; id++) {
    const b = of(id);
    parts.push(b);
    total += b.length;
    ends[id] = total;
  }
  const all = new Uint8Array(total);
  for (let id = 0, at = 0; id < size; at = ends[id], id++) all.set(parts[id], at);
  return { all, ends };
}

/**
 * A tokenizer over `table` that decodes exactly as the tokenizer it came from (the same bytes per id,
 * special ids dropped unless asked for) and refuses to encode, naming `where`.
 */
export function tableTokenizer(table: TokenTable, where: string): Tokenizer {
  const specialSet = new Set(table.specials);
  const slice = (all: Uint8Array, ends: Uint32Array, id: number) => {
    if (!(Number.isInteger(id) && id >= 0 && id < table.size)) {
      throw new RangeError(`token id ${id} is not in the tokenizer of ${where} (${table.size} ids)`);
    }
    return all.subarray(id === 0 ? 0 : ends[id - 1], ends[id]);
  };
  const tokenBytes = (id: number) => slice(table.bytes, table.bytesEnds, id);
  const textDecoder = new TextDecoder("utf-8", { ignoreBOM: true });
  return {
    kind: table.kind,
    size: table.size,
    bos: table.bos,
    eos: table.eos,
    pad: table.pad,
    specials: table.specials,
    encode(_text: string, _options?: EncodeOptions): number[] {
      throw new Error(
        `${where}: this tokenizer only decodes (a slot's table); encode on the server's thread`,
      );
    },
    decode(ids: ArrayLike<number>, options: { specials?: boolean } = {}): string {
      const dec = new TextDecoder("utf-8", { ignoreBOM: true });
      let text = "";
      for (let i = 0; i < ids.length; i++) {
        if (options.specials || !specialSet.has(ids[i])) {
          text += dec.decode(tokenBytes(ids[i]), { stream: true });
        }
      }
      return text + dec.decode();
    },
    streamDecoder(): (id: number) => string {
      const dec = new TextDecoder("utf-8", { ignoreBOM: true });
      return (id) => (specialSet.has(id) ? "" : dec.decode(tokenBytes(id), { stream: true }));
    },
    tokenBytes,
    tokenText: (id) => textDecoder.decode(slice(table.texts, table.textsEnds, id)),
  };
}

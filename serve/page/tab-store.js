// The model the tab runs, kept in the browser (IndexedDB, which a page served over plain HTTP has too,
// unlike the Cache API), so a reload loads it again without a download. One model is kept: loading
// another replaces it. Its description { name, sha256, from: "server" | "disk", length, kept } and its
// bytes (an ArrayBuffer) are two records, so the page reads what is kept without the bytes: only the
// tab's worker, which runs the model, reads and writes them.
import { objectStore } from "./idb.js";

const INFO = "model", BYTES = "model-bytes";
const OLD = "current"; // an earlier version's one record, bytes included: removed by the next keep or forget
const run = objectStore("ferry-tab", "models");

// Chromium refuses an IndexedDB value over 127 MB (133,169,152 bytes: "The serialized keys and/or value
// are too large") and aborts the transaction, so a real model's bytes are kept in pieces of 64 MB, one
// record each (`model-bytes-0000`, ...). An earlier version's one `model-bytes` record still reads.
const PIECE = 64 << 20;
const pieceKey = (i) => `${BYTES}-${String(i).padStart(4, "0")}`;
/** Every record of the bytes: the pieces, and an earlier version's one record. */
const allBytes = () => IDBKeyRange.bound(BYTES, `${BYTES}-\uffff`);

/** What is kept, without its bytes, or undefined. */
export function keptInfo() {
  return run("readonly", (s) => s.get(INFO));
}

/** The kept model, its bytes included (one ArrayBuffer), or undefined. */
export async function keptModel() {
  const info = await keptInfo();
  if (!info) return undefined;
  const bytes = info.pieces === undefined
    ? await run("readonly", (s) => s.get(BYTES)) // an earlier version's one record
    : await keptPieces(info);
  return bytes ? { ...info, bytes } : undefined;
}

/** The pieces of the kept bytes joined, or undefined when one is missing or the length is not the info's. */
async function keptPieces({ pieces, length }) {
  const out = new Uint8Array(length);
  let at = 0;
  for (let i = 0; i < pieces; i++) {
    const piece = await run("readonly", (s) => s.get(pieceKey(i)));
    if (!(piece instanceof ArrayBuffer) || at + piece.byteLength > length) return undefined;
    out.set(new Uint8Array(piece), at);
    at += piece.byteLength;
  }
  return at === length ? out.buffer : undefined;
}

/**
 * Keeps `{ name, sha256, from, bytes }` in place of the kept model: the old one forgotten first, then
 * each piece in a transaction of its own, and the description last, so a keep cut short (a reload, a
 * full quota) leaves nothing kept rather than a model with pieces missing. `between()` is awaited before
 * each piece: the tab's worker holds the writing back while a reply runs (writing 328 MB in one go made
 * the first reply after a load wait about 4 s).
 */
export async function keepModel({ bytes, ...info }, between = () => Promise.resolve()) {
  await forgetModel();
  const pieces = Math.ceil(bytes.byteLength / PIECE);
  for (let i = 0; i < pieces; i++) {
    await between();
    // A copy per piece: a view would be stored with its whole buffer.
    await run("readwrite", (s) => s.put(bytes.slice(i * PIECE, (i + 1) * PIECE), pieceKey(i)));
  }
  return await run(
    "readwrite",
    (s) => s.put({ ...info, length: bytes.byteLength, pieces, kept: Date.now() }, INFO),
  );
}

/** Forgets the kept model. */
export function forgetModel() {
  return run("readwrite", (s) => {
    s.delete(OLD);
    s.delete(allBytes());
    return s.delete(INFO);
  });
}

/**
 * One turn of the event loop without a timer, for code that runs long chains of microtasks (a reply's
 * generation loop) and must let the runtime's own work in between: sockets, new requests, disconnects.
 * `setTimeout(0)` costs about 1 ms on Bun and 2.2 ms on Deno, longer than a token of the default model.
 *
 * - Bun: `setImmediate`, whose turn runs timers and flushes sockets (Bun's message turns do neither: a
 *   stream reached the browser only at its end).
 * - Deno: a doorbell, one byte written to a Unix socket pair and read back (microseconds). Deno learns
 *   which sockets are ready only while its thread waits for one, and a message turn never waits: a
 *   request that came in during a reply was not even read until the reply ended, and the TCP front
 *   (head-deadline.ts) passed a reply on only at its end (tests/serve/listen.test.ts pins both).
 * - Elsewhere (the browser tab's worker): a message posted to ourselves on a `MessageChannel`.
 * - Deno without permission to make the doorbell: `setTimeout(0)`, slow but correct.
 *
 * Callers that ask while a turn is pending share it.
 *
 * @example
 * ```ts
 * for (const step of work) {
 *   step();
 *   await nextTurn();
 * }
 * ```
 * @module
 */

interface DenoSockets {
  makeTempDirSync(opts: { prefix: string }): string;
  removeSync(path: string, opts: { recursive: boolean }): void;
  listen(opts: { transport: "unix"; path: string }): { accept(): Promise<Conn>; close(): void };
  connect(opts: { transport: "unix"; path: string }): Promise<Conn>;
}
interface Conn {
  read(buf: Uint8Array): Promise<number | null>;
  write(buf: Uint8Array): Promise<number>;
}

const isBun = "Bun" in globalThis;
const deno = (globalThis as { Deno?: DenoSockets }).Deno;

let pending: Promise<void> | undefined;

/** Resolves on the next turn of the event loop, after the runtime's pending I/O has had its go. */
export function nextTurn(): Promise<void> {
  if (isBun) return new Promise((resolve) => setImmediate(resolve));
  if (pending) return pending;
  const turn = !deno ? postToSelf() : noDoorbell ? timerTurn() : ringDoorbell(deno);
  return pending = turn.finally(() => (pending = undefined));
}

/** The doorbell's two ends, connected once per thread. */
let doorbell: Promise<{ bell: Conn; door: Conn }> | undefined;
/**
 * Set when the doorbell cannot be made (no permission to write a temporary folder). A timer then: it
 * costs about 2 ms, but Deno waits for it, and so looks at its sockets, where a message turn would not
 * (and a Deno `MessagePort` keeps the process from exiting even when unreferenced, in Deno 2.9).
 */
let noDoorbell = false;
const timerTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
const ding = new Uint8Array([1]);
const heard = new Uint8Array(16);

async function ringDoorbell(d: DenoSockets): Promise<void> {
  let ends;
  try {
    ends = await (doorbell ??= connectDoorbell(d));
  } catch {
    noDoorbell = true;
    return await timerTurn();
  }
  const { bell, door } = ends;
  await bell.write(ding);
  await door.read(heard);
}

/** A connected pair of Unix sockets; the socket's file is removed once both ends hold. */
async function connectDoorbell(d: DenoSockets): Promise<{ bell: Conn; door: Conn }> {
  const dir = d.makeTempDirSync({ prefix: "ferry-turn-" });
  const path = `${dir}/doorbell.sock`;
  let listener: ReturnType<DenoSockets["listen"]> | undefined;
  try {
    listener = d.listen({ transport: "unix", path });
    const [bell, door] = await Promise.all([d.connect({ transport: "unix", path }), listener.accept()]);
    return { bell, door };
  } finally {
    listener?.close();
    d.removeSync(dir, { recursive: true });
  }
}

let channel: MessageChannel | undefined;
let woken: (() => void) | undefined;

/** The browser's turn: a message posted to ourselves. */
function postToSelf(): Promise<void> {
  if (!channel) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => woken?.();
  }
  return new Promise((resolve) => {
    woken = resolve;
    channel!.port2.postMessage(null);
  });
}

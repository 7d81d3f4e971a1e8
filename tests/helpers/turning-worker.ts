// A worker that works in 2 ms stretches with serve/slots/next-turn.ts's turn between them until a "stop"
// message reaches it, then says how many turns it took (tests/serve/next-turn.test.ts): the abort of a
// slot worker's reply arrives the same way.
import { nextTurn } from "../../serve/slots/next-turn.ts";

const scope = self as unknown as { onmessage: (e: MessageEvent) => void; postMessage(m: unknown): void };
let stopped = false;
scope.onmessage = (e) => {
  if (e.data === "stop") stopped = true;
  else void work();
};

async function work() {
  let turns = 0;
  while (!stopped && turns < 5000) {
    const until = performance.now() + 2;
    while (performance.now() < until) { /* work */ }
    await nextTurn();
    turns++;
  }
  scope.postMessage({ stopped, turns });
}

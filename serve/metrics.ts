/**
 * The server's Prometheus metrics, kept and written out in the text exposition format (version 0.0.4):
 * request counts by route and status, prompt and generated tokens, histograms of the time to the first
 * token and of the time between tokens, and the load (requests generating and waiting) as gauges.
 *
 * Hand-written: `prom-client`, the usual library, pulls in Node's `cluster` and `v8` for its default
 * metrics and two dependencies; what is needed here is three metric kinds with fixed names, about 80
 * lines, the same on Deno and Bun.
 *
 * @example
 * ```ts
 * import { createMetrics } from "./metrics.ts";
 * const m = createMetrics();
 * m.request("/v1/completions", 200);
 * m.firstToken(0.05);
 * m.render({ active: 1, waiting: 0 }); // "# HELP ferry_requests_total ...\n# TYPE ..."
 * ```
 * @module
 */

/** What the gauges read: requests generating now and requests waiting for a turn. */
export interface Load {
  active: number;
  waiting: number;
}

/** The server's counters and histograms. */
export interface Metrics {
  /** Counts one answered request. */
  request(route: string, status: number): void;
  /** Adds a reply's prompt and generated tokens. */
  tokens(prompt: number, generated: number): void;
  /** Records the seconds from a request's arrival to its first generated token. */
  firstToken(seconds: number): void;
  /** Records the seconds between two generated tokens. */
  betweenTokens(seconds: number): void;
  /** Everything, in Prometheus' text format. */
  render(load: Load): string;
}

/** Bucket bounds in seconds: first tokens wait for the queue and the prompt; tokens come in milliseconds. */
const FIRST_TOKEN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const TOKEN_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1];

/** A label value escaped as the format asks (backslash, quote, newline). */
const label = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

function histogram(name: string, help: string, bounds: number[]) {
  const counts = bounds.map(() => 0);
  let sum = 0, count = 0;
  return {
    observe(x: number) {
      bounds.forEach((b, i) => x <= b && counts[i]++);
      sum += x, count++;
    },
    render(): string[] {
      return [
        `# HELP ${name} ${help}`,
        `# TYPE ${name} histogram`,
        ...bounds.map((b, i) => `${name}_bucket{le="${b}"} ${counts[i]}`),
        `${name}_bucket{le="+Inf"} ${count}`,
        `${name}_sum ${sum}`,
        `${name}_count ${count}`,
      ];
    },
  };
}

/** Fresh metrics, all zero. */
export function createMetrics(): Metrics {
  const requests = new Map<string, number>();
  let promptTokens = 0, generatedTokens = 0;
  const ttft = histogram(
    "ferry_time_to_first_token_seconds",
    "Request arrival to first token.",
    FIRST_TOKEN_BUCKETS,
  );
  const perToken = histogram("ferry_time_per_token_seconds", "Time between generated tokens.", TOKEN_BUCKETS);
  const counter = (name: string, help: string, value: number) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} counter`,
    `${name} ${value}`,
  ];
  const gauge = (name: string, help: string, value: number) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} gauge`,
    `${name} ${value}`,
  ];
  return {
    request(route, status) {
      const key = `route="${label(route)}",status="${status}"`;
      requests.set(key, (requests.get(key) ?? 0) + 1);
    },
    tokens(prompt, generated) {
      promptTokens += prompt, generatedTokens += generated;
    },
    firstToken: (s) => ttft.observe(s),
    betweenTokens: (s) => perToken.observe(s),
    render(load) {
      return [
        "# HELP ferry_requests_total Requests answered, by route and status.",
        "# TYPE ferry_requests_total counter",
        ...[...requests].map(([key, n]) => `ferry_requests_total{${key}} ${n}`),
        ...counter("ferry_prompt_tokens_total", "Prompt tokens fed.", promptTokens),
        ...counter("ferry_generated_tokens_total", "Tokens generated.", generatedTokens),
        ...ttft.render(),
        ...perToken.render(),
        ...gauge("ferry_queue_depth", "Requests waiting for a turn on the engine.", load.waiting),
        ...gauge("ferry_active_slots", "Requests generating now.", load.active),
      ].join("\n") + "\n";
    },
  };
}

// Reading the chat server's answers in tests: server-sent events split into their JSON chunks, strictly
// (every event must be `data: ...` and the stream must end with `data: [DONE]`).

/** Every `data:` payload of an SSE body, in order; throws on anything that is not a data event. */
export function sseEvents(body: string): string[] {
  if (!body.endsWith("\n\n")) {
    throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(body.slice(-40))}`);
  }
  return body.slice(0, -2).split("\n\n").map((event) => {
    if (!event.startsWith("data: ") || event.includes("\n")) {
      throw new Error(`not one data line: ${JSON.stringify(event)}`);
    }
    return event.slice(6);
  });
}

/** The JSON chunks of a complete OpenAI stream, checking that it ends with `[DONE]`. */
export function sseChunks(body: string): any[] {
  const events = sseEvents(body);
  if (events.at(-1) !== "[DONE]") {
    throw new Error(`stream does not end with [DONE]: ${JSON.stringify(events.at(-1))}`);
  }
  return events.slice(0, -1).map((e) => JSON.parse(e));
}

/** The text a stream carried: completion `text` or chat `delta.content`, joined. */
export function streamedText(chunks: any[]): string {
  return chunks.map((c) => c.choices?.[0]?.text ?? c.choices?.[0]?.delta?.content ?? "").join("");
}

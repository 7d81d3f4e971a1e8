/**
 * Deno's own chatter on stderr, which is not the command's output: on a machine whose Deno cache has never
 * seen this project's npm packages, Deno prints "Download <registry URL>" lines as it fetches their
 * metadata (it does so on every run while node_modules was installed by another tool). Tests that expect
 * a silent stderr compare what remains.
 */
export function withoutDenoDownloads(stderr: string): string {
  // deno-lint-ignore no-control-regex
  return stderr.replace(/^(?:\x1b\[[0-9;]*m)*Download(?:\x1b\[[0-9;]*m)* https?:\/\/\S+\n/gm, "");
}

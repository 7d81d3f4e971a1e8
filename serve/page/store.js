// The conversation list, kept in the browser (IndexedDB), so a reload or a New chat loses nothing.
// A conversation is plain data: { id, title, updated, messages: [{ role, content, ... }] }.
import { objectStore } from "./idb.js";

const run = objectStore("ferry-chat", "conversations", { keyPath: "id" });

/** Every stored conversation, the most recently updated first. */
export async function listConversations() {
  const all = await run("readonly", (s) => s.getAll());
  return all.sort((a, b) => b.updated - a.updated);
}

/** Stores `conversation` (a structured clone of it), replacing one with the same id. */
export function saveConversation(conversation) {
  return run("readwrite", (s) => s.put(conversation));
}

/** Removes the conversation with this id. */
export function deleteConversation(id) {
  return run("readwrite", (s) => s.delete(id));
}

/** A new, empty conversation (not stored until it has a message). */
export function newConversation() {
  // randomUUID exists only in a secure context (localhost, https); a page opened over a LAN address is not.
  const id = crypto.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  return { id, title: "New chat", updated: Date.now(), messages: [] };
}

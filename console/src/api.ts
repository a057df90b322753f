// The console's client: the SDK, authenticated by the console session's
// cookie (the browser sends it; script never sees it) and, on changes, the
// CSRF token the gateway set as a readable cookie.

import { Checkfu, CheckfuError } from "../../sdk/typescript/src/index.js";
import { signal } from "./state.js";

export { CheckfuError };
import type { Schema } from "../../sdk/typescript/src/index.js";
export type { Schema, SessionEvent, StreamItem } from "../../sdk/typescript/src/index.js";

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

function csrfToken(): string {
  for (const part of document.cookie.split(";")) {
    const [name, ...value] = part.trim().split("=");
    if (name === "checkfu_csrf") return decodeURIComponent(value.join("="));
  }
  return "";
}

/** Set when a request finds the console session over (401). */
export const sessionEnded = signal<string | null>(null);

async function consoleFetch(input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> {
  const method = (init.method ?? "GET").toUpperCase();
  const headers = new Headers(init.headers);
  if (!SAFE.has(method)) headers.set("checkfu-csrf", csrfToken());
  const response = await fetch(input, { ...init, headers, credentials: "same-origin" });
  // The console's own routes answer 401 before sign-in; elsewhere a 401
  // means the session ended under the page.
  if (response.status === 401 && !String(input).includes("/v1/console/sessions")) {
    sessionEnded.set("Your console session has ended (signed out, expired, or its API key was revoked). Sign in again.");
  }
  return response;
}

export const api = new Checkfu({ baseUrl: location.origin, fetch: consoleFetch, maxRetries: 2 });

/** What an error says to a person: the API's type and request id included. */
export function describe(error: unknown): { type: string; message: string; requestId: string | null } {
  if (error instanceof CheckfuError) return { type: error.type, message: error.message, requestId: error.requestId };
  return { type: "console", message: error instanceof Error ? error.message : String(error), requestId: null };
}

/** A person's message as a Session's input, authored by them from the console. */
export function userMessage(principalId: string, text: string): Schema<"InputEvent"> {
  return {
    type: "user.message",
    payload: { content: [{ type: "text", text }] },
    authored_by: principalId,
    caused_by: { kind: "surface", id: "console" },
  };
}

// Server-Sent Events: a Session's (or a thread's) event log read live,
// resumed with `Last-Event-ID` after a dropped connection.

import { CheckfuError } from "./errors.js";
import type { Schema } from "./types.js";
import type { Transport } from "./transport.js";

/** A persisted event of a Session's log. */
export type SessionEvent = Schema<"Event">;

/**
 * A live preview of an event being produced (opted into with
 * `eventDeltas`): never persisted, no `seq`. The text of a message's deltas
 * concatenated is a prefix of its final `agent.message`.
 */
export interface Preview {
  type: "event_start" | "event_delta";
  /** The event type it previews (`agent.message`, `agent.thinking`). */
  event_type: string;
  /** One id per previewed message: its start and every delta share it. */
  preview_id: string;
  run_id: string;
  /** On `event_delta`: the next piece of text. */
  delta?: { text: string };
}

/** What a stream yields: a logged event, or a preview. */
export type StreamItem = { kind: "event"; event: SessionEvent } | { kind: "preview"; preview: Preview };

export interface StreamOptions {
  /** Previews to receive as well (`["agent.message"]`); none by default. */
  eventDeltas?: string[];
  /** Start after this seq: every persisted event after it is replayed first (default 0, the whole log). */
  lastEventId?: number;
  /** Ends the stream: the iterator returns. */
  signal?: AbortSignal;
  /** Reconnects in a row without receiving a frame before giving up (default 20). */
  maxReconnects?: number;
}

interface Frame {
  id?: string;
  event: string;
  data: string;
}

const MAX_FRAME_CHARS = 16 * 1024 * 1024;

/** Splits an SSE body into frames (comments and retry hints are dropped). */
async function* frames(body: ReadableStream<Uint8Array>): AsyncGenerator<Frame, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let frame: { id?: string; event?: string; data: string[] } = { data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      if (buffer.length > MAX_FRAME_CHARS) throw new Error("an event frame is larger than the SDK reads");
      let at: number;
      while ((at = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone `\r` at the end may be half of `\r\n`: wait for more.
        if (buffer[at] === "\r" && at === buffer.length - 1) break;
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + (buffer.startsWith("\r\n", at) ? 2 : 1));
        if (line === "") {
          if (frame.data.length > 0) {
            const out: Frame = { event: frame.event ?? "message", data: frame.data.join("\n") };
            if (frame.id !== undefined) out.id = frame.id;
            yield out;
          }
          frame = { data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") frame.data.push(value);
        else if (field === "event") frame.event = value;
        else if (field === "id") frame.id = value;
      }
    }
  } finally {
    // Not awaited: a cancel can wait on the connection, and the consumer
    // that stopped reading should not.
    reader.cancel().catch(() => undefined);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * Reads one view of a Session's log from `path` (its `/events/stream`):
 * every persisted event after `lastEventId`, then live, reconnecting after a
 * drop with the last seq it yielded — so no seq is yielded twice and none
 * is skipped. A refusal (the key revoked, the Session gone) throws a
 * `CheckfuError`; 429 and 5xx answers and lost connections are retried.
 */
export async function* streamEvents(transport: Transport, path: string, options: StreamOptions = {}): AsyncGenerator<StreamItem, void, undefined> {
  const { signal } = options;
  let last = options.lastEventId ?? 0;
  const query = options.eventDeltas?.length ? `?event_deltas=${encodeURIComponent(options.eventDeltas.join(","))}` : "";
  const maxReconnects = options.maxReconnects ?? 20;
  let misses = 0;
  let delay = 200;
  while (!signal?.aborted) {
    if (misses > maxReconnects) {
      throw new CheckfuError({ status: 0, type: "transport", message: `the event stream could not be reopened after ${maxReconnects} attempts` });
    }
    let response: Response;
    try {
      response = await transport.raw("GET", path + query, {
        headers: { accept: "text/event-stream", "last-event-id": String(last) },
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (signal?.aborted) return;
      misses++;
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 5000);
      continue;
    }
    if (!response.ok) {
      if (response.status === 429 || response.status >= 500) {
        const after = Number(response.headers.get("retry-after"));
        await response.body?.cancel().catch(() => undefined);
        misses++;
        await sleep(Number.isFinite(after) && after > 0 ? after * 1000 : delay, signal);
        delay = Math.min(delay * 2, 5000);
        continue;
      }
      throw await CheckfuError.fromResponse(response);
    }
    if (!response.body) throw new CheckfuError({ status: response.status, type: "transport", message: "the event stream has no body" });
    try {
      for await (const frame of frames(response.body)) {
        misses = 0;
        delay = 200;
        if (frame.event === "event_start" || frame.event === "event_delta") {
          const data = JSON.parse(frame.data) as Omit<Preview, "type">;
          yield { kind: "preview", preview: { type: frame.event, ...data } };
          continue;
        }
        if (frame.id === undefined) continue;
        const event = JSON.parse(frame.data) as SessionEvent;
        if (event.seq <= last) continue;
        last = event.seq;
        yield { kind: "event", event };
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (error instanceof SyntaxError) throw error;
      // The connection dropped mid-frame: resume after `last`.
    }
    misses++;
    await sleep(delay, signal);
  }
}

// A Session's transcript (or one thread's): opened at its end and followed
// live, older events fetched a page at a time as the reader scrolls back.
// A long log is never read whole to show its end: the Session's `last_seq`
// and the gapless seq numbering name the newest page directly.

import { Component } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, type SessionEvent } from "../api.js";
import { Json, Status } from "../ui.js";
import { ApprovalById } from "./approval.js";

/** Events per page fetched, at the start and each step back. */
export const PAGE = 300;

export interface Transcript {
  /** Loaded events in seq order, in chunks of at most a page: only the last one changes (live events). */
  chunks: SessionEvent[][];
  /** Text of messages being written, by preview id (the event id they become). */
  previews: Map<string, string>;
  /** The seq before the oldest loaded event: 0 when the log's start is loaded. */
  before: number;
}

/**
 * Follows a log: `headSeq` is where its end was when the page opened (a
 * Session's `last_seq`; null for a thread, whose log is read from its start).
 * Events and previews are applied in batches, one per frame.
 */
export function useTranscript(
  sessionId: string,
  threadId: string | null,
  headSeq: number | null,
): { transcript: Transcript; error: unknown; live: boolean; loadEarlier: () => Promise<void> } {
  const empty = (): Transcript => ({ chunks: [[]], previews: new Map(), before: 0 });
  const [transcript, setTranscript] = useState<Transcript>(empty);
  const [error, setError] = useState<unknown>(null);
  const [live, setLive] = useState(false);
  const state = useRef<Transcript>(empty());
  const loading = useRef(false);
  const flushNow = () => {
    const s = state.current;
    setTranscript({ chunks: s.chunks.slice(), previews: new Map(s.previews), before: s.before });
  };
  useEffect(() => {
    const abort = new AbortController();
    const s: Transcript = empty();
    state.current = s;
    let scheduled = false;
    const schedule = () => {
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(() => {
          scheduled = false;
          if (!abort.signal.aborted) flushNow();
        });
      }
    };
    setTranscript(empty());
    setError(null);
    (async () => {
      setLive(true);
      try {
        let after = 0;
        if (headSeq !== null && headSeq > 0) {
          after = Math.max(0, headSeq - PAGE);
          const page = await api.sessions.listEvents(sessionId, { after_seq: after, limit: PAGE }).first();
          s.chunks = [page.data.slice()];
          s.before = page.data[0] ? page.data[0].seq - 1 : after;
          after = page.data.at(-1)?.seq ?? after;
          s.chunks.push([]);
          flushNow();
        }
        const stream = threadId
          ? api.sessions.streamThread(sessionId, threadId, { eventDeltas: ["agent.message"], signal: abort.signal, lastEventId: after })
          : api.sessions.stream(sessionId, { eventDeltas: ["agent.message"], signal: abort.signal, lastEventId: after });
        for await (const item of stream) {
          if (item.kind === "event") {
            // The live chunk is copied on each event, so it is kept to a page.
            if ((s.chunks.at(-1)?.length ?? 0) >= PAGE) s.chunks.push([]);
            const last = s.chunks.length - 1;
            s.chunks[last] = [...(s.chunks[last] ?? []), item.event];
            s.previews.delete(item.event.id);
          } else if (item.preview.type === "event_start") {
            s.previews.set(item.preview.preview_id, "");
          } else if (item.preview.delta) {
            s.previews.set(item.preview.preview_id, (s.previews.get(item.preview.preview_id) ?? "") + item.preview.delta.text);
          }
          schedule();
        }
      } catch (e) {
        if (!abort.signal.aborted) setError(e);
      } finally {
        if (!abort.signal.aborted) setLive(false);
      }
    })();
    return () => abort.abort();
  }, [sessionId, threadId, headSeq]);
  const loadEarlier = async () => {
    const s = state.current;
    if (loading.current || s.before <= 0) return;
    loading.current = true;
    try {
      const from = Math.max(0, s.before - PAGE);
      const page = await api.sessions.listEvents(sessionId, { after_seq: from, limit: s.before - from }).first();
      if (state.current !== s) return;
      s.chunks = [page.data.slice(), ...s.chunks];
      s.before = from;
      flushNow();
    } catch (e) {
      setError(e);
    } finally {
      loading.current = false;
    }
  };
  return { transcript, error, live, loadEarlier };
}

/** One page of rows: re-rendered only when its own events change, so a long transcript costs nothing per live event. */
class Chunk extends Component<{ events: SessionEvent[] }> {
  override shouldComponentUpdate(next: { events: SessionEvent[] }): boolean {
    return next.events !== this.props.events;
  }
  override render() {
    return (
      <>
        {this.props.events.map((e) => (
          <EventRow key={e.seq} event={e} />
        ))}
      </>
    );
  }
}

/**
 * The transcript list. Going back (the button, or scrolling it into view)
 * fetches the previous page while keeping what is on screen in place. New
 * events keep the view at the end only when it was at the end.
 */
export function TranscriptList(props: { transcript: Transcript; loadEarlier: () => Promise<void> }) {
  const { chunks, previews, before } = props.transcript;
  const earlier = useRef<HTMLLIElement>(null);
  const end = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  const keep = useRef<number | null>(null);
  const first = chunks.find((c) => c.length > 0)?.[0];
  const count = chunks.reduce((n, c) => n + c.length, 0);
  const showEarlier = () => {
    keep.current = document.documentElement.scrollHeight - window.scrollY;
    void props.loadEarlier();
  };
  useEffect(() => {
    const onScroll = () => {
      atEnd.current = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => window.removeEventListener("scroll", onScroll);
  }, []);
  useLayoutEffect(() => {
    if (keep.current !== null) {
      window.scrollTo(0, document.documentElement.scrollHeight - keep.current);
      keep.current = null;
    } else if (atEnd.current) {
      end.current?.scrollIntoView({ block: "end" });
    }
  }, [count, previews]);
  useEffect(() => {
    const el = earlier.current;
    if (!el || typeof IntersectionObserver === "undefined") return;
    const seen = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && !atEnd.current) showEarlier();
    });
    seen.observe(el);
    return () => seen.disconnect();
  }, [before > 0, first?.seq]);
  return (
    <>
      <ol class="transcript" aria-label="Transcript">
        {before > 0 && (
          <li ref={earlier} class="earlier">
            <button type="button" onClick={showEarlier}>
              Show earlier events ({before.toLocaleString()} before #{first?.seq ?? before + 1})
            </button>
          </li>
        )}
        {chunks.map((c, i) => (
          <Chunk key={c[0]?.seq ?? `empty-${i}`} events={c} />
        ))}
        {[...previews].map(([pid, t]) => (
          <li key={pid} class="event event-agent preview" data-preview={pid} aria-live="polite">
            <div class="event-head">
              <span class="type">agent.message (writing…)</span>
            </div>
            <p class="message">{t}</p>
          </li>
        ))}
      </ol>
      <div ref={end} />
    </>
  );
}

function text(payload: Record<string, unknown>): string {
  const content = payload["content"];
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((b: unknown) => (b && typeof b === "object" && (b as { type?: string }).type === "text" ? String((b as { text?: unknown }).text ?? "") : ""))
    .join("");
}

function EventRow(props: { event: SessionEvent }) {
  const e = props.event;
  const p = (e.payload ?? {}) as Record<string, unknown>;
  let body;
  switch (e.type) {
    case "user.message":
    case "agent.message":
      body = <p class="message">{text(p)}</p>;
      break;
    case "agent.thinking":
      body = <p class="thinking">{text(p)}</p>;
      break;
    case "agent.tool_use":
    case "agent.custom_tool_use":
      body = (
        <>
          <p>
            <strong>{String(p["name"] ?? "tool")}</strong>{" "}
            {typeof p["evaluated_permission"] === "string" && <Status value={p["evaluated_permission"]} />}
          </p>
          <Json value={p["input"] ?? {}} />
        </>
      );
      break;
    case "agent.tool_result":
    case "user.tool_result":
    case "user.custom_tool_result":
      body = <Json value={p["content"] ?? p} />;
      break;
    case "policy.denied":
      body = (
        <p>
          Denied <strong>{String(p["tool"] ?? p["name"] ?? "")}</strong>: {String(p["reason"] ?? "")} {String(p["guidance"] ?? p["message"] ?? "")}
        </p>
      );
      break;
    case "action_approval.pending":
      body = <ApprovalById id={String(p["action_approval_id"] ?? "")} />;
      break;
    case "action_approval.resolved":
      body = (
        <p>
          Approval <code>{String(p["action_approval_id"] ?? "")}</code>: <Status value={String(p["decision"] ?? p["status"] ?? "")} />
        </p>
      );
      break;
    case "span.model_request_end": {
      const usage = (p["model_usage"] ?? {}) as { input_tokens?: number; output_tokens?: number };
      const cost = typeof p["cost_micro_usd"] === "number" ? ` · $${(p["cost_micro_usd"] / 1e6).toFixed(6)}` : "";
      body = (
        <p class="system">
          {usage.input_tokens ?? 0} tokens in, {usage.output_tokens ?? 0} out{cost}
          {p["is_error"] === true && <Status value="error" />}
        </p>
      );
      break;
    }
    case "run.completed":
      body = <p class="system">stop reason: {String((p["stop_reason"] as { type?: string } | undefined)?.type ?? "")}</p>;
      break;
    default:
      if (e.type.startsWith("session.status_")) {
        body = <Status value={e.type.slice("session.status_".length)} />;
      } else {
        // Bookkeeping events: one line, their payload a click away.
        body = <Json value={p} foldAt={0} />;
      }
  }
  const who = e.type.split(".")[0] ?? "";
  return (
    <li class={`event event-${who}`} data-seq={e.seq} data-type={e.type}>
      <div class="event-head">
        <span class="seq">#{e.seq}</span> <span class="type">{e.type}</span>
        {e.session_thread_id && <code class="muted"> {e.session_thread_id}</code>}
      </div>
      {body}
    </li>
  );
}


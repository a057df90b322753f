// A Session: its live transcript over SSE (previews stream in as the model
// writes), tool calls with input and result (folded when long), policy
// decisions, approvals inline with Approve/Deny, output files; and the
// composer: send a message, interrupt, archive.

import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, type SessionEvent, type Schema } from "../api.js";
import type { Me } from "../main.js";
import { Action, ErrorBox, Json, ListState, Status, When, useAsync } from "../ui.js";
import { ApprovalById } from "./approval.js";

type Session = Schema<"Session">;

interface Transcript {
  events: SessionEvent[];
  /** Text of messages being written, by preview id (the event id they become). */
  previews: Map<string, string>;
}

/** Follows the Session's log; events and previews are applied in batches, one per frame. */
function useTranscript(id: string): { transcript: Transcript; error: unknown; live: boolean } {
  const [transcript, setTranscript] = useState<Transcript>({ events: [], previews: new Map() });
  const [error, setError] = useState<unknown>(null);
  const [live, setLive] = useState(false);
  useEffect(() => {
    const abort = new AbortController();
    const state: Transcript = { events: [], previews: new Map() };
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      setTranscript({ events: state.events.slice(), previews: new Map(state.previews) });
    };
    const schedule = () => {
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(flush);
      }
    };
    setTranscript({ events: [], previews: new Map() });
    setError(null);
    (async () => {
      setLive(true);
      try {
        for await (const item of api.sessions.stream(id, { eventDeltas: ["agent.message"], signal: abort.signal })) {
          if (item.kind === "event") {
            state.events.push(item.event);
            state.previews.delete(item.event.id);
          } else if (item.preview.type === "event_start") {
            state.previews.set(item.preview.preview_id, "");
          } else if (item.preview.delta) {
            state.previews.set(item.preview.preview_id, (state.previews.get(item.preview.preview_id) ?? "") + item.preview.delta.text);
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
  }, [id]);
  return { transcript, error, live };
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

function Composer(props: { session: Session; me: Me; onChange: () => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const input = (type: string, payload: Record<string, unknown>) =>
    api.sessions.sendEvent(props.session.id, {
      type,
      payload,
      authored_by: props.me.principal.id,
      caused_by: { kind: "surface", id: "console" },
    } as never);
  return (
    <form
      class="composer"
      onSubmit={async (e) => {
        e.preventDefault();
        const area = e.currentTarget.elements.namedItem("message") as HTMLTextAreaElement;
        const t = area.value.trim();
        if (!t) return;
        setBusy(true);
        setError(null);
        try {
          await input("user.message", { content: [{ type: "text", text: t }] });
          area.value = "";
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <label for="message">Message</label>
      <textarea id="message" name="message" rows={3} placeholder="Write to the agent…" />
      <div class="buttons">
        <button type="submit" class="primary" disabled={busy}>
          Send
        </button>
        <Action label="Interrupt" run={() => input("user.interrupt", {})} />
        <Action
          label="Archive"
          kind="danger"
          confirm="Archive this Session? It takes no more input."
          run={async () => {
            await api.sessions.archive(props.session.id);
            props.onChange();
          }}
        />
      </div>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

function Files(props: { id: string }) {
  const [files] = useAsync(async () => (await api.sessions.listFiles(props.id).first()).data, [props.id]);
  return (
    <ListState result={files} empty="No output files.">
      {(items) => (
        <ul class="plain">
          {items.map((f) => (
            <li key={f.path}>
              <a href={`/v1/sessions/${encodeURIComponent(props.id)}/files/content?path=${encodeURIComponent(f.path)}`} download>
                {f.path}
              </a>{" "}
              <span class="muted">{f.size.toLocaleString()} bytes</span>
            </li>
          ))}
        </ul>
      )}
    </ListState>
  );
}

/** Events rendered at first (the newest), and added per step back in time. */
const WINDOW = 300;

/**
 * The transcript, windowed: only the newest events are in the page; going
 * back (the button, or scrolling it into view) adds the next older ones
 * while keeping what is on screen in place. New events keep the view at
 * the end only when it was at the end.
 */
function TranscriptList(props: { transcript: Transcript }) {
  const { events, previews } = props.transcript;
  const [shown, setShown] = useState(WINDOW);
  const start = Math.max(0, events.length - shown);
  const earlier = useRef<HTMLLIElement>(null);
  const end = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  const keep = useRef<number | null>(null);
  const showEarlier = () => {
    keep.current = document.documentElement.scrollHeight - window.scrollY;
    setShown((n) => n + WINDOW);
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
  }, [events.length, previews, shown]);
  useEffect(() => {
    const el = earlier.current;
    if (!el || typeof IntersectionObserver === "undefined") return;
    const seen = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && !atEnd.current) showEarlier();
    });
    seen.observe(el);
    return () => seen.disconnect();
  }, [start > 0]);
  return (
    <>
      <ol class="transcript" aria-label="Transcript">
        {start > 0 && (
          <li ref={earlier} class="earlier">
            <button type="button" onClick={showEarlier}>
              Show earlier events ({start.toLocaleString()} before #{events[start]?.seq})
            </button>
          </li>
        )}
        {events.slice(start).map((e) => (
          <EventRow key={e.seq} event={e} />
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

export function SessionPage(props: { id: string; me: Me }) {
  const [session, reload] = useAsync(() => api.sessions.get(props.id), [props.id]);
  const { transcript, error, live } = useTranscript(props.id);
  const statusEvent = [...transcript.events].reverse().find((e) => e.type.startsWith("session.status_"));
  const status = statusEvent ? statusEvent.type.slice("session.status_".length) : session.state === "ready" ? session.value.status : "";
  if (session.state === "loading") return <p class="muted" role="status">Loading the Session…</p>;
  if (session.state === "error") return <ErrorBox error={session.error} />;
  const s = session.value;
  return (
    <section class="session">
      <h1>
        {s.title || s.id} <Status value={status} />
      </h1>
      <dl class="facts">
        <dt>Deployment</dt>
        <dd>
          <code>{s.agent_deployment_id}</code> revision {s.deployment_revision}
        </dd>
        <dt>Acting as</dt>
        <dd>
          <code>{s.principal_id}</code>
        </dd>
        <dt>Execution</dt>
        <dd>{String((s.execution as { kind?: string }).kind ?? "managed")}</dd>
        <dt>Budget</dt>
        <dd>{s.budget_id ? <code>{s.budget_id}</code> : <span class="muted">none</span>}</dd>
        <dt>Created</dt>
        <dd>
          <When at={s.created_at} />
        </dd>
      </dl>
      <h2>
        Transcript{" "}
        <span class="muted" role="status">
          {live ? "live" : "not live"}
        </span>
      </h2>
      {error !== null && <ErrorBox error={error} />}
      {transcript.events.length === 0 && !error ? <p class="muted">No events yet.</p> : <TranscriptList transcript={transcript} />}
      {status === "terminated" ? <p class="muted">This Session is terminated; it takes no more input.</p> : <Composer session={s} me={props.me} onChange={reload} />}
      <h2>Output files</h2>
      <Files id={s.id} />
    </section>
  );
}

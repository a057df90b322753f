// A Session: its live transcript (transcript.tsx) with a tab per thread of
// a multiagent Session, its Outcomes and their evaluations, its Budget's
// use, its execution plane and output files; and the composer: send a
// message, interrupt, archive.

import { useEffect, useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import type { Me } from "../main.js";
import { useFilters } from "../forms.js";
import { Action, ErrorBox, ListState, Status, Table, When, useAsync } from "../ui.js";
import { TranscriptList, useTranscript } from "./transcript.js";

type Session = Schema<"Session">;

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

/** The primary thread's transcript, or a child thread's (`?thread=`), with tabs when there are several. */
function Threads(props: { session: Session; onStatus: (s: string) => void }) {
  const filters = useFilters();
  const chosen = filters.get("thread");
  const [threads] = useAsync(() => api.sessions.listThreads(props.session.id).all(), [props.session.id]);
  const list = threads.state === "ready" ? threads.value : [];
  const primary = list.find((t) => !t.parent_thread_id);
  const thread = chosen && chosen !== primary?.id ? chosen : null;
  // The page's head is read once per Session: following live takes it from there.
  const [head] = useState(props.session.last_seq);
  const { transcript, error, live, loadEarlier } = useTranscript(props.session.id, thread, thread ? null : head);
  const statusEvent = transcript.chunks
    .flat()
    .reverse()
    .find((e) => e.type.startsWith("session.status_"));
  const current = statusEvent ? statusEvent.type.slice("session.status_".length) : "";
  useEffect(() => {
    if (!thread && current) props.onStatus(current);
  }, [current, thread]);
  const empty = transcript.chunks.every((c) => c.length === 0);
  return (
    <>
      <h2>
        Transcript{" "}
        <span class="muted" role="status">
          {live ? "live" : "not live"}
        </span>
      </h2>
      {list.length > 1 && (
        <div role="tablist" aria-label="Threads" class="tabs">
          {list.map((t) => {
            const selected = (thread ?? primary?.id) === t.id;
            return (
              <button
                key={t.id}
                type="button"
                role="tab"
                aria-selected={selected}
                onClick={() => filters.set("thread", t.parent_thread_id ? t.id : "")}
              >
                {t.parent_thread_id ? t.agent.name : "Coordinator"} <Status value={t.status} />
              </button>
            );
          })}
        </div>
      )}
      {error !== null && <ErrorBox error={error} />}
      {empty && !error ? <p class="muted">No events yet.</p> : <TranscriptList transcript={transcript} loadEarlier={loadEarlier} />}
    </>
  );
}

type Evaluation = { iteration?: number; result?: string; explanation?: string; reason?: string };

function Outcomes(props: { sessionId: string }) {
  const [outcomes] = useAsync(() => api.sessions.listOutcomes(props.sessionId).all(), [props.sessionId]);
  if (outcomes.state === "ready" && outcomes.value.length === 0) return null;
  return (
    <>
      <h2>Outcomes</h2>
      <ListState result={outcomes} empty="No Outcome defined.">
        {(items) => (
          <ul class="plain">
            {items.map((o) => (
              <li key={o.id} class="card" data-outcome={o.id}>
                <p>
                  <strong>{o.description || o.rubric.slice(0, 80)}</strong> <Status value={o.status} /> iteration {o.iterations_used} of {o.max_iterations}
                  {o.reason && <span class="muted"> ({o.reason})</span>}
                </p>
                {o.evaluations.length > 0 && (
                  <Table
                    label={`Evaluations of ${o.id}`}
                    rows={(o.evaluations as Evaluation[]).map((e, n) => ({ ...e, n }))}
                    rowKey={(e) => String(e.n)}
                    columns={[
                      { title: "Iteration", cell: (e) => e.iteration },
                      { title: "Result", cell: (e) => <Status value={e.result ?? ""} /> },
                      { title: "Explanation", cell: (e) => e.explanation ?? e.reason ?? "" },
                    ]}
                  />
                )}
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </>
  );
}

function BudgetUse(props: { budgetId: string }) {
  const [budget] = useAsync(() => api.budgets.get(props.budgetId), [props.budgetId]);
  if (budget.state === "loading") return <span class="muted">…</span>;
  if (budget.state === "error") return <ErrorBox error={budget.error} />;
  const b = budget.value;
  const share = b.limit > 0 ? Math.min(100, Math.round((100 * b.consumed) / b.limit)) : 0;
  return (
    <span class="budget">
      <meter min={0} max={b.limit} value={b.consumed} aria-label="Budget used" /> {b.consumed.toLocaleString()} of {b.limit.toLocaleString()} {b.metric} ({share}%){" "}
      <Status value={b.status} />
    </span>
  );
}

export function SessionPage(props: { id: string; me: Me }) {
  const [session, reload] = useAsync(() => api.sessions.get(props.id), [props.id]);
  const [liveStatus, setLiveStatus] = useState("");
  if (session.state === "loading") return <p class="muted" role="status">Loading the Session…</p>;
  if (session.state === "error") return <ErrorBox error={session.error} />;
  const s = session.value;
  const status = liveStatus || s.status;
  const execution = s.execution as { kind?: string; pool?: string; queued_for_pool?: boolean };
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
        <dd>
          {execution.kind ?? "managed"}
          {execution.pool && <> pool {execution.pool}</>}
          {execution.queued_for_pool && <span class="muted"> (waiting for a Runner)</span>}
        </dd>
        <dt>Usage</dt>
        <dd>
          {s.usage.input_tokens.toLocaleString()} tokens in, {s.usage.output_tokens.toLocaleString()} out, ${(s.usage.model_spend_micro_usd / 1e6).toFixed(4)}
        </dd>
        <dt>Budget</dt>
        <dd>{s.budget_id ? <BudgetUse budgetId={s.budget_id} /> : <span class="muted">none</span>}</dd>
        <dt>Created</dt>
        <dd>
          <When at={s.created_at} />
        </dd>
      </dl>
      <Threads key={s.id} session={s} onStatus={(v) => v !== liveStatus && setLiveStatus(v)} />
      {status === "terminated" ? <p class="muted">This Session is terminated; it takes no more input.</p> : <Composer session={s} me={props.me} onChange={reload} />}
      <Outcomes sessionId={s.id} />
      <h2>Output files</h2>
      <Files id={s.id} />
    </section>
  );
}

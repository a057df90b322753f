// Automations: the list (status, readiness with each failing check named,
// the trigger in words, the next occurrence, the last firing), one
// Automation (pause/resume sending the version read, fire, its firings) and
// one firing's trace as a tree.

import { useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { Action, ErrorBox, Json, Link, ListState, Status, Table, When, useAsync } from "../ui.js";

type Automation = Schema<"Automation">;
type Firing = Schema<"Firing">;
type Trigger = {
  kind?: string;
  cron?: string;
  timezone?: string;
  at?: string;
  dedupe_key?: string;
  event_types?: string[];
  resource_id?: string;
  next_at?: string | null;
};
type Check = { name: string; status: string; reason?: string | null; resource_id?: string | null };

/** Each trigger as a sentence a person reads. */
export function triggerWords(t: Trigger): string {
  switch (t.kind) {
    case "schedule":
      return `on the schedule “${t.cron ?? ""}” in ${t.timezone ?? "UTC"}`;
    case "schedule_once":
      return `once, at ${t.at ?? "?"}`;
    case "webhook":
      return t.dedupe_key ? `on each signed webhook event, deduplicated by ${t.dedupe_key}` : "on each signed webhook event";
    case "subscription": {
      const types = (t.event_types ?? []).join(", ") || "no event type yet";
      return t.resource_id ? `on each platform event ${types} about ${t.resource_id}` : `on each platform event ${types}`;
    }
    default:
      return t.kind ?? "unknown trigger";
  }
}

function triggers(a: Automation): Trigger[] {
  return a.triggers as Trigger[];
}

/** What makes it run, in words. */
function runsWhen(a: Automation): string {
  return triggers(a).length ? triggers(a).map(triggerWords).join("; ") : "only when fired by hand";
}

function nextAt(a: Automation): string | null {
  const next = triggers(a)
    .map((t) => t.next_at)
    .filter((n): n is string => Boolean(n))
    .sort();
  return next[0] ?? null;
}

function Readiness(props: { readiness: Record<string, unknown> }) {
  const state = String(props.readiness["state"] ?? "unknown");
  const failing = ((props.readiness["checks"] as Check[] | undefined) ?? []).filter((c) => c.status !== "pass");
  return (
    <span class="readiness">
      <Status value={state} />
      {failing.length > 0 && (
        <ul class="checks">
          {failing.map((c) => (
            <li key={c.name}>
              <strong>{c.name}</strong> {c.status}
              {c.reason && <>: {c.reason}</>}
              {c.resource_id && (
                <>
                  {" "}
                  (<code>{c.resource_id}</code>)
                </>
              )}
            </li>
          ))}
        </ul>
      )}
    </span>
  );
}

function LastFiring(props: { last: Schema<"LastFiring"> | null | undefined }) {
  if (!props.last) return <span class="muted">never fired</span>;
  return (
    <>
      <Link to={`/automations/firings/${props.last.id}`}>{props.last.state}</Link> <When at={props.last.created_at} />
    </>
  );
}

export function Automations() {
  const env = useEnvironment();
  const [automations] = useAsync(async () => (env.current ? api.automations.list({ environment_id: env.current }).all(1_000) : []), [env.current]);
  return (
    <section>
      <h1>Automations</h1>
      <p>
        <EnvironmentPicker env={env} /> <Link to={`/automations/graphs?environment_id=${env.current}`}>Graphs</Link> ·{" "}
        <Link to={`/automations/graphs/new?environment_id=${env.current}`}>New graph</Link> ·{" "}
        <Link to={`/automations/skill-proposals?environment_id=${env.current}`}>Skill proposals</Link>
      </p>
      <ListState result={automations} empty="No Automation in this Environment. Build one with a graph.">
        {(items) => (
          <Table
            label="Automations"
            rows={items}
            rowKey={(a) => a.id}
            columns={[
              { title: "Name", cell: (a) => <Link to={`/automations/${a.id}`}>{a.name}</Link> },
              { title: "Status", cell: (a) => <Status value={a.status} /> },
              { title: "Readiness", cell: (a) => <Readiness readiness={a.readiness} /> },
              { title: "Runs", cell: runsWhen },
              { title: "Next", cell: (a) => <When at={nextAt(a)} /> },
              { title: "Last firing", cell: (a) => <LastFiring last={a.last_firing} /> },
            ]}
          />
        )}
      </ListState>
    </section>
  );
}

export function AutomationPage(props: { id: string }) {
  const [automation, reload] = useAsync(() => api.automations.get(props.id), [props.id]);
  const [firings, reloadFirings] = useAsync(() => api.automations.listFirings(props.id, { limit: 50 }).first().then((p) => p.data), [props.id]);
  const [event, setEvent] = useState("");
  if (automation.state === "loading") return <p role="status">Loading…</p>;
  if (automation.state === "error") return <ErrorBox error={automation.error} />;
  const a = automation.value;
  const graph = a.managed_by["kind"] === "graph" ? String(a.managed_by["graph_id"] ?? "") : "";
  return (
    <section>
      <h1>{a.name}</h1>
      <p>
        <Link to="/automations">Automations</Link> · <Status value={a.status} /> · version {a.version} · <code>{a.id}</code>
        {graph && (
          <>
            {" "}
            · managed by <Link to={`/automations/graphs/${graph}`}>its graph</Link>
          </>
        )}
      </p>
      <dl class="facts">
        <dt>Readiness</dt>
        <dd>
          <Readiness readiness={a.readiness} />
        </dd>
        <dt>Runs</dt>
        <dd>{runsWhen(a)}</dd>
        <dt>Next occurrence</dt>
        <dd>
          <When at={nextAt(a)} />
        </dd>
        {a.pause_reason && (
          <>
            <dt>Paused because</dt>
            <dd>
              <Json value={a.pause_reason} />
            </dd>
          </>
        )}
      </dl>
      <p class="actions">
        {a.status === "active" ? (
          <Action
            label="Pause"
            run={async () => {
              await api.automations.pause(a.id, { expected_version: a.version });
              reload();
            }}
          />
        ) : (
          <Action
            label="Resume"
            kind="primary"
            run={async () => {
              await api.automations.resume(a.id, { expected_version: a.version });
              reload();
            }}
          />
        )}
      </p>
      <h2>Fire now</h2>
      <form class="inline-form" aria-label="Fire" onSubmit={(e) => e.preventDefault()}>
        <label>
          Event (JSON, optional)
          <textarea rows={3} value={event} onInput={(e) => setEvent(e.currentTarget.value)} placeholder='{"issue": {"title": "…"}}' />
        </label>
        <Action
          label="Fire"
          kind="primary"
          run={async () => {
            const body = event.trim() ? { event: JSON.parse(event) as Record<string, unknown> } : {};
            await api.automations.fire(a.id, body);
            reloadFirings();
          }}
        />
      </form>
      <h2>Firings</h2>
      <ListState result={firings} empty="Not fired yet.">
        {(items) => (
          <Table
            label="Firings"
            rows={items}
            rowKey={(f) => f.id}
            columns={[
              { title: "Firing", cell: (f) => <Link to={`/automations/firings/${f.id}`}>{f.id}</Link> },
              { title: "Source", cell: (f) => f.source },
              {
                title: "State",
                cell: (f) => (
                  <>
                    <Status value={f.state} />
                    {f.error && <span class="muted"> {String((f.error as { reason?: string }).reason ?? "")}</span>}
                  </>
                ),
              },
              { title: "Children", cell: (f) => f.child_session_ids.length },
              { title: "Created", cell: (f) => <When at={f.created_at} /> },
            ]}
          />
        )}
      </ListState>
    </section>
  );
}

type Step = { id: string; kind: string; outcome?: { kind?: string; reason?: string; branch?: string } | null; child_session_id?: string | null };
type Receipts = {
  sessions?: { step_id?: string | null; session_id: string; status: string; stop_reason?: { type?: string } | null }[];
  approvals?: { step_id?: string | null; action_approval_id: string; status: string }[];
  waits?: { step_id?: string | null; until: string; elapsed: boolean }[];
  memory?: { step_id?: string | null; attempt: number; memory_store_id: string; path: string; operation: string; result: string; store_version?: number | null; memory_proposal_id?: string | null; error?: string | null }[];
  history?: { step_id?: string | null; frontier: string; operation: string; result: string; session_ids: string[]; through?: string | null; error?: string | null }[];
  evaluations?: { step_id?: string | null; id: string; attempt: number; verdict?: string | null; error?: string | null }[];
  connection_calls?: { step_id?: string | null; id: string; tool: string; attempt: number; status?: string | null; error_code?: string | null }[];
  skills?: { step_id?: string | null; operation: string; result: string; skill_proposal_id?: string | null; disposition?: string | null; skill_id?: string | null; version?: number | null; error?: string | null }[];
  screens?: { step_id?: string | null; session_id: string; event_id: string; seq: number; verdict: string; released: boolean }[];
};

/** What a step left behind: its child Session, its approval, its wait, its Check's evaluations, its calls, the documents it read or wrote, the history it chose, the skill it proposed, its screen's verdicts. */
function Left(props: { receipts: Receipts; step: string }) {
  const mine = <T extends { step_id?: string | null }>(xs: T[] | undefined) => (xs ?? []).filter((x) => (x.step_id ?? "") === props.step);
  const items = [
    ...mine(props.receipts.sessions).map((s) => (
      <li key={s.session_id}>
        session <Link to={`/sessions/${s.session_id}`}>{s.session_id}</Link> <Status value={s.status} />
        {s.stop_reason?.type && <span class="muted"> ({s.stop_reason.type})</span>}
      </li>
    )),
    ...mine(props.receipts.approvals).map((a) => (
      <li key={a.action_approval_id}>
        approval <Link to={`/approvals/${a.action_approval_id}`}>{a.action_approval_id}</Link> <Status value={a.status} />
      </li>
    )),
    ...mine(props.receipts.waits).map((w) => (
      <li key={w.until}>
        wait until <When at={w.until} /> {w.elapsed ? "elapsed" : "waiting"}
      </li>
    )),
    ...mine(props.receipts.evaluations).map((e) => (
      <li key={e.id}>
        evaluation <code>{e.id}</code> attempt {e.attempt} {e.verdict ? `verdict ${e.verdict}` : `error ${e.error ?? ""}`}
      </li>
    )),
    ...mine(props.receipts.connection_calls).map((c) => (
      <li key={c.id}>
        call <code>{c.id}</code> {c.tool} attempt {c.attempt} {c.status ?? (c.error_code ? "answer unknown" : "unanswered")}
        {c.error_code && <span class="muted"> ({c.error_code})</span>}
      </li>
    )),
    ...mine(props.receipts.memory).map((m) => (
      <li key={`memory-${m.attempt}`}>
        memory {m.operation} <code>{m.path}</code> of <Link to={`/reach/memory/${m.memory_store_id}`}>{m.memory_store_id}</Link>{" "}
        {m.result === "failed" ? `failed (${m.error ?? ""})` : m.result === "proposed" ? `proposed ${m.memory_proposal_id ?? ""}` : `${m.result} at version ${m.store_version ?? ""}`}
      </li>
    )),
    ...mine(props.receipts.history).map((h) => (
      <li key={`history-${h.operation}`}>
        frontier <code>{h.frontier}</code>{" "}
        {h.result === "failed" ? `failed (${h.error ?? ""})` : h.result === "selected" ? `selected ${h.session_ids.length} Sessions` : `moved to ${h.through ?? "the start"}`}
      </li>
    )),
    ...mine(props.receipts.skills).map((k) => (
      <li key={`skill-${k.operation}`}>
        {k.operation === "propose" ? "skill proposal" : "observed"} {k.skill_proposal_id ?? ""}{" "}
        {k.result === "failed" ? `failed (${k.error ?? ""})` : k.disposition ? `${k.disposition}${k.skill_id ? ` ${k.skill_id} v${k.version ?? ""}` : ""}` : k.result}
      </li>
    )),
    ...mine(props.receipts.screens).map((v) => (
      <li key={v.event_id}>
        screen of a message in <Link to={`/sessions/${v.session_id}`}>{v.session_id}</Link> at seq {v.seq}: {v.verdict}, {v.released ? "released" : "withheld"}
      </li>
    )),
  ];
  return items.length ? <ul>{items}</ul> : null;
}

export function FiringPage(props: { id: string }) {
  const [trace, reload] = useAsync(() => api.automationFirings.getTrace(props.id), [props.id]);
  if (trace.state === "loading") return <p role="status">Loading…</p>;
  if (trace.state === "error") return <ErrorBox error={trace.error} />;
  const t = trace.value;
  const f: Firing = t.firing;
  const steps = ((f.program as { steps?: Step[] } | null | undefined)?.steps ?? null) as Step[] | null;
  const receipts = t.receipts as Receipts;
  const missing = ((t.evidence as { missing?: { kind: string; id: string }[] }).missing ?? []) as { kind: string; id: string }[];
  return (
    <section>
      <h1>Firing {f.id}</h1>
      <p>
        <Link to={`/automations/${f.automation_id}`}>Its Automation</Link> · {f.source} · <Status value={f.state} /> · <When at={f.created_at} />{" "}
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </p>
      {f.error && <Json value={f.error} />}
      <ul class="tree" aria-label="Trace">
        {steps ? (
          steps.map((s) => (
            <li key={s.id} data-step={s.id}>
              <strong>{s.id}</strong> <span class="muted">{s.kind}</span> <Status value={s.outcome?.kind ?? "not reached"} />
              {(s.outcome?.reason || s.outcome?.branch) && <span class="muted"> ({s.outcome.reason ?? s.outcome.branch})</span>}
              <Left receipts={receipts} step={s.id} />
            </li>
          ))
        ) : (
          <li>
            <strong>agent</strong> <Left receipts={receipts} step="" />
          </li>
        )}
        {missing.map((m) => (
          <li key={m.id}>
            missing {m.kind} <code>{m.id}</code>
          </li>
        ))}
      </ul>
      {f.event && (
        <>
          <h2>Event</h2>
          <Json value={f.event} />
        </>
      )}
    </section>
  );
}

// One ActionApproval: the action's frozen context and, for a viewer who
// holds `approve` (the API gives them the one-time token), Approve and Deny.

import { useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { Action, ErrorBox, Json, Link, Status, When, useAsync } from "../ui.js";

export type Approval = Schema<"ActionApproval">;

export function ApprovalCard(props: { approval: Approval; onAnswered?: (a: Approval) => void; showSession?: boolean }) {
  const [a, setA] = useState(props.approval);
  const answer = async (decision: "approve" | "deny") => {
    if (!a.response_token) return;
    const next = await api.approvals.answer(a.id, { decision, response_token: a.response_token });
    setA(next);
    props.onAnswered?.(next);
  };
  const status = a.status;
  return (
    <article class="approval" aria-label={`Approval ${a.id}`} data-approval={a.id}>
      <header>
        <strong>{a.frozen.tool}</strong> needs approval <Status value={status} />
      </header>
      <dl class="facts">
        <dt>Acting as</dt>
        <dd>
          <code>{a.frozen.principal_id}</code>
        </dd>
        <dt>Agent</dt>
        <dd>
          {a.frozen.agent_id ? <code>{a.frozen.agent_id}</code> : "none (an Automation's step)"}
        </dd>
        {a.frozen.connection_id && (
          <>
            <dt>Connection</dt>
            <dd>
              <code>{a.frozen.connection_id}</code>
            </dd>
          </>
        )}
        {props.showSession && a.session_id && (
          <>
            <dt>Session</dt>
            <dd>
              <Link to={`/sessions/${a.session_id}`}>{a.session_id}</Link>
            </dd>
          </>
        )}
        <dt>Asked</dt>
        <dd>
          <When at={a.created_at} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <When at={a.expires_at} />
        </dd>
      </dl>
      <h3 class="sub">Arguments</h3>
      <Json value={a.frozen.arguments} />
      {a.response_token && a.status === "pending" ? (
        <div class="buttons">
          <Action label="Approve" kind="primary" run={() => answer("approve")} />
          <Action label="Deny" kind="danger" run={() => answer("deny")} />
        </div>
      ) : a.status === "pending" ? (
        <p class="muted">You may see this approval but not answer it.</p>
      ) : null}
    </article>
  );
}

/** An approval named by an event of the log, fetched on demand. */
export function ApprovalById(props: { id: string }) {
  const [a] = useAsync(() => api.approvals.get(props.id), [props.id]);
  if (a.state === "loading") return <p class="muted">Loading the approval…</p>;
  if (a.state === "error") return <ErrorBox error={a.error} />;
  return <ApprovalCard approval={a.value} />;
}

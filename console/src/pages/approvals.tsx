// Approvals: the inbox of ActionApprovals this viewer may answer, newest
// first, each with its frozen context; and the StandingApprovals in reach,
// with revoke.

import { api } from "../api.js";
import type { Me } from "../main.js";
import { Action, ListState, When, useAsync } from "../ui.js";
import { ApprovalCard } from "./approval.js";

export function Approvals(props: { me: Me }) {
  const [pending, reload] = useAsync(async () => {
    const all = await api.approvals.list({ status: "pending" }).all();
    return all.filter((a) => a.response_token).sort((x, y) => (x.created_at < y.created_at ? 1 : -1));
  }, []);
  const [standing, reloadStanding] = useAsync(() => api.standingApprovals.list().all(), []);
  return (
    <section>
      <h1>Approvals</h1>
      <h2>Waiting for you</h2>
      <ListState result={pending} empty="Nothing waits for your answer.">
        {(items) => (
          <div class="stack">
            {items.map((a) => (
              <ApprovalCard key={a.id} approval={a} showSession onAnswered={reload} />
            ))}
          </div>
        )}
      </ListState>
      <h2>Standing approvals</h2>
      <ListState result={standing} empty="No standing approval is in your reach.">
        {(items) => (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Tool</th>
                  <th scope="col">For</th>
                  <th scope="col">Granted by</th>
                  <th scope="col">Expires</th>
                  <th scope="col">
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {items.map((s) => (
                  <tr key={s.id}>
                    <td>
                      <strong>{s.tuple.tool}</strong> <span class="muted">by agent</span> <code>{s.tuple.agent_id}</code>
                    </td>
                    <td>
                      <code>{s.tuple.principal_id}</code>
                    </td>
                    <td>
                      <code>{s.created_by}</code>
                      {s.created_by === props.me.principal.id && <span class="muted"> (you)</span>}
                    </td>
                    <td>
                      <When at={s.expires_at} />
                    </td>
                    <td>
                      {s.revoked_at ? (
                        <span class="muted">revoked</span>
                      ) : (
                        <Action label="Revoke" kind="danger" confirm="Revoke this standing approval?" run={async () => {
                          await api.standingApprovals.revoke(s.id);
                          reloadStanding();
                        }} />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </ListState>
    </section>
  );
}

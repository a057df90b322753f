// Sessions: the list, filtered by what the URL's query says (status,
// deployment, Environment), so a filtered view can be shared.

import { api } from "../api.js";
import { useFilters } from "../forms.js";
import { useLocation } from "../router.js";
import { Link, ListState, Status, Table, When, useAsync } from "../ui.js";

const STATUSES = ["", "running", "idle", "rescheduling", "terminated"] as const;
type Filter = Exclude<(typeof STATUSES)[number], "">;

export function Sessions() {
  const { query } = useLocation();
  const status = query.get("status") ?? "";
  const deployment = query.get("agent_deployment_id") ?? "";
  const environment = query.get("environment_id") ?? "";
  const [sessions] = useAsync(async () => {
    const page = await api.sessions
      .list({
        status: (STATUSES as readonly string[]).includes(status) && status ? (status as Filter) : undefined,
        agent_deployment_id: deployment || undefined,
        environment_id: environment || undefined,
        limit: 100,
      })
      .first();
    return page.data;
  }, [status, deployment, environment]);
  const setFilter = useFilters().set;
  return (
    <section>
      <h1>Sessions</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status{" "}
          <select value={status} onChange={(e) => setFilter("status", e.currentTarget.value)}>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        <label>
          Deployment{" "}
          <input
            value={deployment}
            placeholder="dep_…"
            onChange={(e) => setFilter("agent_deployment_id", e.currentTarget.value.trim())}
          />
        </label>
        <label>
          Environment{" "}
          <input value={environment} placeholder="env_…" onChange={(e) => setFilter("environment_id", e.currentTarget.value.trim())} />
        </label>
      </form>
      <ListState result={sessions} empty="No Session matches these filters.">
        {(items) => (
          <Table
            label="Sessions"
            rows={items}
            rowKey={(s) => s.id}
            columns={[
              { title: "Session", cell: (s) => <Link to={`/sessions/${s.id}`}>{s.title || s.id}</Link> },
              { title: "Status", cell: (s) => <Status value={s.status} /> },
              {
                title: "Deployment",
                cell: (s) => (
                  <>
                    <code>{s.agent_deployment_id}</code> r{s.deployment_revision}
                  </>
                ),
              },
              { title: "Principal", cell: (s) => <code>{s.principal_id}</code> },
              { title: "Created", cell: (s) => <When at={s.created_at} /> },
            ]}
          />
        )}
      </ListState>
    </section>
  );
}

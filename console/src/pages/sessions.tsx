// Sessions: the list, filtered by what the URL's query says (status,
// deployment, Environment), so a filtered view can be shared.

import { api } from "../api.js";
import { navigate, useLocation } from "../router.js";
import { Link, ListState, Status, When, useAsync } from "../ui.js";

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
  const setFilter = (name: string, value: string) => {
    const next = new URLSearchParams(query);
    if (value) next.set(name, value);
    else next.delete(name);
    const q = next.toString();
    navigate(`/sessions${q ? `?${q}` : ""}`, true);
  };
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
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Session</th>
                  <th scope="col">Status</th>
                  <th scope="col">Deployment</th>
                  <th scope="col">Principal</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {items.map((s) => (
                  <tr key={s.id}>
                    <td>
                      <Link to={`/sessions/${s.id}`}>{s.title || s.id}</Link>
                    </td>
                    <td>
                      <Status value={s.status} />
                    </td>
                    <td>
                      <code>{s.agent_deployment_id}</code> r{s.deployment_revision}
                    </td>
                    <td>
                      <code>{s.principal_id}</code>
                    </td>
                    <td>
                      <When at={s.created_at} />
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

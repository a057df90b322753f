// Home: what this installation can do, the Environments the viewer sees,
// and how many approvals wait for them.

import { api } from "../api.js";
import type { Me } from "../main.js";
import { ErrorBox, Link, ListState, useAsync } from "../ui.js";

export function Home(props: { me: Me }) {
  const [caps] = useAsync(() => api.capabilities.list().all(), []);
  const [envs] = useAsync(() => api.environments.list().all(), []);
  const [waiting] = useAsync(async () => {
    const pending = await api.approvals.list({ status: "pending" }).all();
    return pending.filter((a) => a.response_token).length;
  }, []);
  return (
    <section>
      <h1>Home</h1>
      <p>
        Signed in as <strong>{props.me.principal.name}</strong> ({props.me.principal.kind}, <code>{props.me.principal.id}</code>).
      </p>
      <div class="cards">
        <article class="card">
          <h2>Approvals waiting for you</h2>
          {waiting.state === "ready" ? (
            <p class="big">
              <Link to="/approvals">{waiting.value}</Link>
            </p>
          ) : waiting.state === "error" ? (
            <ErrorBox error={waiting.error} />
          ) : (
            <p class="muted" role="status">
              Loading…
            </p>
          )}
        </article>
        <article class="card">
          <h2>Environments</h2>
          <ListState result={envs} empty="No Environment is visible to you.">
            {(items) => (
              <ul class="plain">
                {items.map((e) => (
                  <li key={e.id}>
                    <Link to={`/sessions?environment_id=${e.id}`}>{e.name}</Link> <code class="muted">{e.id}</code>
                    {e.disabled && <span class="status status-disabled">disabled</span>}
                  </li>
                ))}
              </ul>
            )}
          </ListState>
        </article>
        <article class="card">
          <h2>Capabilities</h2>
          <ListState result={caps} empty="No capability is reported.">
            {(items) => (
              <ul class="plain">
                {items.map((c) => (
                  <li key={c.name}>
                    <span class={c.available ? "ok" : "off"} aria-hidden="true">
                      {c.available ? "●" : "○"}
                    </span>{" "}
                    {c.name} {c.available ? <span class="muted">available</span> : <span class="muted">{c.reason}</span>}
                    {c.preview && <span class="status">preview</span>}
                  </li>
                ))}
              </ul>
            )}
          </ListState>
        </article>
      </div>
    </section>
  );
}

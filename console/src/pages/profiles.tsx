// SandboxProfiles and ModelRoutingProfiles of an Environment: what a
// Deployment pins besides its agent version.

import { api } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { CreateForm } from "../forms.js";
import { Link, ListState, When, useAsync } from "../ui.js";

export function Profiles() {
  const env = useEnvironment();
  const [sandboxes, reloadSandboxes] = useAsync(
    async () => (env.current ? api.sandboxProfiles.list({ environment_id: env.current }).all() : []),
    [env.current],
  );
  const [routes, reloadRoutes] = useAsync(
    async () => (env.current ? api.modelRoutingProfiles.list({ environment_id: env.current }).all() : []),
    [env.current],
  );
  return (
    <section>
      <h1>Profiles</h1>
      <p>
        <EnvironmentPicker env={env} /> <Link to="/agents">Agents</Link>
      </p>
      <h2>Sandbox profiles</h2>
      <CreateForm
        label="Create sandbox profile"
        disabled={!env.current}
        fields={[
          { name: "name", label: "Name" },
          { name: "image", label: "Image", value: "debian:12" },
        ]}
        create={async (v) => {
          await api.sandboxProfiles.create({ environment_id: env.current, name: v["name"] ?? "", image: v["image"] ?? "" });
          reloadSandboxes();
        }}
      />
      <ListState result={sandboxes} empty="No sandbox profile yet.">
        {(items) => (
          <ul class="plain">
            {items.map((s) => (
              <li key={s.id}>
                <strong>{s.name}</strong> revision {s.latest_revision} <code class="muted">{s.id}</code> <When at={s.created_at} />
                {s.archived_at && <span class="status">archived</span>}
              </li>
            ))}
          </ul>
        )}
      </ListState>
      <h2>Model routing profiles</h2>
      <CreateForm
        label="Create model route"
        disabled={!env.current}
        fields={[
          { name: "name", label: "Name" },
          { name: "provider", label: "Provider", value: "scripted" },
          { name: "model", label: "Model", value: "scripted-1" },
        ]}
        create={async (v) => {
          await api.modelRoutingProfiles.create({
            environment_id: env.current,
            name: v["name"] ?? "",
            candidates: [{ provider: (v["provider"] ?? "") as "scripted" | "anthropic" | "openai", model: v["model"] ?? "", effort: "low" }],
          });
          reloadRoutes();
        }}
      />
      <ListState result={routes} empty="No model routing profile yet.">
        {(items) => (
          <ul class="plain">
            {items.map((r) => (
              <li key={r.id}>
                <strong>{r.name}</strong>: {r.candidates.map((c) => `${c.provider}/${c.model} (${c.effort})`).join(" → ")}{" "}
                <code class="muted">{r.id}</code>
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}

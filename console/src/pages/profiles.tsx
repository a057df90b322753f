// SandboxProfiles and ModelRoutingProfiles of an Environment: what a
// Deployment pins besides its agent version.

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { ErrorBox, Link, ListState, When, useAsync } from "../ui.js";

function CreateForm(props: { label: string; fields: { name: string; label: string; value?: string }[]; create: (v: Record<string, string>) => Promise<unknown> }) {
  const [error, setError] = useState<unknown>(null);
  return (
    <form
      class="inline-form"
      aria-label={props.label}
      onSubmit={async (e) => {
        e.preventDefault();
        const form = e.currentTarget;
        const values = Object.fromEntries(props.fields.map((f) => [f.name, (form.elements.namedItem(f.name) as HTMLInputElement).value.trim()]));
        setError(null);
        try {
          await props.create(values);
          form.reset();
        } catch (err) {
          setError(err);
        }
      }}
    >
      {props.fields.map((f) => (
        <label key={f.name}>
          {f.label} <input name={f.name} required defaultValue={f.value ?? ""} />
        </label>
      ))}
      <button type="submit" class="primary">
        {props.label}
      </button>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

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

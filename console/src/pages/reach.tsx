// Reach: what agents reach beyond their sandbox, and what they keep. Each
// section is its own URL under /reach: Connections (never a secret: a
// credential is write-only), ToolSources with each tool's review, vaults,
// Runners (a pairing code shown once), Skills and Files. Memory stores have
// their own browser (memory.tsx).

import { useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { CreateForm } from "../forms.js";
import { useServicePrincipals } from "../lookups.js";
import { Action, ListState, Status, SubNav, Table, When, useAsync } from "../ui.js";

const SECTIONS = [
  { to: "/reach", label: "Connections" },
  { to: "/reach/tools", label: "Tool sources" },
  { to: "/reach/vaults", label: "Vaults" },
  { to: "/reach/runners", label: "Runners" },
  { to: "/reach/memory", label: "Memory" },
  { to: "/reach/skills", label: "Skills" },
  { to: "/reach/files", label: "Files" },
];

export function ReachNav(props: { at: string }) {
  return <SubNav label="Reach" at={props.at} sections={SECTIONS} />;
}

export function Reach(props: { section: string }) {
  const env = useEnvironment();
  const at = props.section ? `/reach/${props.section}` : "/reach";
  const e = env.current;
  return (
    <section>
      <h1>Reach</h1>
      <ReachNav at={at} />
      <p>
        <EnvironmentPicker env={env} />
      </p>
      {e && props.section === "" && <Connections environmentId={e} />}
      {e && props.section === "tools" && <ToolSources environmentId={e} />}
      {e && props.section === "vaults" && <Vaults environmentId={e} />}
      {e && props.section === "runners" && <Runners environmentId={e} />}
      {e && props.section === "skills" && <Skills environmentId={e} />}
      {e && props.section === "files" && <Files environmentId={e} />}
    </section>
  );
}

function Connections(props: { environmentId: string }) {
  const [connections, reload] = useAsync(() => api.connections.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  return (
    <>
      <h2>Connections</h2>
      <p class="hint">A credential is write-only: the platform uses it on the agents' behalf and never shows it, here or anywhere.</p>
      <CreateForm
        label="New connection"
        submit="Create connection"
        fields={[
          { name: "name", label: "Name" },
          { name: "kind", label: "Kind", options: ["mcp", "http"] },
          { name: "url", label: "Endpoint URL", placeholder: "https://…" },
        ]}
        create={async (v) => {
          await api.connections.create({ environment_id: props.environmentId, name: v["name"] ?? "", kind: v["kind"] === "http" ? "http" : "mcp", endpoint: { url: v["url"] ?? "" } });
          reload();
        }}
      />
      <ListState result={connections} empty="No Connection in this Environment.">
        {(items) => (
          <Table
            label="Connections"
            rows={items}
            rowKey={(c) => c.id}
            rowAttrs={(c) => ({ "data-connection": c.name })}
            columns={[
              {
                title: "Name",
                cell: (c) => (
                  <>
                    {c.name} <code class="muted">{c.id}</code>
                  </>
                ),
              },
              { title: "Kind", cell: (c) => c.kind },
              { title: "Endpoint", cell: (c) => <code>{c.endpoint.url}</code> },
              { title: "Status", cell: (c) => <Status value={c.status} /> },
              {
                title: "Credential",
                cell: (c) => (
                  <>
                    {c.credential ? (
                      <>
                        {c.credential.type} <Status value={c.credential.state} /> {c.credential.last_used_at && <>used <When at={c.credential.last_used_at} /></>}
                      </>
                    ) : (
                      <span class="muted">none</span>
                    )}
                    {!c.revoked_at && <SetToken connection={c} changed={reload} />}
                  </>
                ),
              },
              {
                title: "Actions",
                hidden: true,
                cell: (c) =>
                  !c.revoked_at && (
                    <Action
                      label={`Revoke ${c.name}`}
                      kind="danger"
                      confirm={`Revoke ${c.name}? Nothing can use it afterwards.`}
                      run={async () => {
                        await api.connections.revoke(c.id);
                        reload();
                      }}
                    />
                  ),
              },
            ]}
          />
        )}
      </ListState>
    </>
  );
}

/** A bearer token typed once into a password field, sent, and forgotten by the page. */
function SetToken(props: { connection: Schema<"Connection">; changed: () => void }) {
  const [token, setToken] = useState("");
  return (
    <form
      class="row"
      aria-label={`Credential of ${props.connection.name}`}
      onSubmit={(e) => {
        e.preventDefault();
      }}
    >
      <label>
        <span class="sr-only">Bearer token for {props.connection.name}</span>
        <input type="password" autocomplete="off" placeholder="bearer token" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
      </label>
      <Action
        label="Set token"
        disabled={!token}
        run={async () => {
          await api.connections.setCredential(props.connection.id, { type: "static_bearer", token });
          setToken("");
          props.changed();
        }}
      />
    </form>
  );
}

function toolReview(enabled: boolean | null | undefined, posture: boolean): string {
  if (enabled === true) return "enabled (reviewed)";
  if (enabled === false) return "disabled (reviewed)";
  return `not reviewed: ${posture ? "on" : "off"} by default`;
}

/** One tool's review: enabled, disabled, or back to the source's posture. */
function ToolSetting(props: { source: string; tool: Schema<"ToolSourceTool">; changed: () => void }) {
  const t = props.tool;
  return (
    <label>
      <span class="sr-only">Review of {t.name}</span>
      <select
        value={t.enabled === true ? "true" : t.enabled === false ? "false" : ""}
        onChange={async (e) => {
          const v = e.currentTarget.value;
          await api.toolSources.setTool(props.source, t.name, { enabled: v === "" ? null : v === "true" });
          props.changed();
        }}
      >
        <option value="">default</option>
        <option value="true">enable</option>
        <option value="false">disable</option>
      </select>
    </label>
  );
}

function ToolSources(props: { environmentId: string }) {
  const [sources, reload] = useAsync(() => api.toolSources.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  return (
    <>
      <h2>Tool sources</h2>
      <ListState result={sources} empty="No ToolSource in this Environment.">
        {(items) => (
          <>
            {items.map((s) => (
              <article key={s.id} class="card" data-tool-source={s.name}>
                <h3 class="sub">
                  {s.name} <Status value={s.status} /> <span class="muted">sync {s.sync_status ?? "—"}</span> <When at={s.synced_at} />
                </h3>
                {s.sync_error && (
                  <p class="field-error">
                    {s.sync_error.type}: {s.sync_error.message}
                  </p>
                )}
                <p class="muted">
                  Posture: {s.default_config.enabled ? "every discovered tool is offered unless disabled" : "only tools enabled here are offered"}.{" "}
                  <Action
                    label={`Sync ${s.name}`}
                    run={async () => {
                      await api.toolSources.sync(s.id);
                      reload();
                    }}
                  />
                </p>
                {s.tools.length === 0 ? (
                  <p class="empty">No tool discovered yet.</p>
                ) : (
                  <Table
                    label={`Tools of ${s.name}`}
                    rows={s.tools}
                    rowKey={(t) => t.name}
                    rowAttrs={(t) => ({ "data-tool": t.name })}
                    columns={[
                      {
                        title: "Tool",
                        cell: (t) => (
                          <>
                            <code>{t.name}</code> <span class="muted">{t.description}</span>
                          </>
                        ),
                      },
                      { title: "Review", cell: (t) => toolReview(t.enabled, s.default_config.enabled) },
                      { title: "Offered", cell: (t) => (t.offered ? "yes" : "no") },
                      { title: "Set", cell: (t) => <ToolSetting source={s.id} tool={t} changed={reload} /> },
                    ]}
                  />
                )}
              </article>
            ))}
          </>
        )}
      </ListState>
    </>
  );
}

function Vaults(props: { environmentId: string }) {
  const [vaults] = useAsync(() => api.connectionVaults.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  return (
    <>
      <h2>Connection vaults</h2>
      <ListState result={vaults} empty="No ConnectionVault in this Environment.">
        {(items) => (
          <ul class="plain">
            {items.map((v) => (
              <li key={v.id}>
                <strong>{v.name}</strong> <Status value={v.status} /> {v.connection_ids.length} connections, granted to{" "}
                {v.grantees.length ? v.grantees.map((g) => `${g.kind} ${g.id}`).join(", ") : "nobody"} <code class="muted">{v.id}</code>
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </>
  );
}

function Runners(props: { environmentId: string }) {
  const [runners, reload] = useAsync(() => api.runners.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  const [pairing, setPairing] = useState<Schema<"RunnerPairing"> | null>(null);
  const services = useServicePrincipals().map((p) => p.id);
  return (
    <>
      <h2>Runners</h2>
      {services.length > 0 && (
        <CreateForm
          label="Pair a runner"
          submit="Create pairing code"
          fields={[
            { name: "pool", label: "Pool", value: "default" },
            { name: "principal_id", label: "Runs as (service principal)", options: services },
          ]}
          create={async (v) => {
            setPairing(await api.runners.createPairing({ environment_id: props.environmentId, pool: v["pool"] ?? "", principal_id: v["principal_id"] ?? "" }));
          }}
        />
      )}
      {pairing && (
        <div class="notice" role="status">
          <p>
            Pairing code for pool <strong>{pairing.pool}</strong>, shown this once, valid until <When at={pairing.expires_at} />:
          </p>
          <input class="secret" readOnly value={pairing.code ?? ""} aria-label="Pairing code" onFocus={(e) => e.currentTarget.select()} />{" "}
          <p>
            On the Runner's machine:{" "}
            <code>
              checkfu runner --server {location.origin} --pairing-code {pairing.code} --pool {pairing.pool}
            </code>
          </p>
          <button type="button" onClick={() => setPairing(null)}>
            Done
          </button>
        </div>
      )}
      <ListState result={runners} empty="No Runner has paired in this Environment.">
        {(items) => (
          <Table
            label="Runners"
            rows={items}
            rowKey={(r) => r.id}
            columns={[
              {
                title: "Name",
                cell: (r) => (
                  <>
                    {r.name} <code class="muted">{r.id}</code>
                  </>
                ),
              },
              { title: "Pool", cell: (r) => r.pool },
              { title: "Status", cell: (r) => <Status value={r.status} /> },
              { title: "Last seen", cell: (r) => <When at={r.last_seen_at} /> },
              {
                title: "Actions",
                hidden: true,
                cell: (r) =>
                  !r.revoked_at && (
                    <Action
                      label={`Revoke ${r.name}`}
                      kind="danger"
                      confirm={`Revoke the runner ${r.name}? Its work is rescheduled elsewhere.`}
                      run={async () => {
                        await api.runners.revoke(r.id);
                        reload();
                      }}
                    />
                  ),
              },
            ]}
          />
        )}
      </ListState>
    </>
  );
}

function Skills(props: { environmentId: string }) {
  const [skills] = useAsync(() => api.skills.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  return (
    <>
      <h2>Skills</h2>
      <ListState result={skills} empty="No Skill in this Environment.">
        {(items) => (
          <ul class="plain">
            {items.map((s) => (
              <li key={s.id}>
                <strong>{s.name}</strong> version {s.latest_version} <Status value={s.status} /> <span class="muted">{s.description}</span>{" "}
                {s.latest_version > 0 && (
                  <a href={`/v1/skills/${encodeURIComponent(s.id)}/versions/${s.latest_version}/content`} download>
                    Download version {s.latest_version}
                  </a>
                )}
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </>
  );
}

function Files(props: { environmentId: string }) {
  const [files] = useAsync(() => api.files.list({ environment_id: props.environmentId }).all(1_000), [props.environmentId]);
  return (
    <>
      <h2>Files</h2>
      <p class="hint">Upload files with the CLI (checkfu files upload) or the SDK; download them here.</p>
      <ListState result={files} empty="No File in this Environment.">
        {(items) => (
          <Table
            label="Files"
            rows={items}
            rowKey={(f) => f.id}
            columns={[
              {
                title: "Name",
                cell: (f) => (
                  <a href={`/v1/files/${encodeURIComponent(f.id)}/content`} download={f.filename}>
                    {f.filename}
                  </a>
                ),
              },
              { title: "Type", cell: (f) => f.media_type },
              { title: "Size", cell: (f) => `${f.size_bytes.toLocaleString()} bytes` },
              { title: "Created", cell: (f) => <When at={f.created_at} /> },
            ]}
          />
        )}
      </ListState>
    </>
  );
}

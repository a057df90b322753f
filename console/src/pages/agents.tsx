// Agents: the list and a new agent; an agent's page has its draft editor
// (instructions, built-in tools, and the rest of the definition as JSON),
// publish, its versions with a side-by-side diff of any two, and its
// Deployments with their pins — from which a Session can be started.

import { useMemo, useState } from "preact/hooks";
import { api, userMessage, type Schema } from "../api.js";
import { DiffTable } from "../diff-table.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { navigate } from "../router.js";
import { Action, ErrorBox, Link, ListState, When, useAsync } from "../ui.js";

type Agent = Schema<"Agent">;
type Version = Schema<"AgentVersion">;

/** The built-in tools an agent may declare. */
const BUILTIN = ["bash", "read", "write", "edit", "glob", "grep", "web_fetch"];

export function Agents() {
  const env = useEnvironment();
  const [agents] = useAsync(
    async () => (env.current ? (await api.agents.list({ environment_id: env.current }).all()).filter((a) => !a.archived) : []),
    [env.current],
  );
  const [error, setError] = useState<unknown>(null);
  return (
    <section>
      <h1>Agents</h1>
      <p>
        <EnvironmentPicker env={env} /> <Link to="/profiles">Sandbox and model routing profiles</Link>
      </p>
      <form
        class="inline-form"
        aria-label="New agent"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const name = (form.elements.namedItem("name") as HTMLInputElement).value.trim();
          const instructions = (form.elements.namedItem("instructions") as HTMLInputElement).value;
          setError(null);
          try {
            const agent = await api.agents.create({ environment_id: env.current, name, draft: { instructions } });
            navigate(`/agents/${agent.id}`);
          } catch (err) {
            setError(err);
          }
        }}
      >
        <label>
          Name <input name="name" required maxLength={200} />
        </label>
        <label>
          Instructions <input name="instructions" />
        </label>
        <button type="submit" class="primary" disabled={!env.current}>
          Create agent
        </button>
      </form>
      {error !== null && <ErrorBox error={error} />}
      <ListState result={agents} empty="No agent in this Environment yet.">
        {(items) => (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">Latest version</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {items.map((a) => (
                  <tr key={a.id}>
                    <td>
                      <Link to={`/agents/${a.id}`}>{a.name}</Link>
                    </td>
                    <td>{a.latest_version ?? <span class="muted">unpublished</span>}</td>
                    <td>
                      <When at={a.updated_at} />
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

function DraftEditor(props: { agent: Agent; onSaved: (a: Agent) => void }) {
  const draft = props.agent.draft as Record<string, unknown>;
  const declared = new Set(
    ((draft["tools"] as { type?: string; name?: string }[] | undefined) ?? []).filter((t) => t.type === "builtin").map((t) => t.name ?? ""),
  );
  const { instructions: _i, tools: _t, ...rest } = draft;
  const others = ((draft["tools"] as { type?: string }[] | undefined) ?? []).filter((t) => t.type !== "builtin");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  return (
    <form
      class="editor"
      aria-label="Draft"
      onSubmit={async (e) => {
        e.preventDefault();
        const form = e.currentTarget;
        setError(null);
        setSaved(false);
        try {
          const restText = (form.elements.namedItem("rest") as HTMLTextAreaElement).value.trim();
          const extra = restText ? (JSON.parse(restText) as Record<string, unknown>) : {};
          const otherTools = JSON.parse((form.elements.namedItem("other_tools") as HTMLTextAreaElement).value.trim() || "[]") as unknown[];
          const tools = [
            ...BUILTIN.filter((n) => (form.elements.namedItem(`tool-${n}`) as HTMLInputElement).checked).map((name) => ({ type: "builtin", name })),
            ...otherTools,
          ];
          const next = {
            ...extra,
            instructions: (form.elements.namedItem("instructions") as HTMLTextAreaElement).value,
            tools,
          };
          const agent = await api.agents.update(props.agent.id, { draft: next as never, expected_version: props.agent.version });
          props.onSaved(agent);
          setSaved(true);
        } catch (err) {
          setError(err instanceof SyntaxError ? new Error(`The JSON is not valid: ${err.message}`) : err);
        }
      }}
    >
      <label for="instructions">Instructions</label>
      <textarea id="instructions" name="instructions" rows={6} defaultValue={String(draft["instructions"] ?? "")} />
      <fieldset>
        <legend>Built-in tools</legend>
        {BUILTIN.map((n) => (
          <label key={n} class="check">
            <input type="checkbox" name={`tool-${n}`} defaultChecked={declared.has(n)} /> {n}
          </label>
        ))}
      </fieldset>
      <label for="other_tools">Other tools (MCP, custom; JSON array)</label>
      <textarea id="other_tools" name="other_tools" rows={3} class="code" defaultValue={JSON.stringify(others, null, 2)} />
      <label for="rest">Skills, roster (multiagent), model and the rest of the draft (JSON)</label>
      <textarea id="rest" name="rest" rows={6} class="code" defaultValue={JSON.stringify(rest, null, 2)} />
      <div class="buttons">
        <button type="submit" class="primary">
          Save draft
        </button>
        {saved && (
          <span role="status" class="muted">
            Draft saved.
          </span>
        )}
      </div>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

function VersionDiff(props: { versions: Version[] }) {
  const vs = props.versions;
  const [left, setLeft] = useState(vs.length > 1 ? vs[1]!.version : (vs[0]?.version ?? 0));
  const [right, setRight] = useState(vs[0]?.version ?? 0);
  const text = (n: number) => JSON.stringify(vs.find((v) => v.version === n)?.definition ?? {}, null, 2);
  const pick = (label: string, value: number, set: (n: number) => void) => (
    <label>
      {label}{" "}
      <select value={value} onChange={(e) => set(Number(e.currentTarget.value))}>
        {vs.map((v) => (
          <option key={v.version} value={v.version}>
            version {v.version}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <div>
      <div class="filters">
        {pick("Compare", left, setLeft)}
        {pick("with", right, setRight)}
      </div>
      <DiffTable label={`Version ${left} and version ${right}`} leftTitle={`version ${left}`} rightTitle={`version ${right}`} left={text(left)} right={text(right)} />
    </div>
  );
}

function NewDeployment(props: { agent: Agent; versions: Version[]; onCreated: () => void }) {
  const env = props.agent.environment_id;
  const [profiles] = useAsync(
    async () => ({
      routes: await api.modelRoutingProfiles.list({ environment_id: env }).all(),
      sandboxes: (await api.sandboxProfiles.list({ environment_id: env }).all()).filter((p) => !p.archived_at),
    }),
    [env],
  );
  const [error, setError] = useState<unknown>(null);
  if (profiles.state === "loading") return <p class="muted">Loading profiles…</p>;
  if (profiles.state === "error") return <ErrorBox error={profiles.error} />;
  const { routes, sandboxes } = profiles.value;
  if (props.versions.length === 0) return <p class="muted">Publish a version to deploy it.</p>;
  if (routes.length === 0 || sandboxes.length === 0)
    return (
      <p class="muted">
        A Deployment pins a model routing profile and a sandbox profile: <Link to="/profiles">create them</Link> first.
      </p>
    );
  return (
    <form
      class="inline-form"
      aria-label="New deployment"
      onSubmit={async (e) => {
        e.preventDefault();
        const f = e.currentTarget.elements;
        const value = (n: string) => (f.namedItem(n) as HTMLInputElement | HTMLSelectElement).value;
        setError(null);
        try {
          await api.agentDeployments.create({
            environment_id: env,
            key: value("key").trim(),
            agent_id: props.agent.id,
            agent_version: Number(value("agent_version")),
            model_routing_profile_id: value("route"),
            sandbox_profile_id: value("sandbox"),
          });
          props.onCreated();
        } catch (err) {
          setError(err);
        }
      }}
    >
      <label>
        Key <input name="key" required defaultValue={props.agent.name} />
      </label>
      <label>
        Version{" "}
        <select name="agent_version">
          {props.versions.map((v) => (
            <option key={v.version} value={v.version}>
              {v.version}
            </option>
          ))}
        </select>
      </label>
      <label>
        Model route{" "}
        <select name="route">
          {routes.map((r) => (
            <option key={r.id} value={r.id}>
              {r.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Sandbox{" "}
        <select name="sandbox">
          {sandboxes.map((s) => (
            <option key={s.id} value={s.id}>
              {s.name}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" class="primary">
        Create deployment
      </button>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

function StartSession(props: { deploymentId: string; principalId: string }) {
  const [error, setError] = useState<unknown>(null);
  return (
    <form
      class="inline-form"
      aria-label={`Start a Session of ${props.deploymentId}`}
      onSubmit={async (e) => {
        e.preventDefault();
        const text = (e.currentTarget.elements.namedItem("first") as HTMLInputElement).value.trim();
        setError(null);
        try {
          const session = await api.sessions.create({
            agent_deployment_id: props.deploymentId,
            initial_events: text ? [userMessage(props.principalId, text)] : [],
          });
          navigate(`/sessions/${session.id}`);
        } catch (err) {
          setError(err);
        }
      }}
    >
      <label>
        First message <input name="first" placeholder="Hello" />
      </label>
      <button type="submit">Start a Session</button>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

export function AgentPage(props: { id: string; principalId: string }) {
  const [agent, reloadAgent] = useAsync(() => api.agents.get(props.id), [props.id]);
  const [versions, reloadVersions] = useAsync(
    async () => (await api.agents.listVersions(props.id).all()).sort((a, b) => b.version - a.version),
    [props.id],
  );
  const [deployments, reloadDeployments] = useAsync(
    async () => {
      const a = await api.agents.get(props.id);
      return (await api.agentDeployments.list({ environment_id: a.environment_id }).all()).filter((d) => d.agent_id === props.id);
    },
    [props.id],
  );
  if (agent.state === "loading") return <p class="muted" role="status">Loading the agent…</p>;
  if (agent.state === "error") return <ErrorBox error={agent.error} />;
  const a = agent.value;
  return (
    <section>
      <h1>{a.name}</h1>
      <p class="muted">
        <code>{a.id}</code> · draft version {a.version} · latest published {a.latest_version ?? "none"}
      </p>
      <h2>Draft</h2>
      <DraftEditor key={a.id} agent={a} onSaved={() => reloadAgent()} />
      <div class="buttons">
        <Action
          label="Publish a version"
          kind="primary"
          run={async () => {
            await api.agents.publishVersion(a.id, { expected_version: a.version });
            reloadAgent();
            reloadVersions();
          }}
        />
      </div>
      <h2>Versions</h2>
      <ListState result={versions} empty="Nothing published yet.">
        {(items) => (
          <>
            <ul class="plain">
              {items.map((v) => (
                <li key={v.version}>
                  version {v.version} · <When at={v.published_at} /> by <code>{v.published_by}</code> ·{" "}
                  <code class="muted">{v.release_sha256.slice(0, 12)}</code>
                </li>
              ))}
            </ul>
            {items.length > 0 && <VersionDiff key={items[0]!.version} versions={items} />}
          </>
        )}
      </ListState>
      <h2>Deployments</h2>
      <ListState result={deployments} empty="Not deployed.">
        {(items) => (
          <div class="stack">
            {items.map((d) => (
              <article class="card" key={d.id} data-deployment={d.key}>
                <h3 class="sub">
                  {d.key} <span class="muted">revision {d.revision}</span>
                </h3>
                <dl class="facts">
                  <dt>Version</dt>
                  <dd>{d.pins.agent_version}</dd>
                  <dt>Model route</dt>
                  <dd>
                    <code>{d.pins.model_routing_profile_id}</code>
                  </dd>
                  <dt>Sandbox</dt>
                  <dd>
                    <code>{d.pins.sandbox_profile_id}</code> revision {d.pins.sandbox_profile_revision}
                  </dd>
                  <dt>Execution</dt>
                  <dd>{String((d.execution as { kind?: string }).kind ?? "managed")}</dd>
                </dl>
                <StartSession deploymentId={d.id} principalId={props.principalId} />
              </article>
            ))}
          </div>
        )}
      </ListState>
      <h3 class="sub">New deployment</h3>
      {versions.state === "ready" && <NewDeployment agent={a} versions={versions.value} onCreated={reloadDeployments} />}
    </section>
  );
}

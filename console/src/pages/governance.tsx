// Governance: who exists (Principals, Groups, API keys), who may do what on
// what (PermissionAssignments), what an action needs (ActionPolicies, with
// the evaluate dry run) and what happened (the audit log). Each section is
// its own URL under /governance.

import { useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { CreateForm, useFilters } from "../forms.js";
import { Action, ErrorBox, Json, Link, ListState, Status, SubNav, Table, When, useAsync } from "../ui.js";

type Principal = Schema<"Principal">;
type Group = Schema<"Group">;
type Grant = Schema<"PermissionAssignment">;
type Ref = Schema<"Ref">;

export const PERMISSIONS = ["admin", "manage", "invoke", "act_as", "use_connection", "use_agent", "approve", "read", "write"] as const;
type Permission = (typeof PERMISSIONS)[number];
const RESOURCE_KINDS = ["environment", "agent", "connection", "memory_store", "principal", "group", "installation"] as const;
const SUBJECT_KINDS = ["principal", "group", "agent_definition"] as const;

const SECTIONS = [
  { to: "/governance", label: "Principals and groups" },
  { to: "/governance/grants", label: "Grants" },
  { to: "/governance/policies", label: "Policies" },
  { to: "/governance/audit", label: "Audit log" },
];

function SectionNav(props: { at: string }) {
  return <SubNav label="Governance" at={props.at} sections={SECTIONS} />;
}

/** Names for the ids a grant or an audit record mentions, from what the viewer may list. */
function useNames(): (ref: Ref | null | undefined) => string {
  const [principals] = useAsync(() => api.principals.list().all(), []);
  const [groups] = useAsync(() => api.groups.list().all(), []);
  const [envs] = useAsync(() => api.environments.list().all(), []);
  const names = new Map<string, string>();
  for (const r of [principals, groups, envs]) if (r.state === "ready") for (const x of r.value) names.set(x.id, x.name);
  return (ref) => (ref ? (names.get(ref.id) ?? (ref.id === "*" ? "everything" : ref.id)) : "—");
}

export function Governance(props: { section: string }) {
  const at = props.section ? `/governance/${props.section}` : "/governance";
  return (
    <section>
      <h1>Governance</h1>
      <SectionNav at={at} />
      {props.section === "" && <PrincipalsAndGroups />}
      {props.section === "grants" && <Grants />}
      {props.section === "policies" && <Policies />}
      {props.section === "audit" && <Audit />}
    </section>
  );
}

function PrincipalsAndGroups() {
  const [principals, reload] = useAsync(() => api.principals.list().all(), []);
  const [groups, reloadGroups] = useAsync(() => api.groups.list().all(), []);
  const byId = new Map((principals.state === "ready" ? principals.value : []).map((p) => [p.id, p]));
  return (
    <>
      <h2>Principals</h2>
      <CreateForm
        label="New principal"
        submit="Create principal"
        fields={[
          { name: "name", label: "Name" },
          { name: "kind", label: "Kind", options: ["human", "service"] },
        ]}
        create={async (v) => {
          await api.principals.create({ name: v["name"] ?? "", kind: v["kind"] === "service" ? "service" : "human" });
          reload();
        }}
      />
      <ListState result={principals} empty="No Principal is visible to you.">
        {(items) => (
          <Table
            label="Principals"
            rows={items}
            rowKey={(p) => p.id}
            columns={[
              {
                title: "Name",
                cell: (p) => (
                  <>
                    <Link to={`/governance/principals/${p.id}`}>{p.name}</Link> <code class="muted">{p.id}</code>
                  </>
                ),
              },
              { title: "Kind", cell: (p) => p.kind },
              { title: "Status", cell: (p) => <Status value={p.disabled ? "disabled" : "active"} /> },
              { title: "Created", cell: (p) => <When at={p.created_at} /> },
              {
                title: "Actions",
                hidden: true,
                cell: (p) => (
                  <Action
                    label={p.disabled ? `Enable ${p.name}` : `Disable ${p.name}`}
                    kind={p.disabled ? undefined : "danger"}
                    confirm={p.disabled ? undefined : `Disable ${p.name}? Their keys and console sessions stop working.`}
                    run={async () => {
                      await api.principals.update(p.id, { disabled: !p.disabled });
                      reload();
                    }}
                  />
                ),
              },
            ]}
          />
        )}
      </ListState>
      <h2>Groups</h2>
      <CreateForm
        label="New group"
        submit="Create group"
        fields={[{ name: "name", label: "Name" }]}
        create={async (v) => {
          await api.groups.create({ name: v["name"] ?? "" });
          reloadGroups();
        }}
      />
      <ListState result={groups} empty="No Group yet.">
        {(items) => (
          <ul class="plain">
            {items.map((g) => (
              <li key={g.id} data-group={g.name}>
                <strong>{g.name}</strong> <code class="muted">{g.id}</code>:{" "}
                {g.member_ids.length === 0 ? <span class="muted">no members</span> : g.member_ids.map((m) => byId.get(m)?.name ?? m).join(", ")}
                <GroupMembers group={g} principals={principals.state === "ready" ? principals.value : []} changed={reloadGroups} />
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </>
  );
}

function GroupMembers(props: { group: Group; principals: Principal[]; changed: () => void }) {
  const outside = props.principals.filter((p) => !props.group.member_ids.includes(p.id));
  const [chosen, setChosen] = useState("");
  return (
    <span class="member-edit">
      {outside.length > 0 && (
        <>
          <label>
            <span class="sr-only">Principal to add to {props.group.name}</span>
            <select value={chosen} onChange={(e) => setChosen(e.currentTarget.value)}>
              <option value="">add a member…</option>
              {outside.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <Action
            label={`Add to ${props.group.name}`}
            disabled={!chosen}
            run={async () => {
              await api.groups.addMember(props.group.id, { principal_id: chosen });
              setChosen("");
              props.changed();
            }}
          />
        </>
      )}
      {props.group.member_ids.map((m) => (
        <Action
          key={m}
          label={`Remove ${props.principals.find((p) => p.id === m)?.name ?? m}`}
          run={async () => {
            await api.groups.removeMember(props.group.id, m);
            props.changed();
          }}
        />
      ))}
    </span>
  );
}

/** One Principal: its API keys (a new key's secret shown once) and what it may do. */
export function PrincipalPage(props: { id: string }) {
  const [principal] = useAsync(() => api.principals.get(props.id), [props.id]);
  const [keys, reloadKeys] = useAsync(() => api.apiKeys.listApiKeys(props.id).all(), [props.id]);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  if (principal.state === "loading") return <p role="status">Loading…</p>;
  if (principal.state === "error") return <ErrorBox error={principal.error} />;
  const p = principal.value;
  return (
    <section>
      <h1>{p.name}</h1>
      <p>
        <Link to="/governance">Governance</Link> · {p.kind} · <Status value={p.disabled ? "disabled" : "active"} /> · <code>{p.id}</code> ·{" "}
        <Link to={`/governance/grants?subject_id=${p.id}`}>What {p.name} may do</Link> ·{" "}
        <Link to={`/governance/audit?actor_id=${p.id}`}>What {p.name} did</Link>
      </p>
      <h2>API keys</h2>
      <CreateForm
        label="New API key"
        submit="Create key"
        fields={[{ name: "name", label: "Key name", optional: true }]}
        create={async (v) => {
          const created = await api.apiKeys.create(p.id, { name: v["name"] || null });
          setSecret({ name: created.name, secret: created.secret ?? "" });
          reloadKeys();
        }}
      />
      {secret && (
        <div class="notice" role="status">
          <p>
            The secret of <strong>{secret.name}</strong>, shown this once — copy it now:
          </p>
          <input class="secret" readOnly value={secret.secret} aria-label="New key's secret" onFocus={(e) => e.currentTarget.select()} />{" "}
          <button type="button" onClick={() => setSecret(null)}>
            I have copied it
          </button>
        </div>
      )}
      <ListState result={keys} empty="This Principal has no API key.">
        {(items) => (
          <ul class="plain">
            {items.map((k) => (
              <li key={k.id} data-key={k.name}>
                <strong>{k.name}</strong> <code class="muted">{k.id}</code> created <When at={k.created_at} />{" "}
                {k.revoked_at ? (
                  <>
                    <Status value="revoked" /> <When at={k.revoked_at} />
                  </>
                ) : (
                  <Action
                    label={`Revoke ${k.name}`}
                    kind="danger"
                    confirm={`Revoke the key ${k.name}? Anything using it stops working.`}
                    run={async () => {
                      await api.apiKeys.revoke(k.id);
                      reloadKeys();
                    }}
                  />
                )}
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}

function GrantSentence(props: { g: Grant; name: (r: Ref | null | undefined) => string }) {
  const { g, name } = props;
  return (
    <>
      <strong>{name(g.subject)}</strong> <span class="muted">({g.subject.kind})</span> may <strong class="permission">{g.permission}</strong> on{" "}
      {g.resource.kind} <strong>{name(g.resource)}</strong>
      {g.via && (
        <span class="muted">
          {" "}
          via {g.via.kind} {name(g.via)}
        </span>
      )}
    </>
  );
}

function Grants() {
  const filters = useFilters();
  const subject = filters.get("subject_id");
  const resource = filters.get("resource_id");
  const permission = filters.get("permission");
  const name = useNames();
  const [grants, reload] = useAsync(
    () =>
      api.permissionAssignments
        .list({
          subject_id: subject || undefined,
          resource_id: resource || undefined,
          permission: (PERMISSIONS as readonly string[]).includes(permission) ? (permission as Permission) : undefined,
        })
        .all(1_000),
    [subject, resource, permission],
  );
  return (
    <>
      <h2>Who can do what on what</h2>
      <form class="filters" aria-label="Filter grants" onSubmit={(e) => e.preventDefault()}>
        <label>
          Who{" "}
          <input value={subject} placeholder="prin_… or grp_…" onChange={(e) => filters.set("subject_id", e.currentTarget.value.trim())} />
        </label>
        <label>
          Can{" "}
          <select value={permission} onChange={(e) => filters.set("permission", e.currentTarget.value)}>
            <option value="">any permission</option>
            {PERMISSIONS.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          On{" "}
          <input value={resource} placeholder="env_…, agt_…, conn_…" onChange={(e) => filters.set("resource_id", e.currentTarget.value.trim())} />
        </label>
      </form>
      <ListState result={grants} empty="No grant matches these filters.">
        {(items) => (
          <ul class="plain grants">
            {items.map((g) => (
              <li key={g.id}>
                <GrantSentence g={g} name={name} /> <When at={g.created_at} />{" "}
                {!g.via && (
                  <Action
                    label="Remove grant"
                    kind="danger"
                    confirm={`Remove: ${name(g.subject)} may ${g.permission} on ${name(g.resource)}?`}
                    run={async () => {
                      await api.permissionAssignments.delete(g.id);
                      reload();
                    }}
                  />
                )}
              </li>
            ))}
          </ul>
        )}
      </ListState>
      <h2>Grant a permission</h2>
      <CreateForm
        label="New grant"
        submit="Grant"
        fields={[
          { name: "subject_kind", label: "Subject kind", options: SUBJECT_KINDS },
          { name: "subject_id", label: "Subject id", placeholder: "prin_…" },
          { name: "permission", label: "Permission", options: PERMISSIONS, value: "read" },
          { name: "resource_kind", label: "Resource kind", options: RESOURCE_KINDS },
          { name: "resource_id", label: "Resource id", placeholder: "env_…" },
        ]}
        create={async (v) => {
          await api.permissionAssignments.create({
            subject: { kind: v["subject_kind"], id: v["subject_id"] } as Schema<"CreateAssignment">["subject"],
            permission: v["permission"] as Permission,
            resource: { kind: v["resource_kind"], id: v["resource_id"] } as Schema<"CreateAssignment">["resource"],
          });
          reload();
        }}
      />
    </>
  );
}

const RULE_EXAMPLE = JSON.stringify(
  [{ subject: { kind: "*" }, permission_glob: "invoke", resource: { kind: "tool", id_glob: "bash" }, disposition: "require_approval" }],
  null,
  2,
);

function Policies() {
  const env = useEnvironment();
  const [policies, reload] = useAsync(async () => (env.current ? api.actionPolicies.list({ environment_id: env.current }).all() : []), [env.current]);
  return (
    <>
      <p>
        <EnvironmentPicker env={env} />
      </p>
      <h2>Action policies</h2>
      <ListState result={policies} empty="No ActionPolicy in this Environment: every permitted action is allowed.">
        {(items) => (
          <ul class="plain">
            {items.map((p) => (
              <li key={p.id} data-policy={p.name}>
                <h3 class="sub">
                  {p.name} <span class="muted">version {p.version}</span>
                </h3>
                <table aria-label={`Rules of ${p.name}`}>
                  <thead>
                    <tr>
                      <th scope="col">Subject</th>
                      <th scope="col">Permission</th>
                      <th scope="col">Resource</th>
                      <th scope="col">Disposition</th>
                    </tr>
                  </thead>
                  <tbody>
                    {p.rules.map((r, i) => {
                      const rule = r as { subject?: { kind?: string; id_glob?: string }; permission_glob?: string; resource?: { kind?: string; id_glob?: string }; disposition?: string };
                      return (
                        <tr key={i}>
                          <td>
                            {rule.subject?.kind} {rule.subject?.id_glob ?? "*"}
                          </td>
                          <td>{rule.permission_glob ?? "*"}</td>
                          <td>
                            {rule.resource?.kind} {rule.resource?.id_glob ?? "*"}
                          </td>
                          <td>
                            <Status value={rule.disposition ?? ""} />
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
                <Action
                  label={`Delete ${p.name}`}
                  kind="danger"
                  confirm={`Delete the policy ${p.name}?`}
                  run={async () => {
                    await api.actionPolicies.delete(p.id);
                    reload();
                  }}
                />
              </li>
            ))}
          </ul>
        )}
      </ListState>
      <h2>New policy</h2>
      <CreateForm
        label="New policy"
        submit="Create policy"
        disabled={!env.current}
        fields={[
          { name: "name", label: "Name" },
          { name: "rules", label: "Rules (JSON)", multiline: true, value: RULE_EXAMPLE },
        ]}
        create={async (v) => {
          let rules: Schema<"CreateActionPolicy">["rules"];
          try {
            rules = JSON.parse(v["rules"] ?? "[]") as typeof rules;
          } catch (e) {
            throw new Error(`The rules are not JSON: ${(e as Error).message}`);
          }
          await api.actionPolicies.create({ environment_id: env.current, name: v["name"] ?? "", rules });
          reload();
        }}
      />
      <Evaluate environmentId={env.current} />
    </>
  );
}

const BUILTIN_TOOLS = ["bash", "read", "write", "edit", "glob", "grep", "web_fetch"] as const;

/** The dry run: what the policies would answer for one action, recording nothing. */
function Evaluate(props: { environmentId: string }) {
  const [answer, setAnswer] = useState<Schema<"Evaluation"> | null>(null);
  return (
    <>
      <h2>Evaluate an action</h2>
      <CreateForm
        label="Evaluate an action"
        submit="Evaluate"
        fields={[
          { name: "subject", label: "Principal id", placeholder: "prin_…" },
          { name: "tool", label: "Built-in tool", options: BUILTIN_TOOLS },
        ]}
        create={async (v) => {
          setAnswer(null);
          const tool = v["tool"] as (typeof BUILTIN_TOOLS)[number];
          setAnswer(
            await api.actionPolicies.evaluate({
              environment_id: props.environmentId,
              subject: { kind: "principal", id: v["subject"] ?? "" },
              permission: "invoke",
              resource: { kind: "tool", id: tool },
              tool: { type: "builtin", name: tool },
            }),
          );
        }}
      />
      {answer && (
        <p class="evaluation" role="status">
          Disposition <Status value={answer.disposition} />: {answer.reason}
          {answer.matched_rule_ids.length > 0 && <> (rules {answer.matched_rule_ids.join(", ")})</>}
        </p>
      )}
    </>
  );
}

function Audit() {
  const filters = useFilters();
  const actor = filters.get("actor_id");
  const resource = filters.get("resource_id");
  const name = useNames();
  const [pages, setPages] = useState(1);
  const [events] = useAsync(async () => {
    const out: Schema<"AuditEvent">[] = [];
    let more = false;
    let n = 0;
    for await (const page of api.auditEvents.list({ actor_id: actor || undefined, resource_id: resource || undefined, limit: 100 }).pages()) {
      out.push(...page.data);
      more = Boolean(page.next_page);
      if (++n >= pages) break;
    }
    return { items: out, more };
  }, [actor, resource, pages]);
  return (
    <>
      <h2>Audit log</h2>
      <form class="filters" aria-label="Filter the audit log" onSubmit={(e) => e.preventDefault()}>
        <label>
          Actor <input value={actor} placeholder="prin_…" onChange={(e) => filters.set("actor_id", e.currentTarget.value.trim())} />
        </label>
        <label>
          Resource <input value={resource} placeholder="agt_…, auto_…" onChange={(e) => filters.set("resource_id", e.currentTarget.value.trim())} />
        </label>
      </form>
      <ListState result={events.state === "ready" ? { state: "ready", value: events.value.items } : events} empty="No audit record matches.">
        {(items) => (
          <Table
            label="Audit records"
            rows={items}
            rowKey={(e) => e.id}
            columns={[
              { title: "When", cell: (e) => <When at={e.created_at} /> },
              { title: "Actor", cell: (e) => name({ kind: "principal", id: e.actor_id }) },
              { title: "Action", cell: (e) => <code>{e.action}</code> },
              {
                title: "Resource",
                cell: (e) => (
                  <>
                    {e.resource.kind} <code>{e.resource.id}</code>
                  </>
                ),
              },
              { title: "Details", cell: (e) => <Json value={e.details} foldAt={120} /> },
            ]}
          />
        )}
      </ListState>
      {events.state === "ready" && events.value.more && (
        <button type="button" onClick={() => setPages(pages + 1)}>
          Show older records
        </button>
      )}
    </>
  );
}

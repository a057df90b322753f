// Memory stores: the list, and one store's browser — its documents as a
// tree of folders, a document with the versions that touched it and a
// side-by-side diff of any two, and the open proposals to accept or reject.

import { useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { DiffTable } from "../diff-table.js";
import { useFilters } from "../forms.js";
import { Action, ErrorBox, Link, ListState, Status, When, useAsync } from "../ui.js";
import { ReachNav } from "./reach.js";

type Version = Schema<"MemoryVersion">;
type Change = { path?: string; operation?: string; content?: string | null };

export function MemoryStores() {
  const env = useEnvironment();
  const [stores] = useAsync(async () => (env.current ? api.memoryStores.list({ environment_id: env.current }).all(1_000) : []), [env.current]);
  return (
    <section>
      <h1>Reach</h1>
      <ReachNav at="/reach/memory" />
      <p>
        <EnvironmentPicker env={env} />
      </p>
      <h2>Memory stores</h2>
      <ListState result={stores} empty="No memory store in this Environment.">
        {(items) => (
          <ul class="plain">
            {items.map((s) => (
              <li key={s.id}>
                <Link to={`/reach/memory/${s.id}`}>{s.name}</Link> version {s.head_version}, review {s.review} <Status value={s.status} />{" "}
                <span class="muted">{s.description}</span>
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}

/** `/a/b/c.md` → its folders, for the tree. */
function folders(paths: string[]): Map<string, string[]> {
  const tree = new Map<string, string[]>();
  for (const p of paths) {
    const dir = p.slice(0, p.lastIndexOf("/") + 1) || "/";
    tree.set(dir, [...(tree.get(dir) ?? []), p]);
  }
  return new Map([...tree.entries()].sort(([a], [b]) => a.localeCompare(b)));
}

export function MemoryStorePage(props: { id: string }) {
  const filters = useFilters();
  const path = filters.get("path");
  const [store] = useAsync(() => api.memoryStores.get(props.id), [props.id]);
  const [documents] = useAsync(() => api.memoryStores.listDocuments(props.id, { limit: 100 }).all(10_000), [props.id]);
  const [versions, reloadVersions] = useAsync(() => api.memoryStores.listVersions(props.id, { limit: 100 }).all(1_000), [props.id]);
  const [proposals, reloadProposals] = useAsync(() => api.memoryProposals.list({ memory_store_id: props.id, status: "open" }).all(1_000), [props.id]);
  if (store.state === "loading") return <p role="status">Loading…</p>;
  if (store.state === "error") return <ErrorBox error={store.error} />;
  const s = store.value;
  return (
    <section>
      <h1>{s.name}</h1>
      <p>
        <Link to="/reach/memory">Memory stores</Link> · version {s.head_version} · review {s.review} · <code>{s.id}</code>
      </p>
      <div class="memory">
        <nav aria-label="Documents" class="doc-tree">
          <h2>Documents</h2>
          <ListState result={documents} empty="The store is empty.">
            {(items) => (
              <ul class="plain">
                {[...folders(items.map((d) => d.path)).entries()].map(([dir, paths]) => (
                  <li key={dir}>
                    <span class="muted">{dir}</span>
                    <ul class="plain indent">
                      {paths.map((p) => (
                        <li key={p}>
                          <Link to={`/reach/memory/${s.id}?path=${encodeURIComponent(p)}`} aria-current={p === path ? "page" : undefined}>
                            {p.slice(dir.length) || p}
                          </Link>
                        </li>
                      ))}
                    </ul>
                  </li>
                ))}
              </ul>
            )}
          </ListState>
        </nav>
        <div>
          {path ? (
            <DocumentView storeId={s.id} path={path} versions={versions.state === "ready" ? versions.value : []} />
          ) : (
            <p class="hint">Choose a document to read it, its versions and their differences.</p>
          )}
        </div>
      </div>
      <h2>Open proposals</h2>
      <ListState result={proposals} empty="No open proposal.">
        {(items) => (
          <ul class="plain">
            {items.map((p) => (
              <li key={p.id} class="card" data-proposal={p.id}>
                <p>
                  <strong>{p.rationale || "(no rationale)"}</strong> <span class="muted">{p.type}</span> on version {p.base_version} <When at={p.created_at} />
                </p>
                <ul>
                  {(p.changes as Change[]).map((c, i) => (
                    <li key={i}>
                      <code>{c.path}</code> {c.content === null ? "deleted" : `${(c.content ?? "").length.toLocaleString()} characters`}
                    </li>
                  ))}
                </ul>
                <Action
                  label="Accept"
                  kind="primary"
                  run={async () => {
                    await api.memoryProposals.approve(p.id, {});
                    reloadProposals();
                    reloadVersions();
                  }}
                />{" "}
                <Action
                  label="Reject"
                  kind="danger"
                  run={async () => {
                    await api.memoryProposals.reject(p.id, {});
                    reloadProposals();
                  }}
                />
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}

function DocumentView(props: { storeId: string; path: string; versions: Version[] }) {
  const touched = props.versions.filter((v) => (v.changes as Change[]).some((c) => c.path === props.path)).map((v) => v.store_version);
  const [left, setLeft] = useState<number | null>(null);
  const [right, setRight] = useState<number | null>(null);
  const l = left ?? touched[1] ?? touched[0] ?? 0;
  const r = right ?? touched[0] ?? 0;
  const read = (n: number) =>
    n ? api.memoryStores.readDocument(props.storeId, { path: props.path, at_version: n }).then((a) => a.document.content ?? "", () => "") : Promise.resolve("");
  const [texts] = useAsync(async () => ({ left: await read(l), right: await read(r) }), [props.storeId, props.path, l, r]);
  const pick = (label: string, value: number, set: (n: number) => void) => (
    <label>
      {label}{" "}
      <select value={value} onChange={(e) => set(Number(e.currentTarget.value))}>
        {touched.map((n) => (
          <option key={n} value={n}>
            version {n}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <article>
      <h2>
        <code>{props.path}</code>
      </h2>
      {texts.state === "ready" && <pre class="document">{texts.value.right}</pre>}
      <h3 class="sub">Versions that changed it</h3>
      {touched.length === 0 ? (
        <p class="empty">No version in the last 100 changed it.</p>
      ) : (
        <>
          <div class="filters">
            {pick("Compare", l, setLeft)}
            {pick("with", r, setRight)}
          </div>
          {texts.state === "error" && <ErrorBox error={texts.error} />}
          {texts.state === "ready" && (
            <DiffTable label={`Version ${l} and version ${r} of ${props.path}`} leftTitle={`version ${l}`} rightTitle={`version ${r}`} left={texts.value.left} right={texts.value.right} />
          )}
        </>
      )}
    </article>
  );
}

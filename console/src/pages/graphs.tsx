// AutomationGraphs: the list, and the builder — a canvas, an inspector per
// node kind, and the graph's life: Save (a revision; the same document
// changes only the layout), Plan (errors drawn where they are), Apply (with
// the plan's digest), Export and Import JSON ({document, layout}, exactly a
// revision's), and Test this block on an Agent.

import { useEffect, useState } from "preact/hooks";
import { api, type Schema } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { useServicePrincipals } from "../lookups.js";
import type { Me } from "../main.js";
import { navigate, useLocation } from "../router.js";
import { ErrorBox, Link, ListState, Status, When, useAsync } from "../ui.js";
import { Canvas, type Problems, type Selection } from "../graph/canvas.js";
import { EdgeInspector, NodeInspector, type Deployment } from "../graph/inspector.js";
import { TestBlock } from "../graph/test-block.js";
import {
  NODE_KINDS,
  NODE_LABELS,
  addNode,
  canonical,
  connect,
  moveNode,
  removeEdge,
  removeNode,
  setEdgeKind,
  updateNode,
  type GraphDoc,
  type Layout,
} from "../graph/model.js";

type Graph = Schema<"AutomationGraph">;
type Plan = Schema<"GraphPlan">;
/** The latest revision's document, and the graph's layout (a save of the same document changes only the layout). */
type Saved = { revision: number; document: GraphDoc; layout: Layout };

export function Graphs() {
  const env = useEnvironment();
  const [graphs] = useAsync(async () => (env.current ? api.automationGraphs.list({ environment_id: env.current }).all(1_000) : []), [env.current]);
  return (
    <section>
      <h1>Automation graphs</h1>
      <p>
        <EnvironmentPicker env={env} /> <Link to="/automations">Automations</Link> ·{" "}
        <Link to={`/automations/graphs/new?environment_id=${env.current}`}>New graph</Link>
      </p>
      <ListState result={graphs} empty="No graph in this Environment yet.">
        {(items) => (
          <ul class="plain">
            {items.map((g) => (
              <li key={g.id}>
                <Link to={`/automations/graphs/${g.id}`}>{g.name}</Link> revision {g.latest_revision}, applied {g.applied_revision ?? "none"}{" "}
                <Status value={g.drift.state} /> <When at={g.updated_at} />
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}

function problemsOf(plan: Plan | null): Problems {
  const problems: Problems = { nodes: new Map(), edges: new Map() };
  const add = <K,>(m: Map<K, string[]>, k: K, code: string) => m.set(k, [...(m.get(k) ?? []), code]);
  for (const e of [...(plan?.errors ?? []), ...(plan?.blockers ?? [])] as { code?: string; node?: string; edge?: { index?: number } }[]) {
    const code = e.code ?? "problem";
    if (typeof e.edge?.index === "number") add(problems.edges, e.edge.index, code);
    else if (e.node) add(problems.nodes, e.node, code);
  }
  return problems;
}

function download(name: string, value: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(value, null, 2)], { type: "application/json" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1_000);
}

/** The builder for graph `id`, or a new graph when `id` is null. */
export function GraphBuilder(props: { id: string | null; me: Me }) {
  const { query } = useLocation();
  const [graph, setGraph] = useState<Graph | null>(null);
  const [saved, setSaved] = useState<Saved | null>(null);
  const [doc, setDoc] = useState<GraphDoc>({ name: "", environment_id: query.get("environment_id") ?? "", service_principal_id: "", nodes: [], edges: [] });
  const [layout, setLayout] = useState<Layout>({ positions: {} });
  const [selected, setSelected] = useState<Selection>(null);
  const [plan, setPlan] = useState<Plan | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const services = useServicePrincipals();
  const [deployments] = useAsync(
    async () => (doc.environment_id ? api.agentDeployments.list({ environment_id: doc.environment_id }).all() : []),
    [doc.environment_id],
  );
  const [toolSources] = useAsync(
    async () => (doc.environment_id ? api.toolSources.list({ environment_id: doc.environment_id }).all() : []),
    [doc.environment_id],
  );
  const [memoryStores] = useAsync(
    async () => (doc.environment_id ? api.memoryStores.list({ environment_id: doc.environment_id }).all() : []),
    [doc.environment_id],
  );

  const show = (r: Saved) => {
    setSaved(r);
    setDoc(r.document);
    setLayout(r.layout ?? { positions: {} });
  };
  useEffect(() => {
    if (!props.id) return;
    api.automationGraphs
      .get(props.id)
      .then(async (g) => {
        setGraph(g);
        const r = await api.automationGraphs.getRevision(g.id, g.latest_revision);
        show({ revision: r.revision, document: r.document as GraphDoc, layout: g.layout as Layout });
      })
      .catch(setLoadError);
  }, [props.id]);

  const dirty = !saved || canonical({ d: doc, l: layout }) !== canonical({ d: saved.document, l: saved.layout });
  const run = async (what: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      await what();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  /** Saves what is on screen (if anything changed); answers the saved revision and the graph's id. */
  const save = async (): Promise<{ id: string; revision: number }> => {
    if (graph && saved && !dirty) return { id: graph.id, revision: saved.revision };
    const g = graph
      ? await api.automationGraphs.createRevision(graph.id, { document: doc, layout, expected_version: graph.version })
      : await api.automationGraphs.create({ created_by_principal_id: props.me.principal.id, document: doc, layout });
    const r = await api.automationGraphs.getRevision(g.id, g.latest_revision);
    setGraph(g);
    show({ revision: r.revision, document: r.document as GraphDoc, layout: g.layout as Layout });
    if (!graph) navigate(`/automations/graphs/${g.id}`, true);
    return { id: g.id, revision: r.revision };
  };
  const planNow = async () => {
    const s = await save();
    const p = await api.automationGraphs.plan(s.id, { revision: s.revision });
    setPlan(p);
    return { ...s, plan: p };
  };

  const deleteNode = (id: string) => {
    const next = removeNode(doc, layout, id);
    setDoc(next.doc);
    setLayout(next.layout);
    setSelected(null);
  };

  if (loadError) return <ErrorBox error={loadError} />;
  if (props.id && !saved) return <p role="status">Loading…</p>;

  const problems = problemsOf(plan);
  const node = selected && "node" in selected ? doc.nodes.find((n) => n.id === selected.node) : undefined;
  const edge = selected && "edge" in selected ? doc.edges[selected.edge] : undefined;
  const deploymentList: Deployment[] = deployments.state === "ready" ? deployments.value.map((d) => ({ id: d.id, name: d.key })) : [];

  return (
    <section class="builder">
      <h1>{doc.name || "New graph"}</h1>
      <p>
        <Link to="/automations/graphs">Graphs</Link>
        {graph && (
          <>
            {" "}
            · <code>{graph.id}</code> · revision {saved?.revision} · applied {graph.applied_revision ?? "none"} · <Status value={graph.drift.state} />
            {graph.automation_id && (
              <>
                {" "}
                · <Link to={`/automations/${graph.automation_id}`}>its Automation</Link>
              </>
            )}
          </>
        )}
        {dirty && <span class="status"> unsaved changes</span>}
      </p>
      <div class="row">
        <label class="field">
          <span>Name</span>
          <input value={doc.name} onInput={(e) => setDoc({ ...doc, name: e.currentTarget.value })} />
        </label>
        <label class="field">
          <span>Service principal</span>
          <select value={doc.service_principal_id} onChange={(e) => setDoc({ ...doc, service_principal_id: e.currentTarget.value })}>
            <option value="">choose…</option>
            {services.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        {!graph && <EnvironmentField value={doc.environment_id} change={(v) => setDoc({ ...doc, environment_id: v })} />}
      </div>
      <div class="toolbar" role="toolbar" aria-label="Graph">
        {NODE_KINDS.map((k) => (
          <button
            key={k}
            type="button"
            onClick={() => {
              const next = addNode(doc, layout, k);
              setDoc(next.doc);
              setLayout(next.layout);
              setSelected({ node: next.id });
            }}
          >
            Add {NODE_LABELS[k]}
          </button>
        ))}
        <span class="sep" />
        <button
          type="button"
          class="primary"
          disabled={busy}
          onClick={() =>
            run(async () => {
              const before = saved?.revision;
              const { revision } = await save();
              setNotice(revision === before ? `Saved the layout; the document is unchanged (revision ${revision}).` : `Saved revision ${revision}.`);
            })
          }
        >
          Save
        </button>
        <button
          type="button"
          disabled={busy}
          onClick={() =>
            run(async () => {
              const { plan: p } = await planNow();
              setNotice(p.kind === "planned" ? `Planned: ${(p.blockers ?? []).length} blockers.` : `Plan rejected: ${(p.errors ?? []).length} errors.`);
            })
          }
        >
          Plan
        </button>
        <button
          type="button"
          disabled={busy}
          onClick={() =>
            run(async () => {
              const { id, revision, plan: p } = await planNow();
              if (p.kind !== "planned" || !p.plan_sha256) throw new Error("The plan is rejected: fix what it marks, then apply.");
              const applied = await api.automationGraphs.apply(id, { revision, plan_sha256: p.plan_sha256 });
              setGraph(await api.automationGraphs.get(id));
              setNotice(
                `Applied revision ${applied.revision}: ${applied.action} ${applied.automation_id}.` +
                  (applied.ingest_secret ? ` Ingest secret, shown once: ${applied.ingest_secret}` : ""),
              );
            })
          }
        >
          Apply
        </button>
        <button
          type="button"
          disabled={!graph || !saved}
          onClick={() =>
            run(async () => {
              if (!graph || !saved) return;
              const r = await api.automationGraphs.getRevision(graph.id, saved.revision);
              download(`${graph.name}-r${r.revision}.json`, { document: r.document, layout: r.layout });
            })
          }
        >
          Export JSON
        </button>
        <label class="file-button">
          Import JSON
          <input
            type="file"
            accept="application/json,.json"
            onChange={async (e) => {
              const file = e.currentTarget.files?.[0];
              e.currentTarget.value = "";
              if (!file) return;
              await run(async () => {
                const parsed = JSON.parse(await file.text()) as { document?: GraphDoc; layout?: Layout };
                if (!parsed.document || !Array.isArray(parsed.document.nodes)) throw new Error("The file is not an exported graph: it has no document with nodes.");
                setDoc(parsed.document);
                setLayout(parsed.layout ?? { positions: {} });
                setSelected(null);
                setPlan(null);
                setNotice("Imported: Save to keep it.");
              });
            }}
          />
        </label>
      </div>
      <div role="status" aria-live="polite">
        {notice && <p class="notice">{notice}</p>}
      </div>
      {error !== null && <ErrorBox error={error} />}
      {plan && <PlanSummary plan={plan} select={setSelected} />}
      <div class="builder-body">
        <Canvas
          doc={doc}
          layout={layout}
          selected={selected}
          problems={problems}
          select={setSelected}
          move={(id, to) => setLayout(moveNode(layout, id, to))}
          connect={(from, to) => setDoc(connect(doc, from, to))}
          removeNode={deleteNode}
          removeEdge={(i) => {
            setDoc(removeEdge(doc, i));
            setSelected(null);
          }}
        />
        {node ? (
          <NodeInspector
            key={node.id}
            node={node}
            doc={doc}
            deployments={deploymentList}
            toolSources={toolSources.state === "ready" ? toolSources.value.filter((t) => t.status === "active") : []}
            memoryStores={memoryStores.state === "ready" ? memoryStores.value : []}
            graph={graph && saved ? { id: graph.id, revision: saved.revision, dirty: canonical(doc) !== canonical(saved.document) } : null}
            change={(n) => {
              const next = updateNode(doc, layout, node.id, n);
              setDoc(next.doc);
              setLayout(next.layout);
              if (n.id !== node.id) setSelected({ node: n.id });
            }}
            connect={(to, kind) => setDoc(connect(doc, node.id, to, kind))}
            remove={() => deleteNode(node.id)}
            test={
              <TestBlock
                graphId={graph?.id ?? null}
                revision={saved?.revision ?? null}
                dirty={dirty}
                node={node.id}
                sampleEvent={layout.sample_event}
                sampleOutput={layout.sample_output ?? ""}
                setSamples={(event, output) => setLayout({ ...layout, sample_event: event, sample_output: output || undefined })}
                principalId={props.me.principal.id}
              />
            }
          />
        ) : edge && selected && "edge" in selected ? (
          <EdgeInspector
            key={selected.edge}
            edge={edge}
            index={selected.edge}
            problems={problems.edges.get(selected.edge)}
            kind={(k) => setDoc(setEdgeKind(doc, selected.edge, k))}
            remove={() => {
              setDoc(removeEdge(doc, selected.edge));
              setSelected(null);
            }}
          />
        ) : (
          <section class="inspector" aria-label="Inspector">
            <p class="hint">
              Add blocks from the toolbar. Select a block or an edge to edit it (click, or Tab to it and press Enter). Drag a block to move it, or use the
              arrow keys; drag from a block's ● onto another to connect them, or use Connect in the inspector. Delete removes what is selected.
            </p>
          </section>
        )}
      </div>
    </section>
  );
}

function EnvironmentField(props: { value: string; change: (v: string) => void }) {
  const env = useEnvironment();
  useEffect(() => {
    if (!props.value && env.current) props.change(env.current);
  }, [env.current, props.value]);
  if (env.environments.state !== "ready") return null;
  return (
    <label class="field">
      <span>Environment</span>
      <select value={props.value} onChange={(e) => props.change(e.currentTarget.value)}>
        {env.environments.value.map((e) => (
          <option key={e.id} value={e.id}>
            {e.name}
          </option>
        ))}
      </select>
    </label>
  );
}

function PlanSummary(props: { plan: Plan; select: (s: Selection) => void }) {
  const p = props.plan;
  const items = [...(p.errors ?? []), ...(p.blockers ?? [])] as { code?: string; detail?: string; node?: string; edge?: { index?: number; from?: string; to?: string | null } }[];
  return (
    <div class={`plan plan-${p.kind}`} aria-label="Plan">
      <p>
        Plan of revision {p.revision}: <Status value={p.kind} />
        {p.plan_sha256 && (
          <>
            {" "}
            digest <code>{p.plan_sha256.slice(0, 16)}…</code>
          </>
        )}
      </p>
      {items.length > 0 && (
        <ul>
          {items.map((e, i) => (
            <li key={i}>
              <strong>{e.code}</strong> {e.detail}{" "}
              {typeof e.edge?.index === "number" ? (
                <button type="button" onClick={() => props.select({ edge: e.edge?.index ?? 0 })}>
                  Show edge {e.edge.from} → {e.edge.to ?? "finish"}
                </button>
              ) : e.node ? (
                <button type="button" onClick={() => props.select({ node: e.node ?? "" })}>
                  Show node {e.node}
                </button>
              ) : null}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

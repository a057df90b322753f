// The graph builder's model: the document as the API stores it (nodes and
// edges, nothing of the canvas), the layout beside it (positions, and the
// samples Test this block uses), and the edits a person makes to them. All
// edits are pure: each returns the next document.

export type NodeDoc = { id: string; kind: string } & Record<string, unknown>;
export type EdgeDoc = { kind: string; from: string; to?: string | null };
export type GraphDoc = {
  name: string;
  environment_id: string;
  service_principal_id: string;
  nodes: NodeDoc[];
  edges: EdgeDoc[];
};
export type Point = { x: number; y: number };
/** The console's part of a revision: where each node sits, and the samples a test renders with. */
export type Layout = { positions?: Record<string, Point>; sample_event?: unknown; sample_output?: string } & Record<string, unknown>;

export const NODE_KINDS = [
  "trigger",
  "step_agent",
  "step_parse_json",
  "decision",
  "step_check",
  "step_connection",
  "step_memory_read",
  "step_memory_write",
  "step_select_history",
  "step_record_history",
  "step_skill_proposal",
  "step_observe_skill_proposal",
  "step_join",
  "outcome",
  "step_approval",
  "step_wait",
] as const;
export type NodeKind = (typeof NODE_KINDS)[number];
export const NODE_LABELS: Record<NodeKind, string> = {
  trigger: "Trigger",
  step_agent: "Agent",
  step_parse_json: "Parse JSON",
  decision: "Decision",
  step_check: "Check",
  step_connection: "Connection",
  step_memory_read: "Memory read",
  step_memory_write: "Memory write",
  step_select_history: "Select history",
  step_record_history: "Record history",
  step_skill_proposal: "Propose skill",
  step_observe_skill_proposal: "Observe skill",
  step_join: "Join",
  outcome: "Outcome",
  step_approval: "Approval",
  step_wait: "Wait",
};
export const EDGE_KINDS = ["starts", "then", "continue", "otherwise", "uncertain", "error", "output", "reviews"] as const;

/** A Check's answers and the three values a rule reads. */
export const ANSWERS = ["yes", "no", "uncertain"] as const;
export type CheckQuestion = { name: string; question: string };
export type CheckDoc = { modelRoutingProfileId: string; questions: CheckQuestion[]; rule: unknown; instructions?: string; tier?: string };

/** A fresh Check: one question, ruled by itself. */
export function newCheck(): CheckDoc {
  return { modelRoutingProfileId: "", questions: [{ name: "relevant", question: "" }], rule: "relevant" };
}

/** Whether a node may carry `retry`: Agent, Connection, Check and Memory steps, and a Decision on a Check. */
export function retryable(n: NodeDoc): boolean {
  if (n.kind === "decision") return (n["condition"] as { kind?: string } | undefined)?.kind === "check";
  return ["step_agent", "step_connection", "step_check", "step_memory_read", "step_memory_write"].includes(n.kind);
}

/** One argument of a tool's input schema, as its form shows it. */
export type ArgumentField = { name: string; type: string; required: boolean; description: string };

/** The top-level arguments a JSON Schema describes, in its order, required ones marked. */
export function argumentFields(schema: unknown): ArgumentField[] {
  const s = (schema ?? {}) as { properties?: Record<string, { type?: unknown; description?: unknown }>; required?: unknown };
  const required = Array.isArray(s.required) ? s.required.map(String) : [];
  return Object.entries(s.properties ?? {}).map(([name, p]) => ({
    name,
    type: typeof p?.type === "string" ? p.type : "json",
    required: required.includes(name),
    description: typeof p?.description === "string" ? p.description : "",
  }));
}

export const NODE_W = 160;
export const NODE_H = 52;

function freshId(doc: GraphDoc, kind: string): string {
  const stem = kind.replace(/^step_/, "");
  for (let n = 1; ; n++) {
    const id = `${stem}${n}`;
    if (!doc.nodes.some((x) => x.id === id)) return id;
  }
}

function defaults(kind: NodeKind): Record<string, unknown> {
  switch (kind) {
    case "trigger":
      return { trigger: { kind: "webhook", dedupe_key: "/id" } };
    case "step_agent":
      return { agent: "", prompt: "", includeEvent: false };
    case "step_parse_json":
      return { inputBindings: { content: { sourceNodeId: "", pointer: "" } }, outputSchema: { type: "object" } };
    case "decision":
      return { condition: { kind: "predicates", predicates: [{ kind: "equals", pointer: "/", value: true }] } };
    case "step_check":
      return { check: newCheck() };
    case "step_connection":
      return { toolSource: "", tool: "", arguments: {} };
    case "step_memory_read":
      return { memoryStore: "", path: "/" };
    case "step_memory_write":
      return { memoryStore: "", path: "/", inputBindings: { content: { sourceNodeId: "", pointer: "" } }, expectedSha256: null };
    case "step_select_history":
      return { frontier: "processed", limit: 20 };
    case "step_record_history":
      return { selection: "", requires: [] };
    case "step_skill_proposal":
      return { selection: "", inputBindings: { content: { sourceNodeId: "", pointer: "" } } };
    case "step_observe_skill_proposal":
      return { proposal: "" };
    case "step_join":
      return { mode: "all_completed", collect: {} };
    case "outcome":
      return { rubric: "", maxIterations: 3 };
    case "step_approval":
      return { title: "Go ahead?", ttlSeconds: 3600 };
    case "step_wait":
      return { durationSeconds: 60 };
  }
}

/** Adds a node of `kind` at `at` (else right of the rightmost); answers the next document, layout and the new id. */
export function addNode(doc: GraphDoc, layout: Layout, kind: NodeKind, at?: Point): { doc: GraphDoc; layout: Layout; id: string } {
  const id = freshId(doc, kind);
  const positions = { ...(layout.positions ?? {}) };
  const xs = Object.values(positions).map((p) => p.x);
  positions[id] = at ?? { x: xs.length ? Math.max(...xs) + NODE_W + 40 : 24, y: 40 + (doc.nodes.length % 3) * 90 };
  return { doc: { ...doc, nodes: [...doc.nodes, { id, kind, ...defaults(kind) }] }, layout: { ...layout, positions }, id };
}

/** Replaces node `id` with `next` (which may carry a new id: edges, bindings and positions follow it). */
export function updateNode(doc: GraphDoc, layout: Layout, id: string, next: NodeDoc): { doc: GraphDoc; layout: Layout } {
  const renamed = next.id !== id;
  const rename = (s: string | null | undefined) => (renamed && s === id ? next.id : s);
  const nodes = doc.nodes.map((n) => (n.id === id ? next : renamed ? renameBindings(n, id, next.id) : n));
  const edges = renamed ? doc.edges.map((e) => ({ ...e, from: rename(e.from) ?? "", to: e.to === undefined ? e.to : rename(e.to) })) : doc.edges;
  let positions = layout.positions ?? {};
  if (renamed && positions[id]) {
    const { [id]: at, ...rest } = positions;
    positions = { ...rest, [next.id]: at as Point };
  }
  return { doc: { ...doc, nodes, edges }, layout: { ...layout, positions } };
}

type BindingDoc = { sourceNodeId?: string; pointer?: string };

/** A node's references to node `from` made to `to`: bindings, argument bindings, forEach items, a join's collected nodes and a check_result's source. */
function renameBindings(n: NodeDoc, from: string, to: string): NodeDoc {
  const follow = (b: BindingDoc) => (b.sourceNodeId === from ? { ...b, sourceNodeId: to } : b);
  const each = (m: unknown) => (m ? Object.fromEntries(Object.entries(m as Record<string, BindingDoc>).map(([k, v]) => [k, follow(v)])) : m);
  const next: NodeDoc = { ...n };
  if (n["inputBindings"]) next["inputBindings"] = each(n["inputBindings"]);
  if (n["argumentBindings"]) next["argumentBindings"] = each(n["argumentBindings"]);
  const forEach = n["forEach"] as { items?: BindingDoc } | undefined;
  if (forEach?.items) next["forEach"] = { ...forEach, items: follow(forEach.items) };
  const collect = n["collect"] as Record<string, string> | undefined;
  if (collect) next["collect"] = Object.fromEntries(Object.entries(collect).map(([k, v]) => [k, v === from ? to : v]));
  const condition = n["condition"] as { kind?: string; sourceNodeId?: string } | undefined;
  if (condition?.kind === "check_result" && condition.sourceNodeId === from) next["condition"] = { ...condition, sourceNodeId: to };
  return next;
}

export function removeNode(doc: GraphDoc, layout: Layout, id: string): { doc: GraphDoc; layout: Layout } {
  const { [id]: _gone, ...positions } = layout.positions ?? {};
  return {
    doc: { ...doc, nodes: doc.nodes.filter((n) => n.id !== id), edges: doc.edges.filter((e) => e.from !== id && e.to !== id) },
    layout: { ...layout, positions },
  };
}

/** The kind a new edge from `from` most likely is: into an outcome it reviews, a trigger starts, a Decision's first arm continues and its second is otherwise, else then. */
export function likelyEdgeKind(doc: GraphDoc, from: string, to?: string | null): string {
  if (to && doc.nodes.find((n) => n.id === to)?.kind === "outcome") return "reviews";
  const source = doc.nodes.find((n) => n.id === from);
  if (source?.kind === "trigger") return "starts";
  if (source?.kind === "decision") return doc.edges.some((e) => e.from === from && e.kind === "continue") ? "otherwise" : "continue";
  return "then";
}

/** Connects `from` to `to` (null: a Decision arm that finishes); the same edge twice is one edge. */
export function connect(doc: GraphDoc, from: string, to: string | null, kind = likelyEdgeKind(doc, from, to)): GraphDoc {
  if (to === from) return doc;
  if (doc.edges.some((e) => e.from === from && (e.to ?? null) === to && e.kind === kind)) return doc;
  return { ...doc, edges: [...doc.edges, { kind, from, to }] };
}

export function removeEdge(doc: GraphDoc, index: number): GraphDoc {
  return { ...doc, edges: doc.edges.filter((_, i) => i !== index) };
}

export function setEdgeKind(doc: GraphDoc, index: number, kind: string): GraphDoc {
  return { ...doc, edges: doc.edges.map((e, i) => (i === index ? { ...e, kind } : e)) };
}

export function moveNode(layout: Layout, id: string, to: Point): Layout {
  return { ...layout, positions: { ...(layout.positions ?? {}), [id]: { x: Math.max(0, Math.round(to.x)), y: Math.max(0, Math.round(to.y)) } } };
}

export function position(layout: Layout, doc: GraphDoc, id: string): Point {
  const at = layout.positions?.[id];
  if (at) return at;
  const i = doc.nodes.findIndex((n) => n.id === id);
  return { x: 24 + i * (NODE_W + 40), y: 40 };
}

// Predicate values carry their JSON type: `false` and `"false"` differ.
export const VALUE_TYPES = ["string", "number", "boolean", "json"] as const;
export type ValueType = (typeof VALUE_TYPES)[number];

export function valueType(v: unknown): ValueType {
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "number") return "number";
  if (typeof v === "string") return "string";
  return "json";
}

/** The text a person edits for a value of this type. */
export function valueText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The value `text` means as `type`, or an error saying why it is not one. */
export function typedValue(text: string, type: ValueType): { value: unknown } | { error: string } {
  switch (type) {
    case "string":
      return { value: text };
    case "boolean":
      return text === "true" ? { value: true } : text === "false" ? { value: false } : { error: "a boolean is true or false" };
    case "number": {
      const n = Number(text);
      return text.trim() !== "" && Number.isFinite(n) ? { value: n } : { error: "not a number" };
    }
    case "json":
      try {
        return { value: JSON.parse(text) as unknown };
      } catch {
        return { error: "not JSON" };
      }
  }
}

// A one-time trigger's date: entered as a local date and time with an
// explicit UTC offset, stored as RFC 3339 with that offset, shown as UTC.
const OFFSET = /^[+-](0\d|1[0-4]):[0-5]\d$/;

/** `2026-12-24T18:00` and `+02:00` → `2026-12-24T18:00:00+02:00`, or null when either is malformed. */
export function withOffset(local: string, offset: string): string | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(local) || !OFFSET.test(offset)) return null;
  const at = `${local.length === 16 ? `${local}:00` : local}${offset}`;
  return Number.isNaN(Date.parse(at)) ? null : at;
}

/** An RFC 3339 instant as canonical UTC (`…Z`, milliseconds), or null. */
export function canonicalUtc(at: string): string | null {
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** Splits a stored `at` back into the local part and its offset (`Z` reads as `+00:00`). */
export function splitOffset(at: string): { local: string; offset: string } {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(at);
  if (!m) return { local: "", offset: "+00:00" };
  return { local: m[1] ?? "", offset: m[2] === "Z" ? "+00:00" : (m[2] ?? "+00:00") };
}

/** JSON with object keys sorted: the API may answer keys in another order than they were sent. */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_key, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );
}

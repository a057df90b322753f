// The inspector: the fields of the selected node, one form per node kind,
// and the selected edge's kind. Every change goes straight into the
// document (Save makes it a revision); a field that cannot be read yet (bad
// JSON, a date without an offset) says why and keeps the last good value.

import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { triggerWords } from "../pages/automations.js";
import { BindingFields, Choice, Field, JsonField, type Binding } from "./fields.js";
import { ObserveSkillInspector, RecordHistoryInspector, SelectHistoryInspector, SkillProposalInspector } from "./history-fields.js";
import { MemoryInspector, type MemoryStoreView } from "./memory-fields.js";
import { DeliveryScreenFields } from "./screen-fields.js";
import { CheckFields, ConnectionInspector, ForEachFields, JoinInspector, RetryFields, type SavedGraph, type ToolSourceView } from "./step-fields.js";
import {
  EDGE_KINDS,
  NODE_LABELS,
  VALUE_TYPES,
  canonicalUtc,
  likelyEdgeKind,
  newCheck,
  retryable,
  splitOffset,
  typedValue,
  valueText,
  valueType,
  withOffset,
  type CheckDoc,
  type EdgeDoc,
  type GraphDoc,
  type NodeDoc,
  type NodeKind,
  type ValueType,
} from "./model.js";

export type Deployment = { id: string; name: string };

/** An edge's kind, chosen from every kind the graph language has: one control for a new edge and a selected one. */
function EdgeKindField(props: { label: string; value: string; change: (kind: string) => void }) {
  return (
    <Field label={props.label}>
      <select value={props.value} onChange={(e) => props.change(e.currentTarget.value)}>
        {EDGE_KINDS.map((k) => (
          <option key={k} value={k}>
            {k}
          </option>
        ))}
      </select>
    </Field>
  );
}

function TriggerInspector(props: { node: NodeDoc; change: (n: NodeDoc) => void }) {
  const t = (props.node["trigger"] ?? {}) as Record<string, unknown>;
  const set = (next: Record<string, unknown>) => props.change({ ...props.node, trigger: next });
  const kind = String(t["kind"] ?? "webhook");
  const split = splitOffset(String(t["at"] ?? ""));
  const [local, setLocal] = useState(split.local);
  const [offset, setOffset] = useState(split.offset);
  const at = withOffset(local, offset);
  useEffect(() => {
    if (kind === "schedule_once" && at && at !== t["at"]) set({ kind, at });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [at, kind]);
  // The types as typed (a trailing comma included), read into the list.
  const [typesText, setTypesText] = useState(((t["event_types"] as string[] | undefined) ?? []).join(", "));
  return (
    <>
      <Field label="Trigger kind">
        <select
          value={kind}
          onChange={(e) => {
            const k = e.currentTarget.value;
            const fresh: Record<string, Record<string, unknown>> = {
              webhook: { kind: k, dedupe_key: "/id" },
              schedule: { kind: k, cron: "0 9 * * 1", timezone: "UTC" },
              subscription: { kind: k, event_types: [] },
            };
            setTypesText("");
            set(fresh[k] ?? { kind: k, at: at ?? "" });
          }}
        >
          <option value="webhook">webhook (signed events)</option>
          <option value="schedule">schedule (cron)</option>
          <option value="schedule_once">one time</option>
          <option value="subscription">platform events (subscription)</option>
        </select>
      </Field>
      {kind === "subscription" && (
        <>
          <Field label="Event types" hint="Webhook event types, or a family such as memory_store.*, separated by commas (1–20)">
            <input
              value={typesText}
              onInput={(e) => {
                const text = e.currentTarget.value;
                setTypesText(text);
                set({ ...t, event_types: text.split(",").map((s) => s.trim()).filter(Boolean) });
              }}
            />
          </Field>
          <Field label="Only about" hint="A resource or Session id; empty: every one">
            <input
              value={String(t["resource_id"] ?? "")}
              onInput={(e) => {
                const { resource_id: _, ...rest } = t;
                const id = e.currentTarget.value.trim();
                set(id ? { ...rest, resource_id: id } : rest);
              }}
            />
          </Field>
          <p class="canonical" data-trigger-words aria-live="polite">
            Fires {triggerWords(t)}.
          </p>
        </>
      )}
      {kind === "webhook" && (
        <Field label="Dedupe key (JSON Pointer)" hint="Where each event's identity is, such as /id">
          <input value={String(t["dedupe_key"] ?? "")} onInput={(e) => set({ ...t, dedupe_key: e.currentTarget.value })} />
        </Field>
      )}
      {kind === "schedule" && (
        <>
          <Field label="Cron" hint="5 fields, or 6 with leading seconds">
            <input value={String(t["cron"] ?? "")} onInput={(e) => set({ ...t, cron: e.currentTarget.value })} />
          </Field>
          <Field label="Time zone (IANA)">
            <input value={String(t["timezone"] ?? "")} onInput={(e) => set({ ...t, timezone: e.currentTarget.value })} />
          </Field>
        </>
      )}
      {kind === "schedule_once" && (
        <>
          <Field label="Date and time">
            <input type="datetime-local" value={local} onInput={(e) => setLocal(e.currentTarget.value)} />
          </Field>
          <Field label="UTC offset" hint="Explicit, such as +02:00 or -05:00">
            <input value={offset} onInput={(e) => setOffset(e.currentTarget.value.trim())} aria-invalid={!at} />
          </Field>
          <p class="canonical" aria-live="polite">
            {at ? (
              <>
                Fires at <strong data-utc>{canonicalUtc(at)}</strong> (UTC)
              </>
            ) : (
              <span class="field-error">Enter a date, a time and an offset like +02:00.</span>
            )}
          </p>
        </>
      )}
    </>
  );
}

function AgentInspector(props: { node: NodeDoc; deployments: Deployment[]; change: (n: NodeDoc) => void; children?: ComponentChildren }) {
  const n = props.node;
  return (
    <>
      <Choice
        label="Agent deployment"
        value={String(n["agent"] ?? "")}
        options={props.deployments.map((d) => [d.id, `${d.name} (${d.id})`] as [string, string])}
        change={(agent) => props.change({ ...n, agent })}
      />
      <Field label="Prompt" hint="{{event}} and {{event.a.b}} read the incoming event">
        <textarea rows={4} value={String(n["prompt"] ?? "")} onInput={(e) => props.change({ ...n, prompt: e.currentTarget.value })} />
      </Field>
      <label class="check">
        <input type="checkbox" checked={n["includeEvent"] === true} onChange={(e) => props.change({ ...n, includeEvent: e.currentTarget.checked })} /> Include
        incoming event
      </label>
      {props.children}
    </>
  );
}

function ParseJsonInspector(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const bindings = (n["inputBindings"] ?? {}) as Record<string, Binding>;
  return (
    <>
      <BindingFields
        name="content"
        binding={bindings["content"] ?? {}}
        doc={props.doc}
        self={n.id}
        change={(b) => props.change({ ...n, inputBindings: { ...bindings, content: b } })}
      />
      <JsonField label="Output schema (JSON Schema)" value={n["outputSchema"] ?? {}} change={(v) => props.change({ ...n, outputSchema: v })} />
    </>
  );
}

type Predicate = { kind: string; pointer: string; value: unknown };

function PredicateRow(props: { p: Predicate; index: number; change: (p: Predicate) => void; remove: () => void }) {
  const [type, setType] = useState<ValueType>(valueType(props.p.value));
  const [text, setText] = useState(valueText(props.p.value));
  const parsed = typedValue(text, type);
  const update = (t: string, ty: ValueType) => {
    setText(t);
    setType(ty);
    const v = typedValue(t, ty);
    if ("value" in v) props.change({ ...props.p, value: v.value });
  };
  const n = props.index + 1;
  return (
    <fieldset class="predicate">
      <legend>Predicate {n}</legend>
      <Field label="Test">
        <select value={props.p.kind} onChange={(e) => props.change({ ...props.p, kind: e.currentTarget.value })}>
          <option value="equals">equals</option>
          <option value="contains">contains</option>
        </select>
      </Field>
      <Field label="Pointer">
        <input value={props.p.pointer} onInput={(e) => props.change({ ...props.p, pointer: e.currentTarget.value })} />
      </Field>
      <Field label="Value">
        <input value={text} onInput={(e) => update(e.currentTarget.value, type)} aria-invalid={"error" in parsed} />
      </Field>
      <Field label="Value type" hint='false and 0 are not "false" and "0"'>
        <select value={type} onChange={(e) => update(text, e.currentTarget.value as ValueType)}>
          {VALUE_TYPES.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </Field>
      {"error" in parsed && (
        <span class="field-error" role="alert">
          {parsed.error}
        </span>
      )}
      <button type="button" onClick={props.remove}>
        Remove predicate {n}
      </button>
    </fieldset>
  );
}

type Condition = { kind: string; predicates?: Predicate[]; check?: CheckDoc; sourceNodeId?: string; rule?: unknown };

/** The arms a Decision of this condition must have; each missing one can be made to finish the program. */
function armsOf(kind: string): string[] {
  return kind === "predicates" ? ["otherwise"] : ["otherwise", "uncertain", "error"];
}

function DecisionInspector(props: { node: NodeDoc; doc: GraphDoc; graph: SavedGraph; change: (n: NodeDoc) => void; finish: (arm: string) => void }) {
  const n = props.node;
  const bindings = (n["inputBindings"] ?? {}) as Record<string, Binding>;
  const condition = (n["condition"] ?? { kind: "predicates", predicates: [] }) as Condition;
  const predicates = condition.predicates ?? [];
  const setPredicates = (next: Predicate[]) => props.change({ ...n, condition: { ...condition, predicates: next } });
  const [newBinding, setNewBinding] = useState("");
  const arms = props.doc.edges.filter((e) => e.from === n.id).map((e) => e.kind);
  const setKind = (kind: string) => {
    const next: Condition =
      kind === "check" ? { kind, check: newCheck() } : kind === "check_result" ? { kind, sourceNodeId: "", rule: "" } : { kind, predicates: [] };
    const { retry: _retry, ...rest } = n;
    props.change({ ...rest, condition: next });
  };
  const kindField = (
    <Field label="Decides on">
      <select value={condition.kind} onChange={(e) => setKind(e.currentTarget.value)}>
        <option value="predicates">predicates over its input</option>
        <option value="check">a Check (a model's judgment)</option>
        <option value="check_result">an earlier Check's saved answers</option>
      </select>
    </Field>
  );
  const finishers = armsOf(condition.kind)
    .filter((arm) => !arms.includes(arm))
    .map((arm) => (
      <button key={arm} type="button" onClick={() => props.finish(arm)}>
        {arm[0]?.toUpperCase()}
        {arm.slice(1)}: finish
      </button>
    ));
  if (condition.kind === "check_result") {
    return (
      <>
        {kindField}
        <p class="hint">Rules anew on a Check's saved answers, without calling a model: continue, otherwise, uncertain or error.</p>
        <Choice
          label="Check node"
          value={condition.sourceNodeId ?? ""}
          options={props.doc.nodes
            .filter((x) => x.kind === "step_check" || (x.kind === "decision" && (x["condition"] as Condition | undefined)?.kind === "check"))
            .map((x) => x.id)}
          change={(sourceNodeId) => props.change({ ...n, condition: { ...condition, sourceNodeId } })}
        />
        <JsonField key={`rule-${n.id}`} label="Rule" value={condition.rule ?? ""} rows={3} change={(rule) => props.change({ ...n, condition: { ...condition, rule } })} />
        {finishers}
      </>
    );
  }
  if (condition.kind === "check") {
    return (
      <>
        {kindField}
        <p class="hint">Asks the Check of its input (its bindings, else its output edge's, else the event): continue (yes), otherwise (no), uncertain, or error.</p>
        <CheckFields node={n.id} check={condition.check ?? newCheck()} graph={props.graph} change={(check) => props.change({ ...n, condition: { ...condition, check } })} />
        {finishers}
      </>
    );
  }
  return (
    <>
      {kindField}
      <p class="hint">Continues when every predicate holds, else takes “otherwise”. It reads its bindings, else the output of its output edge.</p>
      {Object.entries(bindings).map(([name, b]) => (
        <div key={name}>
          <BindingFields name={name} binding={b} doc={props.doc} self={n.id} change={(nb) => props.change({ ...n, inputBindings: { ...bindings, [name]: nb } })} />
          <button
            type="button"
            onClick={() => {
              const { [name]: _gone, ...rest } = bindings;
              props.change({ ...n, inputBindings: Object.keys(rest).length ? rest : undefined });
            }}
          >
            Remove binding {name}
          </button>
        </div>
      ))}
      <div class="row">
        <Field label="New binding name">
          <input value={newBinding} onInput={(e) => setNewBinding(e.currentTarget.value.trim())} />
        </Field>
        <button
          type="button"
          disabled={!newBinding}
          onClick={() => {
            props.change({ ...n, inputBindings: { ...bindings, [newBinding]: { sourceNodeId: "", pointer: "" } } });
            setNewBinding("");
          }}
        >
          Add binding
        </button>
      </div>
      {predicates.map((p, i) => (
        <PredicateRow
          key={`${n.id}-${i}-${predicates.length}`}
          p={p}
          index={i}
          change={(np) => setPredicates(predicates.map((x, j) => (j === i ? np : x)))}
          remove={() => setPredicates(predicates.filter((_, j) => j !== i))}
        />
      ))}
      <button type="button" onClick={() => setPredicates([...predicates, { kind: "equals", pointer: "/", value: "" }])}>
        Add predicate
      </button>{" "}
      {finishers}
    </>
  );
}

/** The selected node's inspector: its id, its kind's fields, and a way to connect it without a mouse. */
export function NodeInspector(props: {
  node: NodeDoc;
  doc: GraphDoc;
  deployments: Deployment[];
  toolSources: ToolSourceView[];
  memoryStores: MemoryStoreView[];
  /** The saved revision, for trying a Check's rule offline. */
  graph: SavedGraph;
  change: (n: NodeDoc) => void;
  connect: (to: string | null, kind: string) => void;
  remove: () => void;
  test?: ComponentChildren;
}) {
  const n = props.node;
  const [id, setId] = useState(n.id);
  useEffect(() => setId(n.id), [n.id]);
  const others = props.doc.nodes.filter((x) => x.id !== n.id);
  const [target, setTarget] = useState("");
  // The kind a person chose for the next edge; until then, the likely one
  // for the node and target picked.
  const [chosenKind, setEdgeKind] = useState<string | null>(null);
  const edgeKind = chosenKind ?? likelyEdgeKind(props.doc, n.id, target);
  let body: ComponentChildren = null;
  if (n.kind === "trigger") body = <TriggerInspector key={n.id} node={n} change={props.change} />;
  else if (n.kind === "step_agent")
    body = (
      <AgentInspector node={n} deployments={props.deployments} change={props.change}>
        <ForEachFields node={n} doc={props.doc} change={props.change} />
        <DeliveryScreenFields node={n} change={props.change} />
        {props.test}
      </AgentInspector>
    );
  else if (n.kind === "step_parse_json") body = <ParseJsonInspector key={n.id} node={n} doc={props.doc} change={props.change} />;
  else if (n.kind === "decision")
    body = <DecisionInspector key={n.id} node={n} doc={props.doc} graph={props.graph} change={props.change} finish={(arm) => props.connect(null, arm)} />;
  else if (n.kind === "step_check")
    body = (
      <>
        <p class="hint">Asks the Check and completes with its answers and verdict, whatever the verdict; a Decision on its saved answers routes by them.</p>
        <CheckFields node={n.id} check={(n["check"] ?? newCheck()) as CheckDoc} graph={props.graph} change={(check) => props.change({ ...n, check })} />
      </>
    );
  else if (n.kind === "step_connection") body = <ConnectionInspector key={n.id} node={n} doc={props.doc} toolSources={props.toolSources} change={props.change} />;
  else if (n.kind === "step_memory_read" || n.kind === "step_memory_write")
    body = <MemoryInspector key={n.id} node={n} doc={props.doc} stores={props.memoryStores} change={props.change} />;
  else if (n.kind === "step_select_history") body = <SelectHistoryInspector key={n.id} node={n} change={props.change} />;
  else if (n.kind === "step_record_history") body = <RecordHistoryInspector key={n.id} node={n} doc={props.doc} change={props.change} />;
  else if (n.kind === "step_skill_proposal") body = <SkillProposalInspector key={n.id} node={n} doc={props.doc} change={props.change} />;
  else if (n.kind === "step_observe_skill_proposal") body = <ObserveSkillInspector key={n.id} node={n} doc={props.doc} change={props.change} />;
  else if (n.kind === "step_join") body = <JoinInspector key={n.id} node={n} doc={props.doc} change={props.change} />;
  else if (n.kind === "outcome")
    body = (
      <>
        <p class="hint">Connect an Agent block to it (a reviews edge): that block's child works until the grader is satisfied or the iterations run out.</p>
        <Field label="Rubric" hint="What done means, for the grader only">
          <textarea rows={4} value={String(n["rubric"] ?? "")} onInput={(e) => props.change({ ...n, rubric: e.currentTarget.value })} />
        </Field>
        <Field label="Most iterations" hint="1 to 20 graded Runs">
          <input type="number" min={1} max={20} value={Number(n["maxIterations"] ?? 3)} onInput={(e) => props.change({ ...n, maxIterations: Number(e.currentTarget.value) })} />
        </Field>
        <JsonField
          label="Criteria (JSON, optional)"
          value={n["criteria"] ?? []}
          rows={3}
          change={(v) => props.change({ ...n, criteria: Array.isArray(v) && v.length ? v : undefined })}
        />
      </>
    );
  else if (n.kind === "step_approval")
    body = (
      <>
        <Field label="Title">
          <input value={String(n["title"] ?? "")} onInput={(e) => props.change({ ...n, title: e.currentTarget.value })} />
        </Field>
        <Field label="Expires after (seconds)" hint="60 to 86,400">
          <input type="number" min={60} max={86400} value={Number(n["ttlSeconds"] ?? 3600)} onInput={(e) => props.change({ ...n, ttlSeconds: Number(e.currentTarget.value) })} />
        </Field>
      </>
    );
  else if (n.kind === "step_wait")
    body = (
      <Field label="Wait (seconds)" hint="1 to 2,592,000 (30 days)">
        <input type="number" min={1} value={Number(n["durationSeconds"] ?? 60)} onInput={(e) => props.change({ ...n, durationSeconds: Number(e.currentTarget.value) })} />
      </Field>
    );
  return (
    <section class="inspector" aria-label={`Inspector: ${n.id}`}>
      <h2>
        {NODE_LABELS[n.kind as NodeKind] ?? n.kind} <code>{n.id}</code>
      </h2>
      <form
        class="row"
        aria-label="Rename node"
        onSubmit={(e) => {
          e.preventDefault();
          if (id && id !== n.id && !props.doc.nodes.some((x) => x.id === id)) props.change({ ...n, id });
        }}
      >
        <Field label="Node id">
          <input value={id} onInput={(e) => setId(e.currentTarget.value.trim())} />
        </Field>
        <button type="submit" disabled={!id || id === n.id}>
          Rename
        </button>
      </form>
      {body}
      {retryable(n) && <RetryFields node={n} change={props.change} />}
      <form
        class="row connect"
        aria-label="Connect"
        onSubmit={(e) => {
          e.preventDefault();
          if (target) props.connect(target, edgeKind);
          setEdgeKind(null);
          setTarget("");
        }}
      >
        <Field label="Connect to">
          <select
            value={target}
            onChange={(e) => {
              setTarget(e.currentTarget.value);
              setEdgeKind(null);
            }}
          >
            <option value="">choose a node…</option>
            {others.map((x) => (
              <option key={x.id} value={x.id}>
                {x.id}
              </option>
            ))}
          </select>
        </Field>
        <EdgeKindField label="As" value={edgeKind} change={setEdgeKind} />
        <button type="submit" disabled={!target}>
          Add edge
        </button>
      </form>
      <button type="button" class="danger" onClick={props.remove}>
        Delete node {n.id}
      </button>
    </section>
  );
}

export function EdgeInspector(props: { edge: EdgeDoc; index: number; problems: string[] | undefined; kind: (k: string) => void; remove: () => void }) {
  const e = props.edge;
  return (
    <section class="inspector" aria-label="Inspector: edge">
      <h2>
        Edge {e.from} → {e.to ?? "finish"}
      </h2>
      {props.problems && (
        <p class="field-error" role="alert">
          Plan: {props.problems.join(", ")}
        </p>
      )}
      <EdgeKindField label="Edge kind" value={e.kind} change={props.kind} />
      <button type="button" class="danger" onClick={props.remove}>
        Delete edge
      </button>
    </section>
  );
}

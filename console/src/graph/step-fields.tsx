// The inspector's forms for the executable nodes beyond the first ones: a
// Check's questions and rule (tried offline against the saved revision), a
// Connection step's ToolSource, tool and the argument form its schema
// describes, a join's collected nodes, an Agent's for-each, and retries.

import { useState } from "preact/hooks";
import { api, describe } from "../api.js";
import { BindingFields, Choice, Field, JsonField, type Binding } from "./fields.js";
import { ANSWERS, argumentFields, type ArgumentField, type CheckDoc, type GraphDoc, type NodeDoc } from "./model.js";

/** The saved revision a rule is tried against; `dirty` while the screen differs from it. */
export type SavedGraph = { id: string; revision: number; dirty: boolean } | null;

/** Tries a Check's rule on answers a person picks, against the saved revision: no model is called, nothing is recorded. */
function RuleTester(props: { node: string; questions: string[]; graph: SavedGraph }) {
  const [answers, setAnswers] = useState<Record<string, string>>({});
  const [result, setResult] = useState<string | null>(null);
  const g = props.graph;
  const ready = g !== null && !g.dirty;
  return (
    <fieldset class="rule-test">
      <legend>Test rule offline</legend>
      {props.questions.map((q) => (
        <Field key={q} label={`Answer to ${q}`}>
          <select value={answers[q] ?? "yes"} onChange={(e) => setAnswers({ ...answers, [q]: e.currentTarget.value })}>
            {ANSWERS.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
        </Field>
      ))}
      <button
        type="button"
        disabled={!ready}
        onClick={async () => {
          if (!g) return;
          const picked = Object.fromEntries(props.questions.map((q) => [q, answers[q] ?? "yes"]));
          try {
            const r = await api.automationGraphs.testRule(g.id, g.revision, { node: props.node, answers: picked });
            setResult(`Verdict ${r.verdict}: takes ${r.branch}`);
          } catch (e) {
            setResult(`Refused: ${describe(e).message}`);
          }
        }}
      >
        Test rule offline
      </button>
      {!ready && <span class="hint">Save the graph to try its rule (the saved revision is what is tried).</span>}
      {result && (
        <p class="canonical" role="status">
          {result}
        </p>
      )}
    </fieldset>
  );
}

/** A Check: its routing profile, 1–16 named questions, the rule (a name, or not/all/any of rules), optional instructions. */
export function CheckFields(props: { node: string; check: CheckDoc; change: (c: CheckDoc) => void; graph: SavedGraph }) {
  const c = props.check;
  const setQuestion = (i: number, q: { name: string; question: string }) => props.change({ ...c, questions: c.questions.map((x, j) => (j === i ? q : x)) });
  return (
    <>
      <Field label="Routing profile" hint="mrp_… of a profile qualified for decision">
        <input value={c.modelRoutingProfileId} onInput={(e) => props.change({ ...c, modelRoutingProfileId: e.currentTarget.value.trim() })} />
      </Field>
      {c.questions.map((q, i) => (
        <fieldset key={i} class="predicate">
          <legend>Question {i + 1}</legend>
          <Field label={`Question ${i + 1} name`} hint="lowercase letters, digits and _">
            <input value={q.name} onInput={(e) => setQuestion(i, { ...q, name: e.currentTarget.value.trim() })} />
          </Field>
          <Field label={`Question ${i + 1} text`}>
            <textarea rows={2} value={q.question} onInput={(e) => setQuestion(i, { ...q, question: e.currentTarget.value })} />
          </Field>
          <button type="button" disabled={c.questions.length === 1} onClick={() => props.change({ ...c, questions: c.questions.filter((_, j) => j !== i) })}>
            Remove question {i + 1}
          </button>
        </fieldset>
      ))}
      <button type="button" disabled={c.questions.length >= 16} onClick={() => props.change({ ...c, questions: [...c.questions, { name: `q${c.questions.length + 1}`, question: "" }] })}>
        Add question
      </button>
      <JsonField
        key={`rule-${props.node}`}
        label="Rule"
        value={c.rule}
        rows={3}
        change={(rule) => props.change({ ...c, rule })}
      />
      <Field label="Instructions" hint="Optional: how the evaluator should read the input">
        <textarea rows={2} value={c.instructions ?? ""} onInput={(e) => props.change({ ...c, instructions: e.currentTarget.value || undefined })} />
      </Field>
      <RuleTester node={props.node} questions={c.questions.map((q) => q.name)} graph={props.graph} />
    </>
  );
}

export type ToolSourceView = { id: string; name: string; tools: { name: string; offered: boolean; input_schema: Record<string, unknown> }[] };

/** One argument: a typed value written here, or bound to what a node produced. */
function ArgumentRow(props: { f: ArgumentField; value: unknown; binding: Binding | undefined; doc: GraphDoc; self: string; set: (v: unknown) => void; bind: (b: Binding | undefined) => void }) {
  const { f } = props;
  const label = `${f.name}${f.required ? " (required)" : ""}`;
  const bound = props.binding !== undefined;
  return (
    <fieldset class="predicate">
      <legend>{label}</legend>
      <Field label={`${f.name}: source`} hint={f.description || undefined}>
        <select value={bound ? "bound" : "value"} onChange={(e) => props.bind(e.currentTarget.value === "bound" ? { sourceNodeId: "", pointer: "" } : undefined)}>
          <option value="value">written here</option>
          <option value="bound">bound to a node's output or the event</option>
        </select>
      </Field>
      {bound ? (
        <BindingFields name={f.name} binding={props.binding ?? {}} doc={props.doc} self={props.self} change={props.bind} />
      ) : f.type === "boolean" ? (
        <Field label={`${f.name} (boolean)`}>
          <select value={props.value === true ? "true" : props.value === false ? "false" : ""} onChange={(e) => props.set(e.currentTarget.value === "" ? undefined : e.currentTarget.value === "true")}>
            <option value="">unset</option>
            <option value="true">true</option>
            <option value="false">false</option>
          </select>
        </Field>
      ) : f.type === "integer" || f.type === "number" ? (
        <Field label={`${f.name} (${f.type})`}>
          <input
            type="number"
            step={f.type === "integer" ? 1 : "any"}
            value={typeof props.value === "number" ? props.value : ""}
            onInput={(e) => props.set(e.currentTarget.value === "" ? undefined : Number(e.currentTarget.value))}
          />
        </Field>
      ) : f.type === "string" ? (
        <Field label={`${f.name} (string)`}>
          <input value={typeof props.value === "string" ? props.value : ""} onInput={(e) => props.set(e.currentTarget.value)} />
        </Field>
      ) : (
        <JsonField label={`${f.name} (JSON)`} value={props.value ?? null} rows={2} change={props.set} />
      )}
    </fieldset>
  );
}

/** A Connection step: a ToolSource of the Environment, one of its offered tools, and the form of that tool's arguments. */
export function ConnectionInspector(props: { node: NodeDoc; doc: GraphDoc; toolSources: ToolSourceView[]; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const chosen = props.toolSources.find((t) => t.id === n["toolSource"] || t.name === n["toolSource"]);
  const tool = chosen?.tools.find((t) => t.name === n["tool"]);
  const args = (n["arguments"] ?? {}) as Record<string, unknown>;
  const bindings = (n["argumentBindings"] ?? {}) as Record<string, Binding>;
  const setArg = (name: string, v: unknown) => {
    const { [name]: _old, ...rest } = args;
    props.change({ ...n, arguments: v === undefined ? rest : { ...rest, [name]: v } });
  };
  const bind = (name: string, b: Binding | undefined) => {
    const { [name]: _old, ...rest } = bindings;
    const next = b ? { ...rest, [name]: b } : rest;
    const { [name]: _written, ...written } = args;
    props.change({ ...n, arguments: b ? written : args, argumentBindings: Object.keys(next).length ? next : undefined });
  };
  return (
    <>
      <Choice
        label="Tool source"
        value={chosen?.id ?? ""}
        options={props.toolSources.map((t) => [t.id, `${t.name} (${t.id})`] as [string, string])}
        change={(toolSource) => props.change({ ...n, toolSource, tool: "", arguments: {}, argumentBindings: undefined })}
      />
      <Choice
        label="Tool to call"
        hint="Only tools offered now"
        value={String(n["tool"] ?? "")}
        options={(chosen?.tools ?? []).filter((t) => t.offered).map((t) => t.name)}
        change={(tool) => props.change({ ...n, tool, arguments: {}, argumentBindings: undefined })}
      />
      {tool &&
        argumentFields(tool.input_schema).map((f) => (
          <ArgumentRow
            key={`${tool.name}-${f.name}`}
            f={f}
            value={args[f.name]}
            binding={bindings[f.name]}
            doc={props.doc}
            self={n.id}
            set={(v) => setArg(f.name, v)}
            bind={(b) => bind(f.name, b)}
          />
        ))}
      <p class="hint">Runs as the graph's service principal: it needs use_connection, and a policy or a person's approval for the call.</p>
    </>
  );
}

/** A join: 2–16 names, each collecting one node's output once every collected node completed. */
export function JoinInspector(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const collect = (n["collect"] ?? {}) as Record<string, string>;
  const [name, setName] = useState("");
  const set = (next: Record<string, string>) => props.change({ ...n, collect: next });
  return (
    <>
      <p class="hint">Runs when every collected node completed (connect each to it with a then edge); its output is an object of their outputs by name.</p>
      {Object.entries(collect).map(([k, from]) => (
        <div class="row" key={k}>
          <Choice
            label={`${k}: collects`}
            value={from}
            options={props.doc.nodes.filter((x) => x.id !== n.id && x.kind !== "trigger").map((x) => x.id)}
            change={(v) => set({ ...collect, [k]: v })}
          />
          <button
            type="button"
            onClick={() => {
              const { [k]: _gone, ...rest } = collect;
              set(rest);
            }}
          >
            Remove {k}
          </button>
        </div>
      ))}
      <div class="row">
        <Field label="New collected name">
          <input value={name} onInput={(e) => setName(e.currentTarget.value.trim())} />
        </Field>
        <button
          type="button"
          disabled={!name || name in collect}
          onClick={() => {
            set({ ...collect, [name]: "" });
            setName("");
          }}
        >
          Add collected node
        </button>
      </div>
    </>
  );
}

type ForEachDoc = { items: Binding; maxItems: number; concurrency: number };

/** An Agent step's for-each: one child per item of a bound array, in item order, at most `concurrency` at once. */
export function ForEachFields(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const f = n["forEach"] as ForEachDoc | undefined;
  const set = (next: ForEachDoc | undefined) => props.change({ ...n, forEach: next });
  return (
    <fieldset class="predicate">
      <legend>For each</legend>
      <label class="check">
        <input type="checkbox" checked={f !== undefined} onChange={(e) => set(e.currentTarget.checked ? { items: { sourceNodeId: "", pointer: "" }, maxItems: 10, concurrency: 2 } : undefined)} /> Run once per
        item
      </label>
      {f && (
        <>
          <BindingFields name="items" binding={f.items} doc={props.doc} self={n.id} change={(items) => set({ ...f, items })} />
          <Field label="Most items" hint="1 to 100">
            <input type="number" min={1} max={100} value={f.maxItems} onInput={(e) => set({ ...f, maxItems: Number(e.currentTarget.value) })} />
          </Field>
          <Field label="At once" hint="1 to 16 children unsettled at a time">
            <input type="number" min={1} max={16} value={f.concurrency} onInput={(e) => set({ ...f, concurrency: Number(e.currentTarget.value) })} />
          </Field>
        </>
      )}
    </fieldset>
  );
}

type RetryDoc = { maxAttempts: number; backoffSeconds: number; multiplier?: number };

/** Retries: attempts in all and the backoff between them; only failures that left no effect are tried again. */
export function RetryFields(props: { node: NodeDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const r = n["retry"] as RetryDoc | undefined;
  const set = (next: RetryDoc | undefined) => props.change({ ...n, retry: next });
  return (
    <fieldset class="predicate">
      <legend>Retries</legend>
      <label class="check">
        <input type="checkbox" checked={r !== undefined} onChange={(e) => set(e.currentTarget.checked ? { maxAttempts: 3, backoffSeconds: 10 } : undefined)} /> Retry a
        failure that left no effect
      </label>
      {r && (
        <>
          <Field label="Attempts in all" hint="1 to 5">
            <input type="number" min={1} max={5} value={r.maxAttempts} onInput={(e) => set({ ...r, maxAttempts: Number(e.currentTarget.value) })} />
          </Field>
          <Field label="Backoff (seconds)" hint="1 to 3,600">
            <input type="number" min={1} max={3600} value={r.backoffSeconds} onInput={(e) => set({ ...r, backoffSeconds: Number(e.currentTarget.value) })} />
          </Field>
          <Field label="Multiplier" hint="1 to 4; each wait is backoff × multiplier^(n−1), at most an hour">
            <input type="number" min={1} max={4} step="any" value={r.multiplier ?? 1} onInput={(e) => set({ ...r, multiplier: Number(e.currentTarget.value) })} />
          </Field>
        </>
      )}
    </fieldset>
  );
}

// The inspector's building blocks: a labelled field, a JSON text field
// that keeps its last good value, and a binding (a node and a pointer into
// its output or event).

import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { GraphDoc } from "./model.js";

export function Field(props: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span>{props.label}</span>
      {props.children}
      {props.hint && <span class="hint">{props.hint}</span>}
    </label>
  );
}

/** A text field holding JSON: parsed on every change, the last good value kept while it does not parse. */
export function JsonField(props: { label: string; value: unknown; change: (v: unknown) => void; rows?: number }) {
  const [text, setText] = useState(JSON.stringify(props.value, null, 2));
  const [bad, setBad] = useState<string | null>(null);
  return (
    <Field label={props.label}>
      <textarea
        rows={props.rows ?? 5}
        value={text}
        aria-invalid={bad !== null}
        onInput={(e) => {
          const t = e.currentTarget.value;
          setText(t);
          try {
            props.change(JSON.parse(t) as unknown);
            setBad(null);
          } catch (err) {
            setBad((err as Error).message);
          }
        }}
      />
      {bad && (
        <span class="field-error" role="alert">
          Not JSON yet: {bad}
        </span>
      )}
    </Field>
  );
}

/** A select of `options` (a value, or `[value, label]`) after a "choose…" that stands for none. */
export function Choice(props: { label: string; hint?: string; value: string; options: (string | [string, string])[]; change: (v: string) => void }) {
  return (
    <Field label={props.label} hint={props.hint}>
      <select value={props.value} onChange={(e) => props.change(e.currentTarget.value)}>
        <option value="">choose…</option>
        {props.options.map((o) => {
          const [value, label] = typeof o === "string" ? [o, o] : o;
          return (
            <option key={value} value={value}>
              {label}
            </option>
          );
        })}
      </select>
    </Field>
  );
}

export type Binding = { sourceNodeId?: string; pointer?: string };

export function BindingFields(props: { name: string; binding: Binding; doc: GraphDoc; self: string; change: (b: Binding) => void }) {
  return (
    <div class="binding">
      <Choice
        label={`${props.name}: from node`}
        value={props.binding.sourceNodeId ?? ""}
        options={props.doc.nodes.filter((x) => x.id !== props.self).map((x) => x.id)}
        change={(sourceNodeId) => props.change({ ...props.binding, sourceNodeId })}
      />
      <Field label={`${props.name}: at pointer`} hint='"" is the whole output'>
        <input value={props.binding.pointer ?? ""} onInput={(e) => props.change({ ...props.binding, pointer: e.currentTarget.value })} />
      </Field>
    </div>
  );
}


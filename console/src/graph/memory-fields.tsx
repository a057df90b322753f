// The Memory blocks' inspector: which store and document a read or write
// touches, and — for a write — what it expects to find there. A write is
// always a compare-and-set: it expects the sha an earlier read saw, or that
// the document does not exist yet; the form offers nothing else.

import { BindingFields, Choice, Field, type Binding } from "./fields.js";
import type { GraphDoc, NodeDoc } from "./model.js";

export type MemoryStoreView = { id: string; name: string; review?: string };

export function MemoryInspector(props: { node: NodeDoc; doc: GraphDoc; stores: MemoryStoreView[]; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const write = n.kind === "step_memory_write";
  const bindings = (n["inputBindings"] ?? {}) as Record<string, Binding>;
  const expects = bindings["expectedSha256"] ? "read" : "absent";
  const store = props.stores.find((s) => s.id === n["memoryStore"]);
  return (
    <>
      <Choice
        label="Memory store"
        hint="The graph's service principal needs read on it, and write to write"
        value={String(n["memoryStore"] ?? "")}
        options={props.stores.map((s) => [s.id, `${s.name} (${s.id})`] as [string, string])}
        change={(memoryStore) => props.change({ ...n, memoryStore })}
      />
      <Field label="Document path" hint="Starts with /, e.g. /notes/triage.md">
        <input value={String(n["path"] ?? "")} onInput={(e) => props.change({ ...n, path: e.currentTarget.value })} />
      </Field>
      {!write && (
        <Field label="At version (optional)" hint="Empty reads the store's head">
          <input
            type="number"
            min={1}
            value={n["atVersion"] === undefined ? "" : Number(n["atVersion"])}
            onInput={(e) => {
              const { atVersion: _old, ...rest } = n;
              const v = e.currentTarget.value;
              props.change(v === "" ? (rest as NodeDoc) : { ...n, atVersion: Number(v) });
            }}
          />
        </Field>
      )}
      {write && (
        <>
          <BindingFields
            name="content"
            binding={bindings["content"] ?? {}}
            doc={props.doc}
            self={n.id}
            change={(b) => props.change({ ...n, inputBindings: { ...bindings, content: b } })}
          />
          <Choice
            label="Write only if"
            value={expects}
            options={[
              ["read", "the document still holds what a read saw"],
              ["absent", "the document does not exist yet (create only)"],
            ]}
            change={(v) => {
              const { expectedSha256: _bound, ...rest } = bindings;
              const { expectedSha256: _literal, ...node } = n;
              props.change(
                v === "read"
                  ? { ...(node as NodeDoc), inputBindings: { ...rest, expectedSha256: { sourceNodeId: "", pointer: "/document/content_sha256" } } }
                  : { ...(node as NodeDoc), inputBindings: rest, expectedSha256: null },
              );
            }}
          />
          {expects === "read" && (
            <BindingFields
              name="expected sha"
              binding={bindings["expectedSha256"] ?? {}}
              doc={props.doc}
              self={n.id}
              change={(b) => props.change({ ...n, inputBindings: { ...bindings, expectedSha256: b } })}
            />
          )}
          <p class="hint">
            {store?.review === "proposal"
              ? "This store is reviewed: the write becomes a proposal a person approves."
              : "If the document changed since, the step fails (memory_sha_mismatch) and nothing is overwritten."}
          </p>
        </>
      )}
    </>
  );
}

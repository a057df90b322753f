// Pieces every page uses: links, the loading/empty/error states of a list,
// and the error box that shows the API's `type` and `request_id`.

import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { describe } from "./api.js";
import { BASE, onLink } from "./router.js";

export function Link(props: { to: string; children: ComponentChildren; class?: string; "aria-current"?: "page" | undefined }) {
  return (
    <a href={BASE + props.to} class={props.class} aria-current={props["aria-current"]} onClick={(e) => onLink(e, props.to)}>
      {props.children}
    </a>
  );
}

export function ErrorBox(props: { error: unknown }) {
  const e = describe(props.error);
  return (
    <div class="error" role="alert">
      <strong>{e.type}</strong> {e.message}
      {e.requestId && <div class="request-id">request_id: <code>{e.requestId}</code></div>}
    </div>
  );
}

export type Async<T> = { state: "loading" } | { state: "error"; error: unknown } | { state: "ready"; value: T };

/** Runs `load` now and whenever `deps` change; `reload` runs it again. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): [Async<T>, () => void] {
  const [result, setResult] = useState<Async<T>>({ state: "loading" });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    load().then(
      (value) => mine === generation.current && setResult({ state: "ready", value }),
      (error: unknown) => mine === generation.current && setResult({ state: "error", error }),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    setResult({ state: "loading" });
    run();
  }, [run]);
  return [result, run];
}

/** A list's three other states: loading, error (with type and request id), empty. */
export function ListState<T>(props: { result: Async<T[]>; empty: string; children: (items: T[]) => ComponentChildren }) {
  const r = props.result;
  if (r.state === "loading") return <p class="muted" role="status">Loading…</p>;
  if (r.state === "error") return <ErrorBox error={r.error} />;
  if (r.value.length === 0) return <p class="empty">{props.empty}</p>;
  return <>{props.children(r.value)}</>;
}

export function When(props: { at: string | null | undefined }) {
  if (!props.at) return <span class="muted">—</span>;
  const d = new Date(props.at);
  return <time dateTime={props.at} title={d.toISOString()}>{d.toLocaleString()}</time>;
}

export function Status(props: { value: string }) {
  return <span class={`status status-${props.value.replace(/[^a-z_]/g, "")}`}>{props.value}</span>;
}

/** A button that runs an action once at a time and shows its error. */
export function Action(props: { label: string; run: () => Promise<unknown>; kind?: "primary" | "danger"; confirm?: string; disabled?: boolean }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return (
    <span class="action">
      <button
        type="button"
        class={props.kind}
        disabled={busy || props.disabled}
        onClick={async () => {
          if (props.confirm && !window.confirm(props.confirm)) return;
          setBusy(true);
          setError(null);
          try {
            await props.run();
          } catch (e) {
            setError(e);
          } finally {
            setBusy(false);
          }
        }}
      >
        {props.label}
      </button>
      {error !== null && <ErrorBox error={error} />}
    </span>
  );
}

export function Json(props: { value: unknown; foldAt?: number }) {
  const text = JSON.stringify(props.value, null, 2) ?? "";
  const fold = props.foldAt ?? 600;
  if (text.length <= fold) return <pre class="json">{text}</pre>;
  return (
    <details class="folded">
      <summary>{text.slice(0, 80).replace(/\s+/g, " ")}… ({text.length.toLocaleString()} characters)</summary>
      <pre class="json">{text}</pre>
    </details>
  );
}

export type Column<T> = { title: string; cell: (row: T) => ComponentChildren; hidden?: boolean };

/** A labelled table of `rows`, one column per `columns` entry (a hidden title is read, not shown); wide tables scroll sideways. */
export function Table<T>(props: { label: string; columns: Column<T>[]; rows: T[]; rowKey: (row: T) => string; rowAttrs?: (row: T) => Record<string, string> }) {
  return (
    <div class="table-wrap">
      <table aria-label={props.label}>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c.title} scope="col">
                {c.hidden ? <span class="sr-only">{c.title}</span> : c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr key={props.rowKey(r)} {...(props.rowAttrs?.(r) ?? {})}>
              {props.columns.map((c) => (
                <td key={c.title}>{c.cell(r)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The links between a page's sections, the current one marked. */
export function SubNav(props: { label: string; at: string; sections: { to: string; label: string }[] }) {
  return (
    <nav aria-label={props.label} class="subnav">
      <ul>
        {props.sections.map((s) => (
          <li key={s.to}>
            <Link to={s.to} aria-current={props.at === s.to ? "page" : undefined}>
              {s.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

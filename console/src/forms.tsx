// A small create form every list page shares, and the query-string filters
// a list keeps in its URL so a filtered view can be shared and reloaded.

import { useState } from "preact/hooks";
import { navigate, useLocation } from "./router.js";
import { ErrorBox } from "./ui.js";

export type Field = {
  name: string;
  label: string;
  value?: string;
  /** A choice instead of free text. */
  options?: readonly string[];
  /** Several lines (JSON, instructions). */
  multiline?: boolean;
  optional?: boolean;
  placeholder?: string;
};

/**
 * A labelled form whose `create` gets every field's trimmed text; it resets on success and shows the API's error otherwise.
 * `disabled` holds the submit button until what `create` needs has loaded (the page's Environment), so a quick click
 * cannot send a request the page was not ready to make.
 */
export function CreateForm(props: {
  label: string;
  submit?: string;
  fields: Field[];
  disabled?: boolean;
  create: (v: Record<string, string>) => Promise<unknown>;
}) {
  const [error, setError] = useState<unknown>(null);
  return (
    <form
      class="inline-form"
      aria-label={props.label}
      onSubmit={async (e) => {
        e.preventDefault();
        const form = e.currentTarget;
        const values = Object.fromEntries(
          props.fields.map((f) => [f.name, (form.elements.namedItem(f.name) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement).value.trim()]),
        );
        setError(null);
        try {
          await props.create(values);
          form.reset();
        } catch (err) {
          setError(err);
        }
      }}
    >
      {props.fields.map((f) => (
        <label key={f.name}>
          {f.label}{" "}
          {f.options ? (
            <select name={f.name}>
              {f.options.map((o) => (
                <option key={o} value={o} selected={o === (f.value ?? f.options?.[0])}>
                  {o}
                </option>
              ))}
            </select>
          ) : f.multiline ? (
            <textarea name={f.name} required={!f.optional} defaultValue={f.value ?? ""} placeholder={f.placeholder} rows={4} />
          ) : (
            <input name={f.name} required={!f.optional} defaultValue={f.value ?? ""} placeholder={f.placeholder} />
          )}
        </label>
      ))}
      <button type="submit" class="primary" disabled={props.disabled}>
        {props.submit ?? props.label}
      </button>
      {error !== null && <ErrorBox error={error} />}
    </form>
  );
}

/** The page's filters as the URL's query: `get(name)` and `set(name, value)` (empty removes it). */
export function useFilters(): { get: (name: string) => string; set: (name: string, value: string) => void } {
  const { path, query } = useLocation();
  return {
    get: (name) => query.get(name) ?? "",
    set(name, value) {
      const next = new URLSearchParams(query);
      if (value) next.set(name, value);
      else next.delete(name);
      const q = next.toString();
      navigate(`${path}${q ? `?${q}` : ""}`, true);
    },
  };
}

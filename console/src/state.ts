// A minimal observable value for state shared across pages (the signed-in
// session, the end of it): components subscribe with `useSignal`.

import { useEffect, useState } from "preact/hooks";

export interface Signal<T> {
  get(): T;
  set(value: T): void;
  subscribe(listener: (value: T) => void): () => void;
}

export function signal<T>(initial: T): Signal<T> {
  let value = initial;
  const listeners = new Set<(value: T) => void>();
  return {
    get: () => value,
    set(next) {
      if (Object.is(next, value)) return;
      value = next;
      for (const l of [...listeners]) l(value);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export function useSignal<T>(s: Signal<T>): T {
  const [value, setValue] = useState(s.get());
  useEffect(() => {
    setValue(s.get());
    return s.subscribe(setValue);
  }, [s]);
  return value;
}

// Every page is a URL under /console/ (shareable, reloadable): the path
// picks the page, the query holds its filters.

import { signal, useSignal } from "./state.js";

export const BASE = "/console";

const location$ = signal(currentLocation());

function currentLocation(): { path: string; query: URLSearchParams } {
  const path = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) || "/" : "/";
  return { path, query: new URLSearchParams(window.location.search) };
}

window.addEventListener("popstate", () => location$.set(currentLocation()));

/** Goes to a console path (`/sessions?status=idle`). */
export function navigate(to: string, replace = false): void {
  const url = BASE + to;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  location$.set(currentLocation());
  window.scrollTo(0, 0);
}

export function useLocation(): { path: string; query: URLSearchParams } {
  return useSignal(location$);
}

/** The parts of `path` matched against a pattern like `/sessions/:id`, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/").filter(Boolean);
  const a = path.split("/").filter(Boolean);
  if (p.length !== a.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const want = p[i] ?? "";
    const got = decodeURIComponent(a[i] ?? "");
    if (want.startsWith(":")) params[want.slice(1)] = got;
    else if (want !== got) return null;
  }
  return params;
}

/** An in-console link: a real `<a href>` (open in a new tab works), routed without a reload. */
export function onLink(event: MouseEvent, to: string): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(to);
}

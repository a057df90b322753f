// Lists several pages offer as choices. A choice list is read when its page
// opens (not cached across pages), so a Principal made a moment ago is there.

import { api, type Schema } from "./api.js";
import { useAsync } from "./ui.js";

/** The service Principals the viewer can see: who an Automation or a Runner may run as. Empty until read. */
export function useServicePrincipals(): Schema<"Principal">[] {
  const [principals] = useAsync(() => api.principals.list().all(), []);
  return principals.state === "ready" ? principals.value.filter((p) => p.kind === "service") : [];
}

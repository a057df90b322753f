// The Environment a page works in: `?environment_id=` when the URL names
// one, else the first the viewer can see.

import { api, type Schema } from "./api.js";
import { navigate, useLocation } from "./router.js";
import { useAsync, type Async } from "./ui.js";

export type Environment = Schema<"Environment">;

export function useEnvironment(): { environments: Async<Environment[]>; current: string; choose: (id: string) => void } {
  const { path, query } = useLocation();
  const [environments] = useAsync(() => api.environments.list().all(), []);
  const fromUrl = query.get("environment_id") ?? "";
  const first = environments.state === "ready" ? (environments.value[0]?.id ?? "") : "";
  return {
    environments,
    current: fromUrl || first,
    choose(id) {
      const next = new URLSearchParams(query);
      next.set("environment_id", id);
      navigate(`${path}?${next.toString()}`, true);
    },
  };
}

export function EnvironmentPicker(props: { env: ReturnType<typeof useEnvironment> }) {
  const { environments, current, choose } = props.env;
  if (environments.state !== "ready" || environments.value.length < 2) return null;
  return (
    <label class="picker">
      Environment{" "}
      <select value={current} onChange={(e) => choose(e.currentTarget.value)}>
        {environments.value.map((e) => (
          <option key={e.id} value={e.id}>
            {e.name}
          </option>
        ))}
      </select>
    </label>
  );
}

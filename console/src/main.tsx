// The console: sign-in, then every page under /console/ chosen by its URL.

import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, sessionEnded, type Schema } from "./api.js";
import { match, navigate, useLocation } from "./router.js";
import { useSignal } from "./state.js";
import { ErrorBox, Link } from "./ui.js";
import { SignIn } from "./pages/signin.js";
import { Home } from "./pages/home.js";
import { Sessions } from "./pages/sessions.js";
import { SessionPage } from "./pages/session.js";
import { Approvals } from "./pages/approvals.js";
import { AgentPage, Agents } from "./pages/agents.js";
import { Profiles } from "./pages/profiles.js";
import { Governance, PrincipalPage } from "./pages/governance.js";
import { AutomationPage, Automations, FiringPage } from "./pages/automations.js";
import { SkillProposals } from "./pages/skill-proposals.js";
import { GraphBuilder, Graphs } from "./pages/graphs.js";
import { ApprovalById } from "./pages/approval.js";
import { Reach } from "./pages/reach.js";
import { MemoryStorePage, MemoryStores } from "./pages/memory.js";

export type Me = Schema<"ConsoleSession">;

const PAGES: { to: string; label: string }[] = [
  { to: "/", label: "Home" },
  { to: "/sessions", label: "Sessions" },
  { to: "/approvals", label: "Approvals" },
  { to: "/agents", label: "Agents" },
  { to: "/automations", label: "Automations" },
  { to: "/governance", label: "Governance" },
  { to: "/reach", label: "Reach" },
];

function Page(props: { me: Me }) {
  const { path } = useLocation();
  let params: Record<string, string> | null;
  if (path === "/") return <Home me={props.me} />;
  if (path === "/sessions") return <Sessions />;
  if ((params = match("/sessions/:id", path))) return <SessionPage id={params["id"] ?? ""} me={props.me} />;
  if (path === "/approvals") return <Approvals me={props.me} />;
  if ((params = match("/approvals/:id", path)))
    return (
      <section>
        <h1>Approval</h1>
        <ApprovalById id={params["id"] ?? ""} />
      </section>
    );
  if (path === "/agents") return <Agents />;
  if ((params = match("/agents/:id", path))) return <AgentPage id={params["id"] ?? ""} principalId={props.me.principal.id} />;
  if (path === "/profiles") return <Profiles />;
  if (path === "/automations") return <Automations />;
  if (path === "/automations/graphs") return <Graphs />;
  if (path === "/automations/skill-proposals") return <SkillProposals />;
  if (path === "/automations/graphs/new") return <GraphBuilder id={null} me={props.me} />;
  if ((params = match("/automations/graphs/:id", path))) return <GraphBuilder id={params["id"] ?? ""} me={props.me} />;
  if ((params = match("/automations/firings/:id", path))) return <FiringPage id={params["id"] ?? ""} />;
  if ((params = match("/automations/:id", path))) return <AutomationPage id={params["id"] ?? ""} />;
  if (path === "/reach") return <Reach section="" />;
  if (path === "/reach/memory") return <MemoryStores />;
  if ((params = match("/reach/memory/:id", path))) return <MemoryStorePage id={params["id"] ?? ""} />;
  if ((params = match("/reach/:section", path)) && ["tools", "vaults", "runners", "skills", "files"].includes(params["section"] ?? ""))
    return <Reach section={params["section"] ?? ""} />;
  if (path === "/governance") return <Governance section="" />;
  if ((params = match("/governance/principals/:id", path))) return <PrincipalPage id={params["id"] ?? ""} />;
  if ((params = match("/governance/:section", path)) && ["grants", "policies", "audit"].includes(params["section"] ?? ""))
    return <Governance section={params["section"] ?? ""} />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        The console has no page at <code>{path}</code>. <Link to="/">Go home</Link>.
      </p>
    </section>
  );
}

function Shell(props: { me: Me; signOut: () => void }) {
  const { path } = useLocation();
  const current = (to: string) => (to === "/" ? path === "/" : path === to || path.startsWith(to + "/"));
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link to="/" class="brand">
          Checkfu
        </Link>
        <nav aria-label="Pages">
          <ul>
            {PAGES.map((p) => (
              <li key={p.to}>
                <Link to={p.to} aria-current={current(p.to) ? "page" : undefined}>
                  {p.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span title={props.me.principal.id}>{props.me.principal.name}</span>
          <button type="button" onClick={props.signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Page me={props.me} />
      </main>
    </>
  );
}

function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const ended = useSignal(sessionEnded);
  useEffect(() => {
    api.consoleSessions.get().then(setMe, (e: unknown) => {
      if ((e as { status?: number }).status === 401) setMe(null);
      else setError(e);
    });
  }, []);
  useEffect(() => {
    if (ended) setMe(null);
  }, [ended]);
  if (error) return <ErrorBox error={error} />;
  if (me === undefined) return <p class="boot">Loading the console…</p>;
  if (me === null)
    return (
      <SignIn
        notice={ended}
        onSignedIn={(m) => {
          sessionEnded.set(null);
          setMe(m);
        }}
      />
    );
  return (
    <Shell
      me={me}
      signOut={async () => {
        await api.consoleSessions.delete().catch(() => undefined);
        setMe(null);
        navigate("/", true);
      }}
    />
  );
}

const root = document.getElementById("app");
if (root) {
  root.textContent = "";
  render(<App />, root);
}

// Sign-in: an API key pasted once, exchanged for a console session cookie.
// The key goes to the server in the request body and nowhere else: never
// into storage, a cookie the script can read, or the URL.

import { useState } from "preact/hooks";
import { api } from "../api.js";
import type { Me } from "../main.js";
import { ErrorBox } from "../ui.js";

export function SignIn(props: { notice: string | null; onSignedIn: (me: Me) => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main id="main" class="signin">
      <h1>Sign in to Checkfu</h1>
      {props.notice && (
        <p class="notice" role="status">
          {props.notice}
        </p>
      )}
      <form
        method="post"
        action="#"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const field = form.elements.namedItem("api_key") as HTMLInputElement;
          setBusy(true);
          setError(null);
          try {
            const me = await api.consoleSessions.create({ api_key: field.value.trim() }, { idempotencyKey: false });
            field.value = "";
            props.onSignedIn(me);
          } catch (err) {
            setError(err);
          } finally {
            setBusy(false);
          }
        }}
      >
        <label for="api_key">API key</label>
        <input id="api_key" name="api_key" type="password" autocomplete="off" spellcheck={false} required placeholder="ck_…" />
        <p class="hint">The key is exchanged once for a session of at most 12 hours (1 hour idle) and is not kept in this browser.</p>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      {error !== null && <ErrorBox error={error} />}
    </main>
  );
}

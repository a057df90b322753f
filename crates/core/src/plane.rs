//! What the local execution plane (the managed runner of `checkfu up` and
//! self-hosted Runners, which share the sandbox code) enforces of a
//! SandboxProfile revision. The control plane records it when a sandbox
//! materialises and a runner reports only a difference, so the common case
//! costs no call.

use serde_json::Value;

/// The profile fields (`profile` is a revision's JSON) this plane does not
/// enforce, each with why.
pub fn local_unenforced(profile: &Value) -> Vec<(String, String)> {
    let mut out = vec![(
        "image".to_string(),
        "this plane runs tools on the runner host's own userland (read-only /usr, /bin, /lib), not the image".to_string(),
    )];
    if profile.get("packages").and_then(Value::as_array).is_some_and(|p| !p.is_empty()) {
        out.push(("packages".into(), "this plane does not install packages; install them on the runner host".into()));
    }
    out.push(("resources.cpu_millis".into(), "this plane limits CPU time per command (30 s), not a CPU share".into()));
    out.push(("resources.disk_mib".into(), "enforced per file; the workspace as a whole is not capped on this plane".into()));
    out
}

//! What each execution plane enforces of a SandboxProfile revision: the
//! local plane (the managed runner of `checkfu up` and self-hosted Runners,
//! which share the sandbox code) and the Kubernetes plane (sandbox pods). The control plane records it when a sandbox
//! materialises and a runner reports only a difference, so the common case
//! costs no call.

/// The profile fields this plane does not enforce, each with why.
/// `packages`: the revision lists packages to install. `cpu_share`: the
/// runner has a delegated cgroup with the `cpu` controller, so
/// `cpu_millis` becomes `cpu.max`.
pub fn local_unenforced(packages: bool, cpu_share: bool) -> Vec<(String, String)> {
    let mut out = vec![(
        "image".to_string(),
        "this plane runs tools on the runner host's own userland (read-only /usr, /bin, /lib), not the image".to_string(),
    )];
    if packages {
        out.push(("packages".into(), "this plane does not install packages; install them on the runner host".into()));
    }
    if !cpu_share {
        out.push((
            "resources.cpu_millis".into(),
            "this runner has no delegated cgroup with the cpu controller: it limits CPU time per command (30 s), not a CPU share".into(),
        ));
    }
    out.push(("resources.disk_mib".into(), "enforced per file; the workspace as a whole is not capped on this plane".into()));
    out
}

/// What the Kubernetes managed plane (a sandbox pod per Session, of the
/// profile's image, with its cpu, memory and disk as the pod's limits)
/// does not enforce: only `packages`, which a read-only root filesystem
/// cannot take at run time (build them into the image).
pub fn kubernetes_unenforced(packages: bool) -> Vec<(String, String)> {
    let mut out = vec![];
    if packages {
        out.push((
            "packages".into(),
            "sandbox pods run the image as built (read-only root filesystem): build the packages into the image".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_plane_enforces_all_but_packages() {
        assert!(kubernetes_unenforced(false).is_empty());
        let f = kubernetes_unenforced(true);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, "packages");
    }

    #[test]
    fn what_the_local_plane_cannot_enforce_is_named() {
        let fields = |packages, cpu| local_unenforced(packages, cpu).into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(fields(false, false), ["image", "resources.cpu_millis", "resources.disk_mib"]);
        assert_eq!(fields(false, true), ["image", "resources.disk_mib"], "a cpu cgroup enforces cpu_millis");
        assert!(fields(true, false).contains(&"packages".to_string()));
    }
}

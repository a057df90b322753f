//! The sandbox's one way out (api.md §16.5), on the local plane.
//!
//! Under bubblewrap the sandbox has a network namespace of its own with
//! nothing in it but loopback. Outside, the runner listens on a Unix socket
//! of its own for the command ([`EgressLink`]) and passes every connection
//! on to the capability gateway's egress proxy; inside, `checkfu
//! sandbox-relay` ([`relay`]) listens on `127.0.0.1:3128` and passes every
//! connection to that socket (bind-mounted in), then runs the command with
//! `HTTP_PROXY` and friends naming it. Bytes are relayed, never read: what
//! may pass is decided by the proxy alone, from the egress token in the
//! proxy URL. What ignores the proxy (raw sockets, `--noproxy`, DNS) finds
//! no route.

use std::path::{Path, PathBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// Where the relay listens inside the sandbox.
pub const INSIDE_LISTEN: &str = "127.0.0.1:3128";
/// Where the runner's socket directory and the relay binary appear inside.
pub const INSIDE_DIR: &str = "/run/checkfu";
pub const SOCKET_NAME: &str = "egress.sock";
pub const RELAY_NAME: &str = "checkfu";

/// The outside end for one command: a Unix socket in a private directory,
/// relayed to the proxy until dropped.
pub struct EgressLink {
    dir: tempfile::TempDir,
    /// The proxy URL the command is given (with its egress token).
    pub proxy_url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EgressLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EgressLink {
    /// Listens for the sandbox and relays to `proxy` (`host:port`).
    pub fn open(proxy: &str, token: &str) -> std::io::Result<EgressLink> {
        let dir = tempfile::Builder::new().prefix("checkfu-egress-").tempdir()?;
        let path = dir.path().join(SOCKET_NAME);
        let listener = UnixListener::bind(&path)?;
        // The sandbox's own user connects to it; the directory is private
        // to this command otherwise (nothing else is in it).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        let proxy = proxy.to_string();
        let task = tokio::spawn(async move {
            while let Ok((mut inside, _)) = listener.accept().await {
                let proxy = proxy.clone();
                tokio::spawn(async move {
                    match TcpStream::connect(&proxy).await {
                        Ok(mut out) => {
                            let _ = tokio::io::copy_bidirectional(&mut inside, &mut out).await;
                        }
                        Err(e) => tracing::warn!(error = %e, proxy, "the egress proxy is unreachable"),
                    }
                });
            }
        });
        Ok(EgressLink { dir, proxy_url: format!("http://egress:{token}@{INSIDE_LISTEN}"), task })
    }

    /// The directory to bind at [`INSIDE_DIR`]'s socket path.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }
}

/// `checkfu sandbox-relay`: inside the sandbox, listen on `listen`, pass
/// each connection to the Unix socket `socket`, and run `command`; exits
/// with the command's status.
pub async fn relay(socket: PathBuf, listen: &str, command: Vec<String>) -> i32 {
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sandbox-relay: cannot listen on {listen}: {e}");
            return 125;
        }
    };
    tokio::spawn(async move {
        while let Ok((mut inside, _)) = listener.accept().await {
            let socket = socket.clone();
            tokio::spawn(async move {
                match UnixStream::connect(&socket).await {
                    Ok(mut out) => {
                        let _ = tokio::io::copy_bidirectional(&mut inside, &mut out).await;
                    }
                    Err(e) => eprintln!("sandbox-relay: the egress socket is unreachable: {e}"),
                }
            });
        }
    });
    let Some((program, args)) = command.split_first() else {
        eprintln!("sandbox-relay: no command");
        return 125;
    };
    match tokio::process::Command::new(program).args(args).status().await {
        Ok(s) => s.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)),
        Err(e) => {
            eprintln!("sandbox-relay: cannot start {program}: {e}");
            127
        }
    }
}

//! A Session's workspace as the snapshot and file capture see it: a
//! directory on this host, or the workspace of the Session's sandbox pod,
//! reached through its agent. Either way every path is opened beneath the
//! workspace by the kernel (`confined.rs`; in the pod, by the agent).

use crate::agent::RemoteSandbox;
use crate::chunks::{Chunks, Found, chunks_of, sha256_of, walk, write_to};
use crate::confined::Root;
use std::path::{Path, PathBuf};
use tonic::Status;

fn io(what: &str) -> impl Fn(std::io::Error) -> Status + '_ {
    move |e| Status::internal(format!("{what}: {e}"))
}

/// Where the workspace is.
pub enum Tree {
    /// A directory on this host (the local plane).
    Local(PathBuf),
    /// The Session's sandbox pod (the Kubernetes plane).
    Pod(Box<RemoteSandbox>),
}

impl Tree {
    fn root(path: &Path) -> Result<Root, Status> {
        Root::open(path, None).map_err(io("opening the workspace"))
    }

    /// Which workspace this is: what the runner remembers of one holds
    /// only for the same (a replaced sandbox pod starts with nothing).
    pub fn identity(&self) -> &str {
        match self {
            Tree::Local(_) => "",
            Tree::Pod(sb) => sb.identity(),
        }
    }

    /// Whether the Session ever used its workspace here.
    pub fn exists(&self) -> bool {
        match self {
            Tree::Local(p) => p.exists(),
            Tree::Pod(_) => true,
        }
    }

    pub async fn walk(&self, limit: usize) -> Result<Vec<Found>, Status> {
        match self {
            Tree::Local(p) => {
                let p = p.clone();
                tokio::task::spawn_blocking(move || walk(&p, limit)).await.map_err(|e| Status::internal(e.to_string()))
            }
            Tree::Pod(sb) => sb.list_files(limit).await,
        }
    }

    pub async fn sha256(&self, rel: &str) -> Result<String, Status> {
        match self {
            Tree::Local(p) => {
                let (p, rel) = (p.clone(), PathBuf::from(rel));
                tokio::task::spawn_blocking(move || sha256_of(&Self::root(&p)?, &rel).map_err(io("hashing")))
                    .await
                    .map_err(|e| Status::internal(e.to_string()))?
            }
            Tree::Pod(sb) => sb.hash_file(rel).await,
        }
    }

    pub async fn read(&self, rel: &str) -> Result<Chunks, Status> {
        match self {
            Tree::Local(p) => Ok(chunks_of(Self::root(p)?.open_file(Path::new(rel)).map_err(io(rel))?)),
            Tree::Pod(sb) => sb.read_file(rel).await,
        }
    }

    /// Writes a file; its size and modification time as written.
    pub async fn write(&self, rel: &str, mode: u32, chunks: Chunks) -> Result<(u64, i128), Status> {
        match self {
            Tree::Local(p) => {
                std::fs::create_dir_all(p).map_err(io("creating the workspace"))?;
                write_to(&Self::root(p)?, Path::new(rel), mode, chunks).await
            }
            Tree::Pod(sb) => sb.write_file(rel, mode, chunks).await,
        }
    }

    pub async fn remove(&self, rel: &str) -> Result<(), Status> {
        match self {
            Tree::Local(p) => Self::root(p)?.remove(Path::new(rel)).map_err(io(rel)),
            Tree::Pod(sb) => sb.remove_file(rel).await,
        }
    }
}

//! Compiles every `.proto` under `checkfu/` with protox (pure Rust, no `protoc`).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let mut files = Vec::new();
    collect(&root.join("checkfu"), &mut files)?;
    files.sort();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&root])?;
    // Messages that carry a credential get a redacting Debug
    // (`src/credential_input.rs`) instead of the derived one, so no
    // `{:?}` can print a secret.
    let redacted = [
        "checkfu.capability.v1.CredentialInput",
        "checkfu.capability.v1.CreateConnectionRequest",
        "checkfu.capability.v1.SetCredentialRequest",
    ];
    tonic_prost_build::configure().build_client(true).build_server(true).skip_debug(redacted).compile_fds(fds)?;
    Ok(())
}

fn collect(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    // A new file changes its directory, not any file already listed.
    println!("cargo:rerun-if-changed={}", dir.display());
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

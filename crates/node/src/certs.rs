//! `checkfu certs`: an installation CA and the role certificates of the
//! internal mesh, for installations not deployed with the Helm chart (which
//! makes its own at install, or asks cert-manager).
//!
//! A role certificate names each role its holder plays as a DNS SAN
//! (`sessions.role.checkfu`); it serves both ends of mutual TLS, so one
//! certificate per process is enough.

use anyhow::Context;
use checkfu_core::Role;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CA_NAME: &str = "Checkfu installation CA";

/// The CA's parameters. They are rebuilt the same way to sign with a CA
/// made earlier: the issuer name and key identifier follow from the name
/// and the key alone.
fn ca_params(days: i64) -> anyhow::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_NAME);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut p, days);
    Ok(p)
}

fn validity(p: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(days);
}

/// What `issue` wrote.
#[derive(Debug)]
pub struct Issued {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub created_ca: bool,
}

/// Writes `DIR/ca.pem` and `DIR/ca-key.pem` unless they exist, then
/// `DIR/NAME.pem` and `DIR/NAME-key.pem` for `roles`, valid `days` days.
/// Private keys are written mode 0600.
pub fn issue(dir: &Path, name: &str, roles: &BTreeSet<Role>, days: i64) -> anyhow::Result<Issued> {
    anyhow::ensure!(!roles.is_empty(), "name at least one role");
    anyhow::ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "the certificate name may hold only letters, digits, '-' and '_'"
    );
    anyhow::ensure!((1..=3650).contains(&days), "--days must be between 1 and 3650");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (ca_path, ca_key_path) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    let created_ca = !ca_key_path.exists();
    let ca_key = if created_ca {
        let key = KeyPair::generate()?;
        let cert = ca_params(3650)?.self_signed(&key)?;
        write(&ca_path, cert.pem().as_bytes(), false)?;
        write(&ca_key_path, key.serialize_pem().as_bytes(), true)?;
        key
    } else {
        let pem = std::fs::read_to_string(&ca_key_path).with_context(|| format!("reading {}", ca_key_path.display()))?;
        KeyPair::from_pem(&pem).with_context(|| format!("{} is not a private key", ca_key_path.display()))?
    };
    let issuer = Issuer::new(ca_params(3650)?, ca_key);

    let mut p = CertificateParams::new(roles.iter().map(|r| r.mesh_name()).collect::<Vec<_>>())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("checkfu {name}"));
    p.distinguished_name = dn;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    p.use_authority_key_identifier_extension = true;
    validity(&mut p, days);
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, &issuer)?;
    let (cert_path, key_path) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}-key.pem")));
    write(&cert_path, cert.pem().as_bytes(), false)?;
    write(&key_path, key.serialize_pem().as_bytes(), true)?;
    Ok(Issued { ca: ca_path, cert: cert_path, key: key_path, created_ca })
}

/// Writes `bytes` to `path` (created or truncated; a secret with mode 0600)
/// and flushes it to disk.
pub(crate) fn write(path: &Path, bytes: &[u8], secret: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut f = opts.open(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes).and_then(|()| f.sync_all())?;
    Ok(())
}

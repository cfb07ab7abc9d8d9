//! TLS as a client of this process's own choosing: the system's roots plus a person's private CA
//! (PEM), on rustls with ring. Runner mode dials its relay with it (`[runner] ca_file`), the
//! OAuth resource server its issuer (`ca_file` of the OAuth table).

use rustls::pki_types::{CertificateDer, pem::PemObject};
use std::path::Path;
use std::sync::Arc;

/// A TLS client config trusting the system's roots and the PEM certificates of `ca_file`;
/// `what` names the setting in errors (`[runner] ca_file`).
pub fn client_config(ca_file: Option<&Path>, what: &str) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // One unusable system certificate is no reason to trust none.
        let _ = roots.add(cert);
    }
    if let Some(file) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
            .map_err(|e| anyhow::anyhow!("{what} {}: {e}", file.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("{what} {}: {e}", file.display()))?;
        if certs.is_empty() {
            anyhow::bail!("{what} {} holds no PEM certificate", file.display());
        }
        for c in certs {
            roots.add(c).map_err(|e| anyhow::anyhow!("{what} {}: {e}", file.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

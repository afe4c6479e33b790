//! Where the server listens: a unix socket (the default; created owner-only, a stale socket
//! file from a dead server replaced, a live one refused) or a TCP address.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A listen (or connect) address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `unix:///PATH` (or `unix:PATH`).
    Unix(PathBuf),
    /// `HOST:PORT`.
    Tcp(SocketAddr),
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix://{}", p.display()),
            Listen::Tcp(a) => write!(f, "{a}"),
        }
    }
}

impl FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(format!("{s:?}: no socket path (unix:///PATH)"));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        let addr = s.strip_prefix("tcp://").unwrap_or(s);
        let resolved = addr
            .to_socket_addrs()
            .map_err(|e| format!("{s:?}: neither unix:///PATH nor HOST:PORT ({e})"))?
            .next()
            .ok_or_else(|| format!("{s:?}: the host resolves to no address"))?;
        Ok(Listen::Tcp(resolved))
    }
}

/// Readies `path` for a new socket: nothing there, or a stale socket (no server answers on it)
/// removed. A live socket, or anything that is not a socket, is an error naming the path.
pub fn clear_socket_path(path: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if !meta.file_type().is_socket() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a socket"
        };
        return Err(format!(
            "{} is {what}: give a socket path that is free or holds a stale socket",
            path.display()
        ));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(format!(
            "a server is listening on {} already: stop it, or give another path",
            path.display()
        ));
    }
    std::fs::remove_file(path)
        .map_err(|e| format!("removing the stale socket {}: {e}", path.display()))
}

/// Binds a unix socket at `path` readable and writable by its owner alone.
pub fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, String> {
    clear_socket_path(path)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path)
        .map_err(|e| format!("binding {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("restricting {} to its owner: {e}", path.display()))?;
    Ok(listener)
}

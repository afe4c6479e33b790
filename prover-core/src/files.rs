//! The one policy for the files a command reads, and for the folders it creates.
//!
//! - A file is read only if it is a regular file (or a link to one): its metadata is checked
//!   before it is opened (opening a FIFO would block, opening a device can act on it), it is
//!   opened with `O_NONBLOCK`, and the opened handle is checked again (`fstat`), so a FIFO
//!   swapped in between the two cannot block the read either.
//! - A file read whole is read up to a limit set by its kind ([`InputKind`]): a file larger
//!   than that, or one that never ends, is refused instead of filling the memory. Parameter and
//!   pre-compiled constraint files are not read whole: they are opened here and their length
//!   prefixes are checked against the file's size.
//! - Every error names the file, and says its reason once.
//! - A folder that cannot be created says why in words: a loop of symbolic links, a file in
//!   its place (the system's own error for both is "File exists").

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::error::{io_reason, Error, Result};
use crate::units::human_bytes;

/// What a file read whole is: each kind has the largest size a sound file of it has, with room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A JSON or CSV document or a log: a sweep's `results.json`, a point's JSON, a timeline,
    /// `sector.json`, a point's log (256 MiB).
    Document,
    /// A Filecoin C1 output, in either JSON form (1 GiB; a 32 GiB sector's is tens of MiB).
    C1Output,
    /// A verifying key file (64 MiB, about 700,000 public inputs).
    VerifyingKey,
    /// A vanilla proof as bincode (a SnapDeals partition's, a PoSt sector's; 1 GiB).
    VanillaProof,
    /// A compiled device program in the kernel cache (256 MiB).
    KernelBinary,
}

impl InputKind {
    /// The most bytes a file of this kind may have.
    pub fn limit(self) -> u64 {
        match self {
            InputKind::Document | InputKind::KernelBinary => 256 << 20,
            InputKind::C1Output | InputKind::VanillaProof => 1 << 30,
            InputKind::VerifyingKey => 64 << 20,
        }
    }

    /// The kind in words, for errors.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::Document => "a JSON, CSV or log file",
            InputKind::C1Output => "a C1 output",
            InputKind::VerifyingKey => "a verifying key",
            InputKind::VanillaProof => "a vanilla proof",
            InputKind::KernelBinary => "a kernel cache entry",
        }
    }
}

/// What a file that is not a regular file is, in words.
fn file_type_name(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    if t.is_dir() {
        "a folder"
    } else {
        "not a file"
    }
}

/// Refuses `meta` unless it is a regular file's.
fn check_regular(meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}, not a regular file", file_type_name(meta.file_type())),
    ))
}

/// Opens a regular file for reading; checked before and after the open (see the module's
/// documentation). The error is the bare I/O error: the callers name the path.
fn open_checked(path: &Path) -> io::Result<File> {
    check_regular(&std::fs::metadata(path)?)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO swapped in after the check opens at once instead of waiting for a writer; on a
        // regular file the flag changes nothing.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    check_regular(&file.metadata()?)?;
    Ok(file)
}

/// Reads `r` to its end, refusing it past `limit` bytes (`size` is what its metadata says, a
/// first check and the allocation's size); an endless reader stops one byte past the limit.
fn read_limited(r: impl Read, size: u64, limit: u64, kind: InputKind) -> io::Result<Vec<u8>> {
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {}, the most {} may have",
                human_bytes(limit),
                kind.name()
            ),
        )
    };
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size as usize);
    r.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads all of the regular file `path`, of at most `kind`'s size.
fn read_checked(path: &Path, kind: InputKind) -> io::Result<Vec<u8>> {
    let file = open_checked(path)?;
    let size = file.metadata()?.len();
    read_limited(file, size, kind.limit(), kind)
}

/// Opens `path` for reading if it is a regular file (or a link to one); a FIFO, a device, a
/// socket or a folder is refused without blocking, with an error that names the path.
pub fn open_regular_file(path: &Path) -> Result<File> {
    open_checked(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))
}

/// Reads the whole regular file `path`, of at most `kind`'s size ([`InputKind::limit`]); every
/// error names the path.
pub fn read_input(path: &Path, kind: InputKind) -> Result<Vec<u8>> {
    read_checked(path, kind).map_err(|e| Error::io(format!("reading {}", path.display()), e))
}

/// [`read_input`] for a text file: the bytes must be UTF-8.
pub fn read_input_text(path: &Path, kind: InputKind) -> Result<String> {
    String::from_utf8(read_input(path, kind)?).map_err(|_| {
        Error::io(
            format!("reading {}", path.display()),
            io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"),
        )
    })
}

/// Creates the folder `path` and its parents. Where the system says only "File exists", the
/// error says what is in the way, and where: a loop of symbolic links, a link to nothing, or a
/// file.
pub fn create_dir_all(path: &Path) -> Result<()> {
    let context = || format!("creating {}", path.display());
    let Err(e) = std::fs::create_dir_all(path) else {
        return Ok(());
    };
    if e.kind() != io::ErrorKind::AlreadyExists {
        return Err(Error::io(context(), e));
    }
    // The system names no component: the one in the way is the deepest that is there.
    let Some(blocker) = path
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())
    else {
        return Err(Error::io(context(), e));
    };
    let why = match std::fs::metadata(blocker) {
        Err(followed) if followed.kind() == io::ErrorKind::NotFound => {
            let target = std::fs::read_link(blocker)
                .map_or_else(|_| "?".into(), |t| t.display().to_string());
            format!("a symbolic link to {target}, which does not exist")
        }
        Err(followed) => io_reason(&followed),
        Ok(meta) => format!(
            "{} is there already, not a folder",
            if meta.is_file() {
                "a file"
            } else {
                file_type_name(meta.file_type())
            }
        ),
    };
    let why = if blocker == path {
        why
    } else {
        format!("{}: {why}", blocker.display())
    };
    Err(Error::io(context(), io::Error::new(e.kind(), why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_regular_file_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, b"{}").unwrap();
        assert_eq!(read_input(&path, InputKind::Document).unwrap(), b"{}");
        assert_eq!(read_input_text(&path, InputKind::Document).unwrap(), "{}");
        // Through a link to it too.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read_input(&link, InputKind::Document).unwrap(), b"{}");
        // Twin: bytes that are not UTF-8 are no text, and the error names the file.
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        let e = read_input_text(&path, InputKind::Document).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("reading {}: not UTF-8 text", path.display())
        );
    }

    #[test]
    fn a_fifo_a_device_and_a_folder_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("results.json");
        mkfifo(&fifo);
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for (path, what) in [
            (&fifo, "a FIFO"),
            (&zero, "a character device"),
            (&dir.path().to_path_buf(), "a folder"),
        ] {
            let e = read_input(path, InputKind::Document)
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!("reading {}: {what}, not a regular file", path.display())
            );
            let e = open_regular_file(path).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("opening {}: {what}, not a regular file", path.display())
            );
        }
    }

    #[test]
    fn the_opened_handle_is_checked_again() {
        // What a FIFO swapped in after the metadata check meets: the open does not wait for a
        // writer, and the handle's own metadata refuses it.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("swapped");
        mkfifo(&fifo);
        let mut options = std::fs::OpenOptions::new();
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            options.read(true),
            libc::O_NONBLOCK | libc::O_NOCTTY,
        );
        let file = options.open(&fifo).unwrap();
        let e = check_regular(&file.metadata().unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "a FIFO, not a regular file");
    }

    #[test]
    fn a_file_past_its_kind_s_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.json");
        // Sparse: nothing is written, and nothing may be read.
        let f = File::create(&path).unwrap();
        f.set_len(InputKind::Document.limit() + 1).unwrap();
        let e = read_input(&path, InputKind::Document).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "reading {}: larger than 256.0 MiB, the most a JSON, CSV or log file may have",
                path.display()
            )
        );
        // Twin: at the limit exactly, a larger kind reads it.
        f.set_len(InputKind::Document.limit()).unwrap();
        assert_eq!(
            read_input(&path, InputKind::C1Output).unwrap().len() as u64,
            InputKind::Document.limit()
        );
    }

    #[test]
    fn an_endless_file_is_refused_at_its_limit() {
        // A file whose size says nothing (0, as /proc's) is cut one byte past the limit.
        let e = read_limited(io::repeat(7), 0, 1000, InputKind::Document).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            "larger than 1000 B, the most a JSON, CSV or log file may have"
        );
        // Twin: exactly the limit reads.
        let got = read_limited(io::repeat(7).take(1000), 0, 1000, InputKind::Document).unwrap();
        assert_eq!(got.len(), 1000);
    }

    #[test]
    fn a_folder_that_cannot_be_created_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let lp = dir.path().join("loop");
        std::os::unix::fs::symlink("loop", &lp).unwrap();
        let e = create_dir_all(&lp).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("creating {}: a loop of symbolic links", lp.display())
        );
        assert!(!e.contains("File exists"), "{e}");
        // Below the loop, the system's error is the loop already.
        let e = create_dir_all(&lp.join("sub")).unwrap_err().to_string();
        assert!(e.ends_with(": a loop of symbolic links"), "{e}");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("/nonexistent/x", &dangling).unwrap();
        let e = create_dir_all(&dangling).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "creating {}: a symbolic link to /nonexistent/x, which does not exist",
                dangling.display()
            )
        );
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let e = create_dir_all(&file).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "creating {}: a file is there already, not a folder",
                file.display()
            )
        );
        // Below a link to nothing, the link is named.
        let e = create_dir_all(&dangling.join("sub"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "creating {}: {}: a symbolic link to /nonexistent/x, which does not exist",
                dangling.join("sub").display(),
                dangling.display()
            )
        );
        // Twin: a new folder, and one that is there, are fine.
        create_dir_all(&dir.path().join("a/b")).unwrap();
        create_dir_all(&dir.path().join("a/b")).unwrap();
    }
}

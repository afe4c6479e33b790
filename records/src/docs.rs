//! The repository's documents with their tables rendered afresh from its records.

use std::path::{Path, PathBuf};

use crate::record::{read_dir, Record, RecordError};
use crate::render::{fill_document, tables};

/// Where the records live, relative to the repository's root.
pub const RECORDS_DIR: &str = "docs/records";

/// One document that holds tables: its path (relative to the root), its text now, and its text
/// with the tables rendered from the records.
#[derive(Debug)]
pub struct Refreshed {
    pub path: PathBuf,
    pub current: String,
    pub rendered: String,
}

/// Why the documents could not be refreshed.
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    #[error(transparent)]
    Records(#[from] RecordError),
    #[error("{path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {error}")]
    Render {
        path: PathBuf,
        error: crate::render::RenderError,
    },
    #[error("records of table `{0}` are shown in no document")]
    Unshown(String),
}

/// `README.md` and every `docs/*.md` under `root` that marks a table, rendered from the records
/// under `root/docs/records`. A table that has records but no document is an error.
pub fn refresh(root: &Path) -> Result<Vec<Refreshed>, DocsError> {
    let files = read_dir(&root.join(RECORDS_DIR))?;
    // Paths relative to the root, for links relative to each document.
    let rel: Vec<(PathBuf, &Vec<Record>)> = files
        .iter()
        .map(|(p, rs)| (p.strip_prefix(root).unwrap_or(p).to_path_buf(), rs))
        .collect();
    let sourced: Vec<(&Path, &Record)> = rel
        .iter()
        .flat_map(|(p, rs)| rs.iter().map(move |r| (p.as_path(), r)))
        .collect();

    let mut docs = vec![PathBuf::from("README.md")];
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |error| DocsError::Read { path, error }
    };
    let docs_dir = root.join("docs");
    let mut md: Vec<PathBuf> = std::fs::read_dir(&docs_dir)
        .map_err(read_err(&docs_dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root).unwrap_or(&p).to_path_buf())
        .collect();
    md.sort();
    docs.extend(md);

    let mut out = Vec::new();
    let mut shown = String::new();
    for doc in docs {
        let full = root.join(&doc);
        let current = std::fs::read_to_string(&full).map_err(read_err(&full))?;
        if !current.contains("<!-- table: ") {
            continue;
        }
        shown.push_str(&current);
        let dir = doc.parent().unwrap_or(Path::new("")).to_path_buf();
        let rendered =
            fill_document(&current, &sourced, &dir).map_err(|error| DocsError::Render {
                path: doc.clone(),
                error,
            })?;
        out.push(Refreshed {
            path: doc,
            current,
            rendered,
        });
    }
    for table in tables(&sourced).keys() {
        if !shown.contains(&format!("<!-- table: {table} -->")) {
            return Err(DocsError::Unshown(table.to_string()));
        }
    }
    Ok(out)
}

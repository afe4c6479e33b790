//! The docs' tables are what the records render: a record added without `cargo xtask
//! bench-tables`, or a table edited by hand, fails here.

use std::path::Path;

#[test]
fn the_docs_tables_are_rendered_from_the_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let docs = proofline_records::docs::refresh(root).expect("records and documents read");
    assert!(
        !docs.is_empty(),
        "no document marks a table rendered from the records"
    );
    let stale: Vec<String> = docs
        .iter()
        .filter(|d| d.current != d.rendered)
        .map(|d| d.path.display().to_string())
        .collect();
    assert!(
        stale.is_empty(),
        "tables out of date in {stale:?}: run `cargo xtask bench-tables`"
    );
}

//! `dump` reproduces objdump's text for every vector and sample.

mod common;

use sframe::read::dump::{self, ObjdumpStyle};
use sframe::Section;

fn our_text(v: &common::Vector) -> String {
    let (file, target) = common::banner(&v.objdump);
    let mut text = dump::file_banner(&file, &target);
    if !v.bytes.is_empty() {
        let section = Section::parse(v.bytes.as_slice(), v.base).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let listing = dump::listing(&section).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        text.push_str(&dump::objdump_text(&listing, ObjdumpStyle::for_header(section.header())));
    }
    text
}

#[test]
fn every_vector_dumps_to_its_objdump_text() {
    let mut vectors = common::simple_frame_vectors();
    assert!(vectors.len() >= 108, "expected the 108+ simple-frame-rs vectors");
    vectors.extend(common::v1_samples());
    let mut failures = Vec::new();
    for v in &vectors {
        let ours = common::normalise(&our_text(v));
        let theirs = common::normalise(&v.objdump);
        if ours != theirs {
            let first = ours.lines().zip(theirs.lines()).position(|(a, b)| a != b).unwrap_or(0);
            failures.push(format!(
                "{}: line {}\n  ours:   {:?}\n  theirs: {:?}",
                v.name,
                first + 1,
                ours.lines().nth(first),
                theirs.lines().nth(first)
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), vectors.len(), failures.join("\n"));
}

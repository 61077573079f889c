//! Path resolution, the overlay over a host tree, the prefix and the
//! overlay's limit, without a guest.

use super::*;
use crate::linux::abi::errno::{ELOOP, ENAMETOOLONG, ENOENT, ENOSPC, ENOTDIR};
use std::path::PathBuf;

fn overlay_only() -> Vfs {
    let mut fs = Vfs::new(None, None, b"/".to_vec(), b"/exe".to_vec());
    fs.add_file(b"/a/b.txt", b"hello", 0o644, 0);
    fs
}

fn symlink(fs: &mut Vfs, at: &[u8], target: &[u8]) {
    let meta = fs.new_meta(0o777, 0);
    fs.nodes.insert(at.to_vec(), Node::Symlink(meta, target.to_vec()));
}

fn found(fs: &Vfs, start: &[u8], path: &[u8], follow: bool) -> Result<Vec<u8>, i64> {
    let fds = FdTable::stdio();
    let r = fs.resolve(start, path, follow, &fds)?;
    Ok(r.entry.map(|_| r.path).unwrap_or_default())
}

#[test]
fn resolution_errors_are_linux_ones() {
    let mut fs = overlay_only();
    assert_eq!(found(&fs, b"/", b"a/../a/./b.txt", true), Ok(b"/a/b.txt".to_vec()));
    assert_eq!(found(&fs, b"/a", b"b.txt", true), Ok(b"/a/b.txt".to_vec()));
    assert_eq!(found(&fs, b"/", b"/../../a/b.txt", true), Ok(b"/a/b.txt".to_vec()));
    assert_eq!(found(&fs, b"/", b"a/b.txt/x", true), Err(ENOTDIR));
    assert_eq!(found(&fs, b"/", b"a/b.txt/", true), Err(ENOTDIR));
    assert_eq!(found(&fs, b"/", b"nope/x", true), Err(ENOENT));
    assert_eq!(found(&fs, b"/", b"", true), Err(ENOENT));
    // A missing last component is not an error: it can be created.
    assert_eq!(found(&fs, b"/", b"a/new", true), Ok(Vec::new()));
    assert_eq!(found(&fs, b"/", &vec![b'x'; 256], true), Err(ENAMETOOLONG));
    symlink(&mut fs, b"/l1", b"l2");
    symlink(&mut fs, b"/l2", b"l1");
    assert_eq!(found(&fs, b"/", b"l1", true), Err(ELOOP));
    assert_eq!(found(&fs, b"/", b"l1", false), Ok(b"/l1".to_vec()));
    symlink(&mut fs, b"/to_a", b"/a");
    symlink(&mut fs, b"/a/up", b"..");
    assert_eq!(found(&fs, b"/", b"to_a/up/to_a/b.txt", true), Ok(b"/a/b.txt".to_vec()));
    assert_eq!(found(&fs, b"/", b"to_a/", true), Ok(b"/a".to_vec()));
}

/// A scratch host directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("unwindlab-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, rel: &str, data: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn names(fs: &Vfs, dir: &[u8]) -> Vec<String> {
    fs.list(dir, &FdTable::stdio()).into_iter().map(|(n, _, _)| String::from_utf8(n).unwrap()).collect()
}

#[test]
fn the_overlay_hides_and_adds_to_the_host_tree() {
    let root = Scratch::new("root");
    root.file("d/z", "z");
    root.file("d/a", "a");
    root.file("d/sub/f", "f");
    let mut fs = Vfs::new(Some(root.0.clone()), None, b"/".to_vec(), Vec::new());
    assert_eq!(names(&fs, b"/d"), ["a", "sub", "z"]);
    fs.nodes.insert(b"/d/a".to_vec(), Node::Whiteout);
    fs.add_file(b"/d/m", b"", 0o644, 0);
    assert_eq!(names(&fs, b"/d"), ["m", "sub", "z"]);
    assert!(fs.lookup(b"/d/a", &FdTable::stdio()).is_none());
    // A directory made where a host one was removed shows none of its entries.
    let meta = fs.new_meta(0o755, 0);
    fs.nodes.insert(b"/d/sub".to_vec(), Node::Dir(meta, true));
    assert_eq!(names(&fs, b"/d/sub"), Vec::<String>::new());
    assert!(fs.lookup(b"/d/sub/f", &FdTable::stdio()).is_none());
    // A host file is no directory.
    let fds = FdTable::stdio();
    assert_eq!(fs.resolve(b"/", b"d/z/x", true, &fds).map(|_| ()), Err(ENOTDIR));
    assert!(root.0.join("d/a").exists(), "the host is never written");
}

#[test]
fn the_prefix_comes_first() {
    let root = Scratch::new("prefixroot");
    root.file("lib/both", "root");
    root.file("lib/rootonly", "root");
    let prefix = Scratch::new("prefix");
    prefix.file("lib/both", "prefix");
    prefix.file("lib/prefixonly", "prefix");
    let mut fs = Vfs::new(Some(root.0.clone()), Some(prefix.0.clone()), b"/".to_vec(), Vec::new());
    let fds = FdTable::stdio();
    let read = |fs: &mut Vfs, p: &[u8]| {
        let Some(Entry { source: Source::Host(host, _), .. }) = fs.lookup(p, &fds) else { panic!("not on the host") };
        String::from_utf8(fs.read_host(p, &host).unwrap().to_vec()).unwrap()
    };
    assert_eq!(read(&mut fs, b"/lib/both"), "prefix");
    assert_eq!(read(&mut fs, b"/lib/rootonly"), "root");
    assert_eq!(names(&fs, b"/lib"), ["both", "prefixonly", "rootonly"]);
    assert_eq!(fs.digests.get(&b"/lib/both"[..]), Some(&fnv1a(b"prefix")));
}

#[test]
fn the_overlay_is_bounded() {
    let mut fs = overlay_only();
    fs.limit = fs.used + 100;
    assert_eq!(fs.charge(60), Ok(()));
    assert_eq!(fs.charge(50), Err(ENOSPC));
    assert_eq!(fs.charge(u64::MAX), Err(ENOSPC));
    fs.release(60);
    assert_eq!(fs.charge(100), Ok(()));
}

#[test]
fn fnv1a_is_the_standard_one() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn a_descriptor_link_leads_to_the_open_file() {
    let mut fs = overlay_only();
    let mut fds = FdTable::stdio();
    let (read, _write) = PipeEnd::pair(7);
    fds.insert(3, Desc { file: OpenFile::new(FileKind::Pipe(read), 0, pipe_name(7)), cloexec: false });
    let Some(Node::File(file)) = fs.nodes.get(&b"/a/b.txt"[..]).cloned() else { panic!("no overlay file") };
    fds.insert(4, Desc { file: OpenFile::new(FileKind::Overlay(file), 0, b"/a/b.txt".to_vec()), cloexec: false });
    // Unlinked: its name leads nowhere, its descriptor's link still to it.
    fs.nodes.remove(&b"/a/b.txt"[..]);
    let opened = |fs: &Vfs, path: &[u8]| {
        let r = fs.resolve(b"/", path, true, &fds)?;
        Ok::<_, i64>(match r.entry {
            Some(Entry { kind, source: Source::Open(_) }) => (r.path, kind),
            other => panic!("{}: not an open file: {other:?}", String::from_utf8_lossy(path)),
        })
    };
    assert_eq!(opened(&fs, b"/dev/fd/3"), Ok((b"pipe:[7]".to_vec(), Kind::Other)));
    assert_eq!(opened(&fs, b"/dev/stdin"), Ok((b"pipe:[1]".to_vec(), Kind::Other)));
    assert_eq!(opened(&fs, b"/proc/self/fd/4"), Ok((b"/a/b.txt".to_vec(), Kind::File)));
    // Not followed, it is a link that reads as the name.
    let link = fs.resolve(b"/", b"/dev/fd/4", false, &fds).unwrap().entry.map(|e| e.kind);
    assert_eq!(link, Some(Kind::Symlink(b"/a/b.txt".to_vec())));
    assert_eq!(fs.resolve(b"/", b"/dev/fd/3/x", true, &fds).map(|_| ()), Err(ENOTDIR));
    // A closed descriptor has no link (opening it is ENOENT).
    assert!(fs.resolve(b"/", b"/dev/fd/9", true, &fds).unwrap().entry.is_none());
    // A file known by its name (a directory here) is reached through it.
    let dir = fs.resolve(b"/", b"/a", true, &fds).unwrap().entry.unwrap();
    let stat = fs.stat(b"/a", &dir);
    fds.insert(5, Desc { file: OpenFile::new(FileKind::Dir(stat), 0, b"/a".to_vec()), cloexec: false });
    fs.add_file(b"/a/c.txt", b"c", 0o644, 0);
    let r = fs.resolve(b"/", b"/proc/self/fd/5/c.txt", true, &fds).unwrap();
    assert_eq!((r.path, r.entry.map(|e| e.kind)), (b"/a/c.txt".to_vec(), Some(Kind::File)));
}

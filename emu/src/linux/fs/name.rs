//! Names as strings: splitting, joining and lexically normalising absolute
//! paths, with no file system behind them.

pub(super) fn split(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty()).map(<[u8]>::to_vec)
}

pub(super) fn join(parts: &[Vec<u8>]) -> Vec<u8> {
    if parts.is_empty() {
        return b"/".to_vec();
    }
    let mut out = Vec::new();
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    out
}

/// `abs` with `.`, `..` and repeated slashes taken out lexically.
pub(crate) fn normalize(abs: &[u8]) -> Vec<u8> {
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for c in split(abs) {
        match &c[..] {
            b"." => {}
            b".." => {
                parts.pop();
            }
            _ => parts.push(c),
        }
    }
    join(&parts)
}

/// The parent directory of absolute path `abs`, and its last name.
pub(crate) fn parent(abs: &[u8]) -> (&[u8], &[u8]) {
    match abs.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &abs[1..]),
        Some(i) => (&abs[..i], &abs[i + 1..]),
        None => (b"/", abs),
    }
}

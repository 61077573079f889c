//! The Linux initial process stack: argument and environment strings, the
//! platform string, `AT_RANDOM` bytes, then argc, argv, envp and the
//! auxiliary vector, laid out as `fs/binfmt_elf.c` does, in the guest's byte order.

use crate::machine::bytes::{put, Endian};

/// `AT_*` auxiliary-vector keys.
#[allow(missing_docs)]
pub mod at {
    pub const NULL: u64 = 0;
    pub const PHDR: u64 = 3;
    pub const PHENT: u64 = 4;
    pub const PHNUM: u64 = 5;
    pub const PAGESZ: u64 = 6;
    pub const BASE: u64 = 7;
    pub const FLAGS: u64 = 8;
    pub const ENTRY: u64 = 9;
    pub const UID: u64 = 11;
    pub const EUID: u64 = 12;
    pub const GID: u64 = 13;
    pub const EGID: u64 = 14;
    pub const PLATFORM: u64 = 15;
    pub const HWCAP: u64 = 16;
    pub const CLKTCK: u64 = 17;
    pub const SECURE: u64 = 23;
    pub const RANDOM: u64 = 25;
    pub const HWCAP2: u64 = 26;
    pub const EXECFN: u64 = 31;
    pub const MINSIGSTKSZ: u64 = 51;
}

/// What goes on the initial stack.
#[derive(Debug, Clone)]
pub struct StackSpec<'a> {
    /// Byte order of the guest.
    pub endian: Endian,
    /// One past the highest stack address.
    pub top: u64,
    /// `argv` strings (without terminating NULs).
    pub args: &'a [Vec<u8>],
    /// `envp` strings.
    pub env: &'a [Vec<u8>],
    /// The file name for `AT_EXECFN`.
    pub execfn: &'a [u8],
    /// The `AT_PLATFORM` string.
    pub platform: &'a [u8],
    /// The 16 `AT_RANDOM` bytes.
    pub random: [u8; 16],
    /// Auxiliary-vector entries other than those pointing into the stack
    /// (`AT_EXECFN`, `AT_PLATFORM`, `AT_RANDOM` are added here).
    pub aux: &'a [(u64, u64)],
}

/// A built stack: the bytes of `sp..top`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackImage {
    /// The initial stack pointer (pointing at argc, 16-byte aligned).
    pub sp: u64,
    /// Contents of `sp..top`.
    pub bytes: Vec<u8>,
}

/// Builds the initial stack; `None` if it would not fit in `limit` bytes.
pub fn build(spec: &StackSpec<'_>, limit: u64) -> Option<StackImage> {
    let strings = |list: &[Vec<u8>]| list.iter().map(|s| s.len() as u64 + 1).sum::<u64>();
    // From the top down: a zero word, the file name, the environment and
    // argument strings (argv[0] lowest), then, 16-byte aligned, the platform
    // string and the random bytes.
    let execfn_at = spec.top.checked_sub(8 + spec.execfn.len() as u64 + 1)?;
    let env_at = execfn_at.checked_sub(strings(spec.env))?;
    let args_at = env_at.checked_sub(strings(spec.args))?;
    let platform_at = (args_at & !15).checked_sub(spec.platform.len() as u64 + 1)?;
    let random_at = platform_at.checked_sub(16)?;

    let mut aux: Vec<(u64, u64)> = spec.aux.to_vec();
    aux.push((at::PLATFORM, platform_at));
    aux.push((at::RANDOM, random_at));
    aux.push((at::EXECFN, execfn_at));
    aux.push((at::NULL, 0));
    let words = 1 + (spec.args.len() + 1) + (spec.env.len() + 1) + 2 * aux.len();
    let sp = random_at.checked_sub(8 * words as u64)? & !15;
    if spec.top - sp > limit {
        return None;
    }

    let mut bytes = vec![0u8; (spec.top - sp) as usize];
    let mut write = |addr: u64, data: &[u8]| {
        let at = (addr - sp) as usize;
        bytes[at..at + data.len()].copy_from_slice(data);
    };
    let mut pointers = Vec::with_capacity(words);
    pointers.push(spec.args.len() as u64);
    for (list, mut at) in [(spec.args, args_at), (spec.env, env_at)] {
        for s in list {
            write(at, s);
            pointers.push(at);
            at += s.len() as u64 + 1;
        }
        pointers.push(0);
    }
    write(execfn_at, spec.execfn);
    write(platform_at, spec.platform);
    write(random_at, &spec.random);
    for (key, value) in aux {
        pointers.push(key);
        pointers.push(value);
    }
    let mut word = [0u8; 8];
    for (i, value) in pointers.into_iter().enumerate() {
        put(spec.endian, &mut word, value);
        write(sp + 8 * i as u64, &word);
    }
    Some(StackImage { sp, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::bytes::get;

    #[test]
    fn layout_matches_linux() {
        let args = [b"prog".to_vec(), b"x".to_vec()];
        let env = [b"A=1".to_vec()];
        for endian in [Endian::Little, Endian::Big] {
            let spec = StackSpec {
                endian,
                top: 0x10000,
                args: &args,
                env: &env,
                execfn: b"prog",
                platform: b"p",
                random: [7; 16],
                aux: &[(at::PAGESZ, 4096)],
            };
            let image = build(&spec, 0x1000).unwrap();
            assert_eq!(image.sp % 16, 0);
            let word = |addr: u64| get(endian, &image.bytes[(addr - image.sp) as usize..][..8]);
            let string = |addr: u64| {
                let at = &image.bytes[(addr - image.sp) as usize..];
                at[..at.iter().position(|&b| b == 0).unwrap()].to_vec()
            };
            assert_eq!(word(image.sp), 2);
            assert_eq!(string(word(image.sp + 8)), b"prog");
            assert_eq!(string(word(image.sp + 16)), b"x");
            assert_eq!(word(image.sp + 24), 0);
            assert_eq!(string(word(image.sp + 32)), b"A=1");
            assert_eq!(word(image.sp + 40), 0);
            assert_eq!((word(image.sp + 48), word(image.sp + 56)), (at::PAGESZ, 4096));
            assert_eq!(word(image.sp + 64), at::PLATFORM);
            assert_eq!(string(word(image.sp + 72)), b"p");
            assert_eq!(word(image.sp + 80), at::RANDOM);
            let random = word(image.sp + 88);
            assert_eq!(&image.bytes[(random - image.sp) as usize..][..16], &[7; 16]);
            assert_eq!(word(image.sp + 96), at::EXECFN);
            assert_eq!((word(image.sp + 112), word(image.sp + 120)), (at::NULL, 0));
            // argv[0]'s string is the lowest string, the file name the highest.
            assert!(word(image.sp + 8) < word(image.sp + 32));
            assert_eq!(word(image.sp + 104), 0x10000 - 8 - 5);
        }
        let spec = StackSpec {
            endian: Endian::Little,
            top: 0x10000,
            args: &args,
            env: &env,
            execfn: b"prog",
            platform: b"p",
            random: [0; 16],
            aux: &[],
        };
        assert!(build(&spec, 64).is_none());
    }
}

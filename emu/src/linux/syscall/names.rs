//! Names of system calls the emulator knows of but does not implement, so
//! an unknown call is reported by name (`socket (41)`), not as a bare number.
//! Numbers from the kernel's tables: `arch/x86/entry/syscalls/syscall_64.tbl`,
//! `include/uapi/asm-generic/unistd.h` (AArch64), `arch/s390/kernel/syscalls/syscall.tbl`.

use crate::machine::arch::Arch;

/// "Not on this architecture."
pub(crate) const NO: u16 = u16::MAX;

/// A call's number on `arch` from its row of numbers (x86-64, AArch64,
/// s390x); `None` where the call does not exist there.
pub(crate) fn on(nrs: [u16; 3], arch: Arch) -> Option<u64> {
    let nr = nrs[crate::machine::arch::index(arch)];
    (nr != NO).then_some(u64::from(nr))
}

/// Name, numbers on x86-64, AArch64, s390x.
#[rustfmt::skip]
pub(super) static UNIMPLEMENTED: &[(&str, [u16; 3])] = &[
    ("socket", [41, 198, 359]),
    ("connect", [42, 203, 362]),
    ("bind", [49, 200, 361]),
    ("listen", [50, 201, 363]),
    ("accept", [43, 202, NO]),
    ("accept4", [288, 242, 364]),
    ("sendto", [44, 206, 369]),
    ("recvfrom", [45, 207, 371]),
    ("socketpair", [53, 199, 360]),
    ("eventfd2", [290, 19, 323]),
    ("epoll_create1", [291, 20, 327]),
    ("epoll_ctl", [233, 21, 250]),
    ("epoll_pwait", [281, 22, 312]),
    ("timerfd_create", [283, 85, 319]),
    ("signalfd4", [289, 74, 322]),
    ("inotify_init1", [294, 26, 324]),
    ("memfd_create", [319, 279, 350]),
    ("mount", [165, 40, 21]),
    ("chroot", [161, 51, 61]),
    ("flock", [73, 32, 143]),
    ("fsync", [74, 82, 118]),
    ("fdatasync", [75, 83, 148]),
    ("fchmod", [91, 52, 94]),
    ("fchmodat", [268, 53, 299]),
    ("chmod", [90, NO, 15]),
    ("fchown", [93, 55, 207]),
    ("fchownat", [260, 54, 291]),
    ("chown", [92, NO, 212]),
    ("lchown", [94, NO, 198]),
    ("link", [86, NO, 9]),
    ("linkat", [265, 37, 296]),
    ("sendfile", [40, NO, 187]),
    ("copy_file_range", [326, 285, 375]),
    ("splice", [275, 76, 306]),
    ("statfs", [137, NO, 99]),
    ("fstatfs", [138, NO, 100]),
    ("getrusage", [98, 165, 77]),
    ("times", [100, 153, 43]),
    ("getgroups", [115, 158, 205]),
    ("setuid", [105, 146, 213]),
    ("setgid", [106, 144, 214]),
    ("setgroups", [116, 159, 206]),
    ("capget", [125, 90, 184]),
    ("personality", [135, 92, 136]),
    ("mknod", [133, NO, 14]),
    ("mknodat", [259, 33, 290]),
    ("fadvise64", [221, 223, 253]),
    ("fallocate", [285, 47, 314]),
    ("getxattr", [191, 8, 227]),
    ("lgetxattr", [192, 9, 228]),
    ("fgetxattr", [193, 10, 229]),
    ("listxattr", [194, 11, 230]),
    ("getpriority", [140, 141, 96]),
    ("setpriority", [141, 140, 97]),
    ("sched_setaffinity", [203, 122, 239]),
    ("getresuid", [118, 148, 209]),
    ("getresgid", [120, 150, 211]),
    ("alarm", [37, NO, 27]),
    ("rt_sigtimedwait", [128, 137, 177]),
    ("rt_sigqueueinfo", [129, 138, 178]),
    ("sync", [162, 81, 36]),
    ("syncfs", [306, 267, 338]),
    ("close_range", [436, 436, 436]),
    ("openat2", [437, 437, 437]),
    ("getitimer", [36, 102, 105]),
    ("setitimer", [38, 103, 104]),
    ("timer_create", [222, 107, 254]),
];

/// The name of unimplemented call `nr` on `arch`, if it is a known one.
pub(crate) fn unimplemented(arch: Arch, nr: u64) -> Option<&'static str> {
    UNIMPLEMENTED.iter().find(|&&(_, nrs)| on(nrs, arch) == Some(nr)).map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_by_architecture() {
        assert_eq!(unimplemented(Arch::X86_64, 41), Some("socket"));
        assert_eq!(unimplemented(Arch::Aarch64, 198), Some("socket"));
        assert_eq!(unimplemented(Arch::S390x, 359), Some("socket"));
        assert_eq!(unimplemented(Arch::Aarch64, u64::from(NO)), None);
    }
}

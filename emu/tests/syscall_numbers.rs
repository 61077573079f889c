//! The syscall table's numbers against the kernel's own, as installed with
//! the (cross) C library headers: `asm/unistd_64.h` for x86-64 and s390x,
//! `asm-generic/unistd.h` for AArch64 (whose `__NR3264_*` indirection is
//! followed). A missing header skips that architecture.

use emu::Arch;
use std::collections::BTreeMap;

/// `__NR_name` → number, following `#define`s of other macros.
fn numbers(header: &str) -> BTreeMap<String, u64> {
    let mut defines: BTreeMap<&str, &str> = BTreeMap::new();
    for line in header.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#define"), Some(name), Some(value)) = (words.next(), words.next(), words.next()) {
            defines.insert(name, value);
        }
    }
    defines.keys().filter_map(|k| Some((k.strip_prefix("__NR_")?.to_string(), resolve(&defines, k)?))).collect()
}

/// The number macro `name` stands for, through up to four other macros.
fn resolve(defines: &BTreeMap<&str, &str>, name: &str) -> Option<u64> {
    let mut value = name;
    for _ in 0..4 {
        if let Ok(n) = value.parse::<u64>() {
            return Some(n);
        }
        value = defines.get(value)?;
    }
    None
}

#[test]
fn numbers_are_the_kernels() {
    let headers = [
        (Arch::X86_64, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        (Arch::Aarch64, "/usr/aarch64-linux-gnu/include/asm-generic/unistd.h"),
        (Arch::S390x, "/usr/s390x-linux-gnu/include/asm/unistd_64.h"),
    ];
    for (arch, path) in headers {
        let Ok(text) = std::fs::read_to_string(path) else {
            eprintln!("skipping {arch}: no {path}");
            continue;
        };
        let kernel = numbers(&text);
        let mut checked = 0;
        for (name, &nr) in &kernel {
            if let Some(ours) = emu::syscall::number(arch, name) {
                assert_eq!(ours, nr, "{arch}: {name}");
                checked += 1;
            }
            // Nothing else sits at that number (aliases such as fcntl64 on
            // 32-bit ABIs name the same call).
            if let Some(at) = emu::syscall::name(arch, nr) {
                if at != name && !name.ends_with("64") && !name.starts_with("arch_specific") {
                    assert_eq!(kernel.get(at), Some(&nr), "{arch}: {nr} is {name} in the kernel, {at} here");
                }
            }
        }
        assert!(checked > 60, "{arch}: only {checked} calls checked");
    }
}

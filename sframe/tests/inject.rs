//! Injection refuses files it would have to blow up: a rewritten file is
//! never more than a bounded gap larger than the original.
#![cfg(feature = "elf")]

/// The file offset of the first program header of type `p_type` in `bytes`.
fn phdr_offset(bytes: &[u8], p_type: u32) -> usize {
    let elf = goblin::elf::Elf::parse(bytes).expect("an ELF file");
    let i = elf.program_headers.iter().position(|ph| ph.p_type == p_type).expect("no such header");
    elf.header.e_phoff as usize + i * usize::from(elf.header.e_phentsize)
}

#[test]
fn injecting_into_a_file_with_a_huge_alignment_is_refused() {
    // The rewritten file would have been 2^62 bytes long.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin/x86_64/lab-fp");
    let mut bytes = std::fs::read(path).unwrap();
    let at = phdr_offset(&bytes, goblin::elf::program_header::PT_LOAD);
    bytes[at + 48..at + 56].copy_from_slice(&(1u64 << 62).to_le_bytes()); // p_align
    let err = sframe::elf::inject::placement(&bytes).expect_err("placed");
    assert!(err.to_string().contains("more than 0x40000000 bytes past the end"), "{err}");
}

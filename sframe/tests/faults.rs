//! The reader over a source whose reads can fault, as the kernel model reads
//! `.sframe` out of emulated user memory: a fault is an error value naming
//! the offset, never a panic, and the same lookup succeeds once the page is in.

use std::cell::RefCell;
use std::collections::BTreeSet;

use sframe::write::{encode, RawFunction, RawRow, RawSection};
use sframe::{Abi, ByteSource, Error, Fault, Section, Version};

const PAGE: u64 = 64;

/// Bytes in "pages" of 64 bytes, some of them not resident.
struct Paged {
    bytes: Vec<u8>,
    absent: RefCell<BTreeSet<u64>>,
    reads: RefCell<u64>,
}

impl ByteSource for Paged {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        *self.reads.borrow_mut() += 1;
        let last = offset + buf.len() as u64 - 1;
        for page in offset / PAGE..=last / PAGE {
            if self.absent.borrow().contains(&page) {
                return Err(Fault { offset: (page * PAGE).max(offset) });
            }
        }
        self.bytes.as_slice().read_at(offset, buf)
    }
}

fn table() -> Vec<u8> {
    let functions = (0..40u64)
        .map(|i| {
            RawFunction::new(
                0x1000 + i * 0x100,
                0xf0,
                vec![RawRow::new(0, true, &[8]), RawRow::new(1, true, &[16, -16])],
            )
        })
        .collect();
    let t = RawSection {
        version: Version::V3,
        abi: Abi::Amd64,
        flags: 0x5,
        cfa_fixed_fp_offset: 0,
        cfa_fixed_ra_offset: -8,
        functions,
    };
    encode(&t, 0x8000).unwrap()
}

#[test]
fn a_fault_is_an_error_and_the_same_lookup_succeeds_once_resident() {
    let bytes = table();
    let pages = bytes.len() as u64 / PAGE + 1;
    let reference = Section::parse(bytes.as_slice(), 0x8000).unwrap();
    for absent in 0..pages {
        let src = Paged { bytes: bytes.clone(), absent: RefCell::new([absent].into()), reads: RefCell::new(0) };
        let section = match Section::parse(&src, 0x8000) {
            Ok(section) => section,
            Err(err) => {
                // Only the header page can stop parsing, and it says where.
                assert_eq!(absent, 0);
                assert_eq!(err, Error::Fault { offset: 0 });
                continue;
            }
        };
        let mut faults = 0;
        for pc in (0x1000..0x1000 + 40 * 0x100).step_by(0x11) {
            match section.lookup(pc) {
                Ok(found) => assert_eq!(found, reference.lookup(pc).unwrap()),
                Err(Error::Fault { offset }) => {
                    assert_eq!(offset / PAGE, absent, "fault reported outside the absent page");
                    faults += 1;
                }
                Err(other) => panic!("page {absent} absent, pc {pc:#x}: {other}"),
            }
        }
        assert!(faults > 0, "no lookup touched page {absent}");
        // Bring the page in: every lookup now succeeds.
        src.absent.borrow_mut().clear();
        for pc in (0x1000..0x1000 + 40 * 0x100).step_by(0x11) {
            assert_eq!(section.lookup(pc).unwrap(), reference.lookup(pc).unwrap());
        }
    }
}

#[test]
fn a_lookup_reads_logarithmically_many_fdes() {
    let bytes = table();
    let src = Paged { bytes, absent: RefCell::new(BTreeSet::new()), reads: RefCell::new(0) };
    let section = Section::parse(&src, 0x8000).unwrap();
    *src.reads.borrow_mut() = 0;
    section.lookup(0x1000 + 17 * 0x100 + 5).unwrap().unwrap();
    // log2(40) probes of one field, one FDE (3 fields + 3 attribute fields),
    // two rows of a few fields each.
    assert!(*src.reads.borrow() < 30, "{} reads", src.reads.borrow());
}

#[test]
fn indexing_reports_a_fault_and_succeeds_once_resident() {
    let bytes = table();
    let reference = Section::parse(bytes.as_slice(), 0x8000).unwrap();
    // The second page holds FDEs: building the index reads every FDE.
    let src = Paged { bytes: bytes.clone(), absent: RefCell::new([1].into()), reads: RefCell::new(0) };
    let section = Section::parse(&src, 0x8000).unwrap();
    let Err(err) = section.clone().indexed() else { panic!("indexing read through an absent page") };
    assert_eq!(err, Error::Fault { offset: PAGE });
    src.absent.borrow_mut().clear();
    let indexed = section.indexed().unwrap();
    for pc in (0x0f00..0x1000 + 40 * 0x100 + 0x100).step_by(0x7) {
        assert_eq!(indexed.lookup(pc).unwrap(), reference.lookup(pc).unwrap(), "pc {pc:#x}");
    }
}

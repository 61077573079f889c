//! brk, mmap (anonymous and of files), munmap, mprotect, mremap, madvise.

use crate::linux::abi::errno::{EACCES, EEXIST, EFAULT, EINVAL, ENODEV, ENOMEM, EOVERFLOW};
use crate::linux::abi::outcome::{fail, ok, SysError, SysResult};
use crate::linux::abi::{
    MADV_DONTNEED, MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_PRIVATE, MAP_TYPE, MREMAP_MAYMOVE, O_ACCMODE,
    O_RDWR, O_WRONLY, PROT_WRITE,
};
use crate::linux::emulator::Emulator;
use crate::linux::fs::{FileKind, Synth};
use crate::linux::layout::{MMAP_FLOOR, MMAP_TOP, USER_TOP};
use crate::machine::memory::{page_up, Area, AreaKind, Perms, PAGE_SIZE};
use crate::machine::objects::{Backing, MappedFile};
use std::rc::Rc;

/// A page-aligned, non-empty range inside the user address space.
fn user_range(addr: u64, len: u64) -> Option<(u64, u64)> {
    let len = page_up(len).filter(|&len| len > 0)?;
    let end = addr.checked_add(len).filter(|&end| end <= USER_TOP)?;
    addr.is_multiple_of(PAGE_SIZE).then_some((addr, end))
}

pub(super) fn brk(emu: &mut Emulator, [addr, ..]: [u64; 6]) -> SysResult {
    // Linux answers the current break for anything it cannot do.
    if addr < emu.brk_start {
        return ok(emu.brk);
    }
    let (Some(old_end), Some(new_end)) = (page_up(emu.brk), page_up(addr)) else { return ok(emu.brk) };
    if new_end > old_end {
        if new_end > MMAP_TOP || !emu.pages().is_free(old_end, new_end) || !emu.may_expand(new_end - old_end, "brk") {
            return ok(emu.brk);
        }
        if old_end == emu.brk_start {
            emu.map(Area { start: old_end, end: new_end, perms: Perms::RW, kind: AreaKind::Heap })?;
        } else if !emu.grow(old_end, new_end)? {
            // The heap's top page was unmapped behind brk's back.
            return ok(emu.brk);
        }
    } else if new_end < old_end {
        emu.unmap(new_end, old_end)?;
    }
    emu.brk = addr;
    ok(addr)
}

/// The file `fd` names, as a mapping of it with `prot` and `flags` sees it
/// (`EBADF`, `EACCES`, `ENODEV` as Linux's `do_mmap`). `None`: `/dev/zero`,
/// which maps as anonymous memory.
fn file_to_map(emu: &mut Emulator, fd: u64, prot: u64, flags: u64) -> Result<Option<Rc<MappedFile>>, SysError> {
    let file = super::io::file(emu, fd)?;
    let f = file.borrow();
    let acc = f.flags & O_ACCMODE;
    let shared = flags & MAP_TYPE != MAP_PRIVATE;
    if acc == O_WRONLY || (shared && prot & PROT_WRITE != 0 && acc != O_RDWR) {
        return Err(SysError::Errno(EACCES));
    }
    // Only these can be mapped; their contents are taken below, once the
    // cache has been asked (an overlay file is copied only on a miss).
    match &f.kind {
        FileKind::Host(..) | FileKind::Overlay(_) => {}
        FileKind::Device(Synth::Zero) => return Ok(None),
        _ => return Err(SysError::Errno(ENODEV)),
    }
    if shared && prot & PROT_WRITE != 0 {
        // Stores would have to reach the file and every other mapping of it.
        emu.warn(format!(
            "shared writable mmap of {} refused: written file mappings are not supported",
            String::from_utf8_lossy(&f.path)
        ));
        return Err(SysError::Errno(ENODEV));
    }
    let stat = super::fs::fd_stat(emu, fd)?;
    let key = (f.path.clone(), stat.dev, stat.ino, stat.size, stat.mtime_ns);
    let same = |known: &MappedFile| match &f.kind {
        FileKind::Host(data, _) => Rc::ptr_eq(&known.bytes, data) || known.bytes[..] == data[..],
        FileKind::Overlay(node) => known.bytes[..] == node.borrow().data[..],
        _ => false,
    };
    if let Some(known) = emu.mapped_files.get(&key).filter(|known| same(known)) {
        return Ok(Some(known.clone()));
    }
    let bytes: Rc<[u8]> = match &f.kind {
        FileKind::Host(data, _) => data.clone(),
        FileKind::Overlay(node) => Rc::from(node.borrow().data.as_slice()),
        _ => return Err(SysError::Errno(ENODEV)),
    };
    let mapped = Rc::new(MappedFile::new(f.path.clone(), stat.dev, stat.ino, bytes));
    emu.mapped_files.insert(key, mapped.clone());
    Ok(Some(mapped))
}

pub(super) fn mmap(emu: &mut Emulator, [addr, len, prot, flags, fd, offset]: [u64; 6]) -> SysResult {
    let file = if flags & MAP_ANONYMOUS == 0 {
        if offset % PAGE_SIZE != 0 {
            return fail(EINVAL);
        }
        file_to_map(emu, fd, prot, flags)?
    } else {
        None
    };
    let Some(len) = page_up(len).filter(|&len| len > 0) else { return fail(EINVAL) };
    if file.is_some() && offset.checked_add(len).is_none() {
        return fail(EOVERFLOW);
    }
    let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
        let Some((start, end)) = user_range(addr, len) else { return fail(EINVAL) };
        if flags & MAP_FIXED == 0 && !emu.pages().is_free(start, end) {
            return fail(EEXIST);
        }
        start
    } else {
        let hint = user_range(addr, len).filter(|&(start, end)| start >= MMAP_FLOOR && emu.pages().is_free(start, end));
        match hint.map(|(start, _)| start).or_else(|| emu.pages().find_free(len, MMAP_FLOOR, MMAP_TOP)) {
            Some(start) => start,
            None => return fail(ENOMEM),
        }
    };
    // A MAP_FIXED over mapped pages counts in full: the bound is approximate there.
    if !emu.may_expand(len, "mmap") {
        return fail(ENOMEM);
    }
    let perms = Perms::from_prot(prot);
    let kind = file.map_or(AreaKind::Anonymous, |file| AreaKind::File(Backing { file, offset }));
    // Objects come and go only with file mappings (a new one, or one a
    // MAP_FIXED replaces); malloc's anonymous mmaps skip the comparison.
    let watch = matches!(kind, AreaKind::File(_)) || maps_file(emu, start, start + len);
    let before = if watch { emu.objects() } else { Vec::new() };
    map_with_contents(emu, Area { start, end: start + len, perms, kind })?;
    if watch {
        emu.report_objects(before);
    }
    ok(start)
}

/// Whether any file is mapped in `start..end`.
fn maps_file(emu: &Emulator, start: u64, end: u64) -> bool {
    emu.pages().areas().any(|a| a.start < end && start < a.end && matches!(a.kind, AreaKind::File(_)))
}

/// Maps `area`; a file's part gets the file's bytes, not yet touched (pages
/// past its end read as zeros here; Linux would raise SIGBUS).
fn map_with_contents(emu: &mut Emulator, area: Area) -> Result<(), SysError> {
    let file = match &area.kind {
        AreaKind::File(backing) => Some((backing.file.bytes.clone(), backing.offset)),
        _ => None,
    };
    let (start, len) = (area.start, area.end - area.start);
    emu.map(area)?;
    if let Some((bytes, offset)) = file {
        let from = (offset as usize).min(bytes.len());
        let to = (offset.saturating_add(len) as usize).min(bytes.len());
        emu.uc.mem_write(start, &bytes[from..to]).map_err(emu.engine_error("map a file"))?;
    }
    Ok(())
}

pub(super) fn munmap(emu: &mut Emulator, [addr, len, ..]: [u64; 6]) -> SysResult {
    let Some((start, end)) = user_range(addr, len) else { return fail(EINVAL) };
    if !maps_file(emu, start, end) {
        emu.unmap(start, end)?;
        return ok(0);
    }
    let before = emu.objects();
    emu.unmap(start, end)?;
    emu.report_objects(before);
    ok(0)
}

pub(super) fn mprotect(emu: &mut Emulator, [addr, len, prot, ..]: [u64; 6]) -> SysResult {
    if len == 0 && addr % PAGE_SIZE == 0 {
        return ok(0);
    }
    let Some((start, end)) = user_range(addr, len) else { return fail(EINVAL) };
    if emu.protect(start, end, Perms::from_prot(prot))? {
        ok(0)
    } else {
        fail(ENOMEM)
    }
}

pub(super) fn mremap(emu: &mut Emulator, [old, old_len, new_len, flags, ..]: [u64; 6]) -> SysResult {
    if flags & !MREMAP_MAYMOVE != 0 {
        emu.warn(format!("mremap flags {flags:#x} not supported"));
        return fail(EINVAL);
    }
    let Some((old, old_end)) = user_range(old, old_len) else { return fail(EINVAL) };
    let Some(new_len) = page_up(new_len).filter(|&len| len > 0) else { return fail(EINVAL) };
    let Some(area) = emu.pages().area(old).cloned() else { return fail(EFAULT) };
    if !emu.pages().is_covered(old, old_end) {
        return fail(EFAULT);
    }
    let old_len = old_end - old;
    if new_len <= old_len {
        emu.unmap(old + new_len, old_end)?;
        return ok(old);
    }
    if !emu.may_expand(new_len - old_len, "mremap") {
        return fail(ENOMEM);
    }
    let grown_end = old.checked_add(new_len).filter(|&end| end <= MMAP_TOP);
    if let Some(end) = grown_end.filter(|&end| emu.pages().is_free(old_end, end)) {
        let kind = area.kind_at(old_end);
        map_with_contents(emu, Area { start: old_end, end, perms: area.perms, kind })?;
        return ok(old);
    }
    if flags & MREMAP_MAYMOVE == 0 {
        return fail(ENOMEM);
    }
    let Some(new) = emu.pages().find_free(new_len, MMAP_FLOOR, MMAP_TOP) else { return fail(ENOMEM) };
    let kind = area.kind_at(old);
    let file_backed = matches!(kind, AreaKind::File(_));
    let before = emu.objects();
    // A file's bytes first (the grown tail keeps them), then the old
    // contents page by page; a page keeps its residency.
    map_with_contents(emu, Area { start: new, end: new + new_len, perms: area.perms, kind })?;
    for offset in (0..old_len).step_by(PAGE_SIZE as usize) {
        let mut page = vec![0u8; PAGE_SIZE as usize];
        let resident = emu.pages().is_resident(old + offset);
        // (A file page zeroed by the guest must stay zero, not revert to the file.)
        if emu.uc.mem_read(old + offset, &mut page).is_ok() && (file_backed || page.iter().any(|&b| b != 0)) {
            let _ = emu.uc.mem_write(new + offset, &page);
        }
        if resident {
            emu.pages_mut().mark_resident(new + offset, PAGE_SIZE);
        }
    }
    emu.unmap(old, old_end)?;
    emu.report_objects(before);
    ok(new)
}

pub(super) fn madvise(emu: &mut Emulator, [addr, len, advice, ..]: [u64; 6]) -> SysResult {
    if advice != MADV_DONTNEED || len == 0 {
        return ok(0);
    }
    let Some((start, end)) = user_range(addr, len) else { return fail(EINVAL) };
    if !emu.pages().is_covered(start, end) {
        return fail(ENOMEM);
    }
    // Private anonymous pages read back as zeros after MADV_DONTNEED and are no
    // longer resident: give them fresh physical memory. File pages would revert
    // to the file; glibc never gives the program's own pages this advice, so
    // they are left alone.
    let pieces: Vec<(u64, u64)> = emu
        .pages()
        .areas()
        .filter(|area| area.end > start && area.start < end && !matches!(area.kind, AreaKind::File(_)))
        .map(|area| (area.start.max(start), area.end.min(end)))
        .collect();
    for (s, e) in pieces {
        crate::machine::ram::unmap(&mut emu.uc, s, e).map_err(emu.engine_error("clear memory"))?;
        crate::machine::ram::map(&mut emu.uc, s, e).map_err(emu.engine_error("clear memory"))?;
        emu.pages_mut().forget(s, e);
    }
    emu.flush_tlb()?;
    ok(0)
}

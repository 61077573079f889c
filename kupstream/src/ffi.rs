//! Loading the built harness, one private copy per kernel (the two files'
//! static state — the callbacks list, `unwind_mask`, the per-CPU counters —
//! is then that kernel's alone), calling its entry points, and answering
//! its calls back with the model ([`Host`]).
//!
//! Safety: the harness is the only C code called; every entry point runs
//! the kernel's code on the calling thread (and on the harness's
//! other-CPU threads, which run only while the caller waits), with a
//! context pointer to a [`Ctx`] on the caller's stack that the calls back
//! use and that outlives the call. A Rust panic in a call back is caught
//! before it reaches C and resumed when the entry point returns.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use kmodel::backend::{BackendEvent, DeferredBackend, Host, InfoView, Site, TaskView, WorksView};
use kmodel::types::{Tid, WorkId, INIT_WAITING};
use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};

use crate::error::Error;
use crate::tree::KernelTree;

/// The harness's entry points' ABI (`H_ABI` in harness.c).
const ABI: c_int = 1;
/// `H_MAX_WORKS`: the harness's table of works.
const MAX_WORKS: usize = 256;
/// `H_INIT_WAITING`: an init or cancel on another CPU waits.
const H_INIT_WAITING: c_int = 1 << 30;

/// `struct h_site`.
#[repr(C)]
struct HSite {
    file: *const c_char,
    line: c_int,
    func: *const c_char,
    op: *const c_char,
}

/// `struct h_ops`: the model's answers.
#[repr(C)]
struct HOps {
    point: extern "C" fn(*mut c_void, *const HSite),
    read_user: extern "C" fn(*mut c_void, c_ulong, *mut c_void, c_ulong) -> c_int,
    work_add: extern "C" fn(*mut c_void, c_long, c_int) -> c_int,
    work_cancel: extern "C" fn(*mut c_void, c_long) -> c_int,
    callback: extern "C" fn(*mut c_void, c_int, c_long, *const c_ulong, c_uint, u64),
    walk: extern "C" fn(*mut c_void, c_long, *mut c_ulong, c_uint) -> c_long,
    walked: extern "C" fn(*mut c_void, c_long, *const c_ulong, c_uint),
}

/// `struct h_info`.
#[repr(C)]
struct HInfo {
    mask: c_ulong,
    id: u64,
    has_cache: c_int,
    completed: c_ulong,
    nr_entries: c_uint,
    entries: *const c_ulong,
}

/// `struct h_event`.
#[repr(C)]
#[derive(Clone, Copy)]
struct HEvent {
    kind: c_int,
    site: *const HSite,
    what: *const c_char,
    work: c_int,
    ret: c_int,
    cpu: c_int,
    tid: c_long,
}

type Task = *mut c_void;

/// The entry points, resolved once per instance.
struct Fns {
    setup: unsafe extern "C" fn(*const HOps),
    crash: unsafe extern "C" fn() -> *const c_char,
    task_new: unsafe extern "C" fn(c_long) -> Task,
    task_set: unsafe extern "C" fn(Task, c_uint, c_int, c_int, c_int, c_int, c_ulong, c_ulong, c_ulong, c_int),
    task_info: unsafe extern "C" fn(Task, *mut HInfo),
    other: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int) -> c_int,
    request: unsafe extern "C" fn(*mut c_void, Task, c_int, c_int, c_int, *mut u64) -> c_int,
    task_work: unsafe extern "C" fn(*mut c_void, Task, c_int),
    reset_info: unsafe extern "C" fn(*mut c_void, Task, c_int),
    task_exit: unsafe extern "C" fn(*mut c_void, Task, c_int),
    work_bit: unsafe extern "C" fn(c_int) -> c_int,
    work_listed: unsafe extern "C" fn(c_int) -> c_int,
    global_mask: unsafe extern "C" fn() -> c_ulong,
    ctx_ctr: unsafe extern "C" fn(c_int) -> std::os::raw::c_uint,
    srcu_readers: unsafe extern "C" fn() -> c_int,
    callbacks: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    take_events: unsafe extern "C" fn(*mut HEvent, c_int, *mut c_int) -> c_int,
    others_waiting: unsafe extern "C" fn() -> c_int,
    release_all: unsafe extern "C" fn(),
    max_works: unsafe extern "C" fn() -> c_int,
}

/// The kernel's own `deferred.c` and `user.c`, one loaded instance: the
/// backend of one [`kmodel::kernel::Kernel`].
pub struct Upstream {
    name: String,
    /// Path prefixes to strip from sites' files (the tree, the staging
    /// directory).
    prefixes: Vec<String>,
    fns: Fns,
    tasks: Mutex<BTreeMap<Tid, usize>>,
    sites: Mutex<BTreeMap<usize, Site>>,
    last_site: Mutex<Option<Site>>,
    max_works: usize,
    /// Referenced by the harness's `ops` for as long as it is loaded.
    _ops: Box<HOps>,
    /// Dropped last.
    lib: Option<Library>,
}

// The instance's C state is reached only through `&self` calls made by the
// one thread driving its kernel at a time (a `Kernel` is used by one thread;
// the harness's own other-CPU threads run only while that thread waits in
// the harness), so sharing the handle is sound.
unsafe impl Send for Upstream {}
unsafe impl Sync for Upstream {}

/// The fault catcher, loaded once per process and never unloaded (its
/// handler stays installed).
static FAULT: OnceLock<Result<(), String>> = OnceLock::new();
/// One build at a time in this process (the staging directory is per
/// process).
static BUILD: Mutex<()> = Mutex::new(());
/// Instances loaded so far (their private copies' names).
static INSTANCES: AtomicU64 = AtomicU64::new(0);

impl Upstream {
    /// Builds (if the cache lacks it) and loads a fresh instance of `tree`'s
    /// code.
    pub fn load(tree: &KernelTree, nmi_safe_cmpxchg: bool) -> Result<Self, Error> {
        let fault = FAULT.get_or_init(|| {
            let _build = BUILD.lock().unwrap_or_else(|e| e.into_inner());
            let path = crate::compile::fault_object().map_err(|e| e.to_string())?;
            // SAFETY: fault.so's constructor installs its signal handlers;
            // it is never unloaded, so they stay valid.
            let lib = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
            std::mem::forget(lib);
            Ok(())
        });
        if let Err(problem) = fault {
            return Err(Error::Load { tree: "the fault catcher".into(), problem: problem.clone() });
        }
        let built = {
            let _build = BUILD.lock().unwrap_or_else(|e| e.into_inner());
            crate::compile::harness_object(tree, nmi_safe_cmpxchg)?
        };
        let lib = private_copy(&built).map_err(|problem| Error::Load { tree: tree.name.clone(), problem })?;
        let fns = resolve(&lib).map_err(|problem| Error::Load { tree: tree.name.clone(), problem })?;
        let ops = Box::new(HOps {
            point: cb_point,
            read_user: cb_read_user,
            work_add: cb_work_add,
            work_cancel: cb_work_cancel,
            callback: cb_callback,
            walk: cb_walk,
            walked: cb_walked,
        });
        // SAFETY: `ops` lives as long as the library (dropped before it).
        unsafe { (fns.setup)(&*ops) };
        let max_works = unsafe { (fns.max_works)() } as usize;
        let root = tree.root.canonicalize().unwrap_or_else(|_| tree.root.clone());
        Ok(Upstream {
            name: format!("kernel/unwind/ of {}, built against unwindlab's shim", tree.name),
            prefixes: vec![format!("{}/", root.display()), format!("{}/", tree.root.display())],
            fns,
            tasks: Mutex::new(BTreeMap::new()),
            sites: Mutex::new(BTreeMap::new()),
            last_site: Mutex::new(None),
            max_works,
            _ops: ops,
            lib: Some(lib),
        })
    }

    /// The task's C `task_struct` (created on first use).
    fn task(&self, tid: Tid) -> Task {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        *tasks.entry(tid).or_insert_with(|| unsafe { (self.fns.task_new)(tid as c_long) } as usize) as Task
    }

    /// The site behind a C `struct h_site` pointer, interned.
    fn site(&self, p: *const HSite) -> Site {
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        *sites.entry(p as usize).or_insert_with(|| {
            // SAFETY: the harness passes static `struct h_site`s.
            let s = unsafe { &*p };
            let mut file = cstr(s.file);
            for prefix in &self.prefixes {
                if let Some(rest) = file.strip_prefix(prefix.as_str()) {
                    file = rest.to_string();
                }
            }
            Site {
                file: intern(&file),
                line: s.line.max(0) as u32,
                func: intern(&cstr(s.func)),
                op: intern(&cstr(s.op)),
            }
        })
    }

    /// Calls an entry point with `host` answering its calls back; resumes a
    /// panic of theirs.
    fn enter<R>(&self, host: &mut dyn Host, f: impl FnOnce(*mut c_void) -> R) -> R {
        let mut ctx = Ctx { host, up: self, panic: None };
        let r = f(&mut ctx as *mut Ctx as *mut c_void);
        if let Some(p) = ctx.panic.take() {
            resume_unwind(p);
        }
        r
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // SAFETY: no call is in progress (we are dropped).
        unsafe {
            if (self.fns.others_waiting)() > 0 {
                // A call on another CPU still waits on one of the harness's
                // threads, whose code must stay mapped.
                std::mem::forget(self.lib.take());
            } else {
                (self.fns.release_all)();
            }
        }
    }
}

/// Loads a private copy of the built object, so that its static state is
/// this instance's alone (the dynamic loader shares one object per path).
fn private_copy(built: &Path) -> Result<Library, String> {
    let dir = crate::compile::harness_cache().join("instances");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
    let copy = dir.join(format!("{}-{n}.so", std::process::id()));
    std::fs::copy(built, &copy).map_err(|e| format!("copy to {}: {e}", copy.display()))?;
    // SAFETY: the harness has no constructors; loading it runs nothing.
    let lib = unsafe { Library::open(Some(&copy), RTLD_NOW | RTLD_LOCAL) };
    let _ = std::fs::remove_file(&copy);
    lib.map_err(|e| e.to_string())
}

/// The entry points of `lib`, after checking its ABI.
fn resolve(lib: &Library) -> Result<Fns, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the types are those of harness.c's definitions.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
        };
    }
    let abi: unsafe extern "C" fn() -> c_int = sym!("unwindlab_abi");
    let found = unsafe { abi() };
    if found != ABI {
        return Err(format!("harness ABI {found}, this lab needs {ABI}"));
    }
    Ok(Fns {
        setup: sym!("unwindlab_setup"),
        crash: sym!("unwindlab_crash"),
        task_new: sym!("unwindlab_task_new"),
        task_set: sym!("unwindlab_task_set"),
        task_info: sym!("unwindlab_task_info"),
        other: sym!("unwindlab_other"),
        request: sym!("unwindlab_request"),
        task_work: sym!("unwindlab_task_work"),
        reset_info: sym!("unwindlab_reset_info"),
        task_exit: sym!("unwindlab_task_exit"),
        work_bit: sym!("unwindlab_work_bit"),
        work_listed: sym!("unwindlab_work_listed"),
        global_mask: sym!("unwindlab_global_mask"),
        ctx_ctr: sym!("unwindlab_ctx_ctr"),
        srcu_readers: sym!("unwindlab_srcu_readers"),
        callbacks: sym!("unwindlab_callbacks"),
        take_events: sym!("unwindlab_take_events"),
        others_waiting: sym!("unwindlab_others_waiting"),
        release_all: sym!("unwindlab_release_all"),
        max_works: sym!("unwindlab_max_works"),
    })
}

/// A C string as Rust text (lossy; empty for NULL).
fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the harness passes NUL-terminated static strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// One `'static` copy of each distinct text (sites outlive an instance).
fn intern(s: &str) -> &'static str {
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&t) = texts.get(s) {
        return t;
    }
    let t: &'static str = Box::leak(s.to_string().into_boxed_str());
    texts.insert(t);
    t
}

/// One call's context: the model answering, and a panic of one of its
/// answers, held until the call returns.
struct Ctx<'h> {
    host: &'h mut dyn Host,
    up: &'h Upstream,
    panic: Option<Box<dyn Any + Send>>,
}

/// Runs `f` on the call's context; a panic is kept for the entry point's
/// return, and every later call back of the same call does nothing.
fn with_ctx<R: Default>(ctx: *mut c_void, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
    // SAFETY: `ctx` is the `Ctx` of the call in progress (see `enter`).
    let c = unsafe { &mut *(ctx as *mut Ctx<'_>) };
    if c.panic.is_some() {
        return R::default();
    }
    match catch_unwind(AssertUnwindSafe(|| f(&mut *c))) {
        Ok(r) => r,
        Err(p) => {
            c.panic = Some(p);
            R::default()
        }
    }
}

extern "C" fn cb_point(ctx: *mut c_void, site: *const HSite) {
    with_ctx(ctx, |c| {
        let site = c.up.site(site);
        *c.up.last_site.lock().unwrap_or_else(|e| e.into_inner()) = Some(site);
        c.host.point(site);
    })
}

extern "C" fn cb_read_user(ctx: *mut c_void, addr: c_ulong, dst: *mut c_void, size: c_ulong) -> c_int {
    with_ctx(ctx, |c| {
        // SAFETY: `dst` has room for `size` bytes (a get_user() target).
        let buf = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, size as usize) };
        if c.host.read_user(addr, buf) {
            0
        } else {
            -14
        }
    })
}

extern "C" fn cb_work_add(ctx: *mut c_void, tid: c_long, mode: c_int) -> c_int {
    // enum task_work_notify_mode: TWA_NMI_CURRENT is 4.
    with_ctx(ctx, |c| c.host.task_work_add(tid as Tid, mode & 0xff == 4))
}

extern "C" fn cb_work_cancel(ctx: *mut c_void, tid: c_long) -> c_int {
    with_ctx(ctx, |c| c_int::from(c.host.task_work_cancel(tid as Tid)))
}

extern "C" fn cb_callback(
    ctx: *mut c_void,
    work: c_int,
    tid: c_long,
    entries: *const c_ulong,
    nr: c_uint,
    cookie: u64,
) {
    with_ctx(ctx, |c| {
        let trace: &[u64] = if entries.is_null() || nr == 0 {
            &[]
        } else {
            // SAFETY: the trace's `nr` entries.
            unsafe { std::slice::from_raw_parts(entries, nr as usize) }
        };
        c.host.callback(WorkId(work.max(0) as usize), tid as Tid, cookie, trace);
    })
}

extern "C" fn cb_walk(ctx: *mut c_void, tid: c_long, entries: *mut c_ulong, max: c_uint) -> c_long {
    with_ctx(ctx, |c| match c.host.walk(tid as Tid, max as usize) {
        None => -1,
        Some(found) => {
            let n = found.len().min(max as usize);
            // SAFETY: the cache has room for `max` entries.
            let out = unsafe { std::slice::from_raw_parts_mut(entries, max as usize) };
            out[..n].copy_from_slice(&found[..n]);
            n as c_long
        }
    })
}

extern "C" fn cb_walked(ctx: *mut c_void, tid: c_long, entries: *const c_ulong, nr: c_uint) {
    with_ctx(ctx, |c| {
        let trace: &[u64] = if entries.is_null() || nr == 0 {
            &[]
        } else {
            // SAFETY: the trace's `nr` entries.
            unsafe { std::slice::from_raw_parts(entries, nr as usize) }
        };
        c.host.walked(tid as Tid, trace);
    })
}

impl DeferredBackend for Upstream {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn task_new(&self, tid: Tid) {
        let _ = self.task(tid);
    }

    fn set_task(&self, tid: Tid, v: &TaskView) {
        let flags = if v.kthread { 0x0020_0000 } else { 0 } | if v.exiting { 0x4 } else { 0 };
        let t = self.task(tid);
        // SAFETY: a task of this instance.
        unsafe {
            (self.fns.task_set)(
                t,
                flags,
                c_int::from(v.has_mm),
                c_int::from(v.user_mode),
                c_int::from(v.compat),
                c_int::from(v.vm86),
                v.ip,
                v.sp,
                v.fp,
                c_int::from(v.uprobe_at_entry),
            )
        };
    }

    fn init(&self, host: &mut dyn Host, work: WorkId, cpu: usize) -> i32 {
        if work.0 >= self.max_works {
            return -12; // the harness's table of works is full: -ENOMEM
        }
        let ret = self.enter(host, |ctx| unsafe { (self.fns.other)(ctx, 2, work.0 as c_int, cpu as c_int) });
        if ret == H_INIT_WAITING {
            INIT_WAITING
        } else {
            ret
        }
    }

    fn cancel(&self, host: &mut dyn Host, work: WorkId, cpu: usize) -> bool {
        if work.0 >= self.max_works {
            return true;
        }
        let ret = self.enter(host, |ctx| unsafe { (self.fns.other)(ctx, 3, work.0 as c_int, cpu as c_int) });
        ret != H_INIT_WAITING
    }

    fn request(&self, host: &mut dyn Host, tid: Tid, cpu: usize, in_nmi: bool, work: WorkId) -> (i32, u64) {
        if work.0 >= self.max_works {
            return (-22, 0);
        }
        let t = self.task(tid);
        let mut cookie = 0u64;
        let ret = self.enter(host, |ctx| unsafe {
            (self.fns.request)(ctx, t, cpu as c_int, c_int::from(in_nmi), work.0 as c_int, &mut cookie)
        });
        (ret, cookie)
    }

    fn task_work(&self, host: &mut dyn Host, tid: Tid, cpu: usize) {
        let t = self.task(tid);
        self.enter(host, |ctx| unsafe { (self.fns.task_work)(ctx, t, cpu as c_int) });
    }

    fn reset_info(&self, host: &mut dyn Host, tid: Tid, cpu: usize) {
        let t = self.task(tid);
        self.enter(host, |ctx| unsafe { (self.fns.reset_info)(ctx, t, cpu as c_int) });
    }

    fn task_exit(&self, host: &mut dyn Host, tid: Tid, cpu: usize) {
        let t = self.task(tid);
        self.enter(host, |ctx| unsafe { (self.fns.task_exit)(ctx, t, cpu as c_int) });
    }

    fn info(&self, tid: Tid) -> InfoView {
        let t = self.task(tid);
        let mut h = HInfo { mask: 0, id: 0, has_cache: 0, completed: 0, nr_entries: 0, entries: std::ptr::null() };
        // SAFETY: a task of this instance; `entries` has `nr_entries` entries.
        unsafe { (self.fns.task_info)(t, &mut h) };
        let cache = (h.has_cache != 0).then(|| {
            let entries = if h.entries.is_null() || h.nr_entries == 0 {
                Vec::new()
            } else {
                unsafe { std::slice::from_raw_parts(h.entries, h.nr_entries as usize) }.to_vec()
            };
            (h.completed, entries)
        });
        InfoView { mask: h.mask, id: h.id, cache }
    }

    fn works(&self, works: usize, cpus: usize) -> WorksView {
        let n = works.min(self.max_works);
        // SAFETY: plain reads of the instance's state.
        unsafe {
            let works =
                (0..n).map(|w| ((self.fns.work_bit)(w as c_int), (self.fns.work_listed)(w as c_int) != 0)).collect();
            // Mirrored after every call: the list on the stack (the harness
            // has at most MAX_WORKS works).
            let mut list = [0 as c_int; MAX_WORKS];
            let room = list.len().min(self.max_works);
            let len = (self.fns.callbacks)(list.as_mut_ptr(), room as c_int).clamp(0, room as c_int) as usize;
            let callbacks = list[..len].iter().map(|&w| WorkId(w as usize)).collect();
            let ctx_ctr = (0..cpus).map(|c| (self.fns.ctx_ctr)(c as c_int)).collect();
            let srcu_readers = u32::try_from((self.fns.srcu_readers)()).unwrap_or(0);
            WorksView { works, global_mask: (self.fns.global_mask)(), callbacks, ctx_ctr, srcu_readers }
        }
    }

    fn take_events(&self) -> Vec<BackendEvent> {
        // Taken after every call: a buffer on the stack, not the heap.
        let empty = HEvent { kind: 0, site: std::ptr::null(), what: std::ptr::null(), work: 0, ret: 0, cpu: 0, tid: 0 };
        let mut buf = [empty; 64];
        let mut out = Vec::new();
        loop {
            let mut lost = 0;
            // SAFETY: room for `buf.len()` events.
            let n = unsafe { (self.fns.take_events)(buf.as_mut_ptr(), buf.len() as c_int, &mut lost) }.max(0) as usize;
            for e in &buf[..n] {
                out.push(match e.kind {
                    1 => BackendEvent::Warn {
                        site: self.site(e.site),
                        what: cstr(e.what),
                        cpu: e.cpu.max(0) as usize,
                        tid: e.tid.max(0) as Tid,
                    },
                    2 => BackendEvent::InitReturned { work: WorkId(e.work.max(0) as usize), ret: e.ret },
                    _ => BackendEvent::CancelReturned { work: WorkId(e.work.max(0) as usize) },
                });
            }
            if n < buf.len() {
                break;
            }
        }
        out
    }

    fn failure(&self) -> Option<String> {
        // SAFETY: a static string of the instance, or NULL.
        let p = unsafe { (self.fns.crash)() };
        if p.is_null() {
            return None;
        }
        let last = self.last_site.lock().unwrap_or_else(|e| e.into_inner());
        let near = last.map(|s| format!("; the last primitive it reached: {s}")).unwrap_or_default();
        Some(format!("the kernel's code ({}) faulted: {}{near}", self.name, cstr(p)))
    }
}

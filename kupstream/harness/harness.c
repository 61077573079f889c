/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unwindlab's harness around the kernel's own kernel/unwind/user.c and
 * deferred.c, built with the host compiler against shim.h (the way
 * tools/testing/vma/ builds mm/vma.c) and loaded into the lab, which
 * drives it through the unwindlab_* entry points below and answers its
 * calls to the rest of the kernel through struct h_ops.
 *
 * Both files are included here, so that their static state (the callbacks
 * list, unwind_mask, the per-CPU counters) belongs to this one object: the
 * lab loads a private copy of it per kernel it runs.
 *
 * Other CPUs: unwind_deferred_init() and unwind_deferred_cancel() run on a
 * host thread of their own, standing for another CPU, so that they can
 * block in mutex_lock() or synchronize_srcu() exactly where the kernel
 * would; exactly one thread runs the kernel's code at any time (the other
 * waits for its turn), so every run is deterministic.
 */
#include "shim.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

/* ---- the lab's side ---- */

/* The lab's answers to what the two files ask of the rest of the kernel. */
struct h_ops {
	/* A preemption point: the lab's explorer may act here. */
	void (*point)(void *ctx, const struct h_site *site);
	/* get_user(): 0, or -EFAULT. */
	int (*read_user)(void *ctx, unsigned long addr, void *dst, unsigned long size);
	/* task_work_add(): the lab's task_work list and notification. */
	int (*work_add)(void *ctx, long tid, int mode);
	/* task_work_cancel(): true if it was queued. */
	int (*work_cancel)(void *ctx, long tid);
	/* A tracer's work->func(). */
	void (*callback)(void *ctx, int work, long tid, const unsigned long *entries, unsigned int nr, u64 cookie);
	/*
	 * The user walk when the lab's own unwinder stands in for user.c (a
	 * proposal: SFrame, arm64, s390x): the number of entries, or -1 to
	 * let user.c walk.
	 */
	long (*walk)(void *ctx, long tid, unsigned long *entries, unsigned int max);
	/* user.c walked: what it found. */
	void (*walked)(void *ctx, long tid, const unsigned long *entries, unsigned int nr);
};

#define H_ABI 1
#define H_MAX_WORKS 256
#define H_INIT_WAITING (1 << 30)

static const struct h_ops *ops;

/* What the thread running the kernel's code stands for now. */
struct h_state {
	void *ctx;
	struct task_struct *cur;
	int cpu;
	bool nmi;
	int irqs_off;
};
static __thread struct h_state H;

/* Things the lab reads after each call (warnings, other CPUs' returns). */
struct h_event {
	int kind; /* 1 WARN, 2 init returned, 3 cancel returned */
	const struct h_site *site;
	const char *what;
	int work;
	int ret;
	int cpu;
	long tid;
};
#define H_MAX_EVENTS 1024
static struct h_event events[H_MAX_EVENTS];
static int nr_events, lost_events;

static void h_event(struct h_event e)
{
	if (nr_events < H_MAX_EVENTS)
		events[nr_events++] = e;
	else
		lost_events++;
}

static char crash_text[512];

void h_point(const struct h_site *site)
{
	if (H.ctx && ops && ops->point)
		ops->point(H.ctx, site);
}

void h_warn(const struct h_site *site, const char *what)
{
	h_event((struct h_event){ .kind = 1, .site = site, .what = what, .cpu = H.cpu,
				  .tid = H.cur ? H.cur->h_tid : 0 });
}

void h_bit_check(const struct h_site *site, long nr)
{
	h_point(site);
	if (nr < 0 || nr >= BITS_PER_LONG)
		h_warn(site, "bit number outside the word (undefined behaviour in the kernel)");
}

void h_list_del_check(const struct h_site *site, struct list_head *e)
{
	if (e->prev == LIST_POISON2)
		h_warn(site, "list_del_rcu() of an entry already deleted (LIST_POISON2)");
}

struct list_head *h_list_next(const struct h_site *site, struct list_head *l)
{
	h_point(site);
	return l->next;
}

int h_smp_processor_id(void) { return H.cpu; }
bool h_in_nmi(void) { return H.nmi; }

static struct task_struct idle_task = { .flags = PF_KTHREAD, .h_tid = 0 };

struct task_struct *h_current(void) { return H.cur ? H.cur : &idle_task; }

static struct task_struct *tasks;

struct task_struct *h_tasks_first(void) { return tasks; }

struct h_guard_plain h_irq_save(const struct h_site *site)
{
	h_point(site);
	H.irqs_off++;
	return (struct h_guard_plain){ site };
}

void h_irq_restore(struct h_guard_plain *g)
{
	H.irqs_off--;
	h_point(g->site);
}

struct h_guard_plain h_rcu_lock(const struct h_site *site)
{
	h_point(site);
	return (struct h_guard_plain){ site };
}

void h_rcu_unlock(struct h_guard_plain *g) { h_point(g->site); }

int h_get_user(const struct h_site *site, void *dst, unsigned long addr, unsigned long size)
{
	h_point(site);
	if (!ops || !H.ctx)
		return -EFAULT;
	return ops->read_user(H.ctx, addr, dst, size) ? -EFAULT : 0;
}

int h_task_work_add(const struct h_site *site, struct task_struct *task, struct callback_head *work, int mode)
{
	(void)work;
	h_point(site);
	if (!H.ctx)
		return -ESRCH;
	return ops->work_add(H.ctx, task->h_tid, mode);
}

bool h_task_work_cancel(const struct h_site *site, struct task_struct *task, struct callback_head *work)
{
	(void)work;
	h_point(site);
	if (!H.ctx)
		return false;
	return ops->work_cancel(H.ctx, task->h_tid);
}

/* ---- other CPUs: blocking calls on threads of their own ---- */

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;

enum { OTHER_RUNNING, OTHER_BLOCKED, OTHER_DONE };

/* One call on another CPU. */
struct h_other {
	pthread_t thread;
	int state;
	int kind; /* 2 init, 3 cancel */
	int work;
	int cpu;
	int ret;
	/* What it waits for when blocked. */
	struct mutex *on_mutex;
	struct srcu_struct *on_srcu;
	u64 srcu_before;
	struct h_other *next;
};
static struct h_other *others;
static __thread struct h_other *self_other;

static bool other_can_run(struct h_other *o)
{
	if (o->on_mutex)
		return !o->on_mutex->locked;
	if (o->on_srcu) {
		for (int i = 0; i < 64; i++)
			if (o->on_srcu->active[i] && o->on_srcu->active[i] <= o->srcu_before)
				return false;
		return true;
	}
	return true;
}

/* The running thread gives the turn to o and waits until o blocks or ends: true if it ended. */
static bool run_other(struct h_other *o)
{
	pthread_mutex_lock(&turn_lock);
	o->state = OTHER_RUNNING;
	pthread_cond_broadcast(&turn_cond);
	while (o->state == OTHER_RUNNING)
		pthread_cond_wait(&turn_cond, &turn_lock);
	pthread_mutex_unlock(&turn_lock);
	if (o->state != OTHER_DONE)
		return false;
	pthread_join(o->thread, NULL);
	struct h_other **p = &others;
	while (*p != o)
		p = &(*p)->next;
	*p = o->next;
	return true;
}

/* After a release: every other CPU that can go on now does, in order. */
static void wake_others(void)
{
	bool again = true;
	while (again) {
		again = false;
		for (struct h_other *o = others; o; o = o->next) {
			if (o->state == OTHER_BLOCKED && o != self_other && other_can_run(o)) {
				o->on_mutex = NULL;
				o->on_srcu = NULL;
				if (run_other(o)) {
					/* It returned later than its call: the lab learns it now. */
					h_event((struct h_event){ .kind = o->kind, .work = o->work, .ret = o->ret, .cpu = o->cpu });
					free(o);
				}
				again = true;
				break;
			}
		}
	}
}

/* The calling other-CPU thread waits until its condition holds and it gets the turn. */
static void block_self(void)
{
	struct h_other *o = self_other;
	pthread_mutex_lock(&turn_lock);
	o->state = OTHER_BLOCKED;
	pthread_cond_broadcast(&turn_cond);
	while (o->state != OTHER_RUNNING)
		pthread_cond_wait(&turn_cond, &turn_lock);
	pthread_mutex_unlock(&turn_lock);
}

void h_mutex_lock(const struct h_site *site, struct mutex *m)
{
	h_point(site);
	while (m->locked) {
		if (!self_other) {
			h_warn(site, "mutex_lock() of a mutex this CPU's caller cannot wait for (held by a blocked call)");
			return;
		}
		self_other->on_mutex = m;
		block_self();
	}
	m->locked = 1;
}

void h_mutex_unlock(const struct h_site *site, struct mutex *m)
{
	h_point(site);
	m->locked = 0;
	wake_others();
}

int h_srcu_read_lock(const struct h_site *site, struct srcu_struct *ssp)
{
	h_point(site);
	for (int i = 0; i < 64; i++) {
		if (!ssp->active[i]) {
			ssp->active[i] = ++ssp->next_reader;
			ssp->readers++;
			return i;
		}
	}
	h_warn(site, "more than 64 SRCU readers at once (the harness's limit)");
	return -1;
}

void h_srcu_read_unlock(const struct h_site *site, struct srcu_struct *ssp, int idx)
{
	h_point(site);
	if (idx >= 0) {
		ssp->active[idx] = 0;
		ssp->readers--;
	}
	wake_others();
}

/* Waits for the readers that began before it, not for later ones (SRCU's rule). */
void h_synchronize_srcu(const struct h_site *site, struct srcu_struct *ssp)
{
	h_point(site);
	u64 before = ssp->next_reader;
	for (;;) {
		bool waiting = false;
		for (int i = 0; i < 64; i++)
			if (ssp->active[i] && ssp->active[i] <= before)
				waiting = true;
		if (!waiting)
			return;
		if (!self_other) {
			h_warn(site, "synchronize_srcu() inside a read section it waits for (would never return)");
			return;
		}
		self_other->on_srcu = ssp;
		self_other->srcu_before = before;
		block_self();
	}
}

/* ---- faults in the kernel's code: reported, never the lab's crash ---- */

/* fault.c, loaded once per process before any harness. */
void *unwindlab_fault_swap(void *target);
const char *unwindlab_fault_text(void);

static int crashed;

static void note_crash(void)
{
	crashed = 1;
	snprintf(crash_text, sizeof crash_text, "%s", unwindlab_fault_text());
}

/* Enter the kernel's code as (task, cpu, nmi) for the lab's context ctx; a fault returns fail. */
#define H_ENTER(c, task, cpu_, nmi_, fail)                                   \
	if (crashed)                                                         \
		return fail;                                                 \
	struct h_state __saved = H;                                          \
	sigjmp_buf __jmp;                                                    \
	void *__prev_jmp = unwindlab_fault_swap(NULL);                       \
	if (sigsetjmp(__jmp, 1)) {                                           \
		note_crash();                                                \
		unwindlab_fault_swap(__prev_jmp);                            \
		H = __saved;                                                 \
		return fail;                                                 \
	}                                                                    \
	unwindlab_fault_swap(&__jmp);                                        \
	H.ctx = (c);                                                         \
	H.cur = (task);                                                      \
	H.cpu = (cpu_);                                                      \
	H.nmi = (nmi_);                                                      \
	H.irqs_off = 0
#define H_LEAVE()                                                            \
	do {                                                                 \
		unwindlab_fault_swap(__prev_jmp);                            \
		H = __saved;                                                 \
	} while (0)

/* ---- undefined behaviour the kernel's code may commit (gcc -fsanitize=shift) ---- */

struct ubsan_loc { const char *file; u32 line; u32 column; };
static char ubsan_text[H_MAX_EVENTS][96];
static int ubsan_next;

static void ubsan_report(void *data, const char *what)
{
	struct ubsan_loc *loc = data;
	static struct h_site sites[H_MAX_EVENTS];
	int i = ubsan_next++ % H_MAX_EVENTS;
	sites[i] = (struct h_site){ loc->file, (int)loc->line, "", "undefined behaviour" };
	snprintf(ubsan_text[i], sizeof ubsan_text[i], "%s", what);
	h_warn(&sites[i], ubsan_text[i]);
}

void __ubsan_handle_shift_out_of_bounds(void *data, void *lhs, void *rhs)
{
	(void)lhs;
	char what[96];
	snprintf(what, sizeof what, "shift by %lu, past the word (the machine shifts by %lu)", (unsigned long)rhs, (unsigned long)rhs & 63);
	ubsan_report(data, what);
}

/* ---- the kernel's own code ---- */

/* user.c, its walk renamed: the harness's unwind_user() below decides who walks. */
#define unwind_user upstream_unwind_user
#include "kernel/unwind/user.c"
#undef unwind_user

int unwind_user(struct unwind_stacktrace *trace, unsigned int max_entries)
{
	long nr = ops->walk(H.ctx, current->h_tid, trace->entries, max_entries);
	if (nr >= 0) {
		trace->nr = (unsigned int)nr;
		return 0;
	}
	int ret = upstream_unwind_user(trace, max_entries);
	ops->walked(H.ctx, current->h_tid, trace->entries, trace->nr);
	return ret;
}

#include "kernel/unwind/deferred.c"

/* ---- the entry points the lab calls ---- */

static struct unwind_work works[H_MAX_WORKS];

static void work_func(struct unwind_work *work, struct unwind_stacktrace *trace, u64 cookie)
{
	ops->callback(H.ctx, (int)(work - works), current->h_tid, trace->entries, trace->nr, cookie);
}

int unwindlab_abi(void) { return H_ABI; }

int unwindlab_max_works(void) { return H_MAX_WORKS; }

int unwindlab_max_entries(void) { return (int)UNWIND_MAX_ENTRIES; }

void unwindlab_setup(const struct h_ops *o) { ops = o; }

const char *unwindlab_crash(void) { return crashed ? crash_text : NULL; }

/* unwind_task_init() of a new task, linked where for_each_process_thread() finds it. */
struct task_struct *unwindlab_task_new(long tid)
{
	struct task_struct *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->h_tid = tid;
	t->h_regs.cs = __KERNEL_CS;
	unwind_task_init(t);
	struct task_struct **p = &tasks;
	while (*p)
		p = &(*p)->h_next;
	*p = t;
	return t;
}

/* unwind_task_free() when the task is released, then unlinked. */
void unwindlab_task_free(void *ctx, struct task_struct *t)
{
	H_ENTER(ctx, t, 0, false, );
	unwind_task_free(t);
	H_LEAVE();
	struct task_struct **p = &tasks;
	while (*p && *p != t)
		p = &(*p)->h_next;
	if (*p)
		*p = t->h_next;
	free(t);
}

/* The fields of the task the two files read, as the lab's task has them now. */
void unwindlab_task_set(struct task_struct *t, unsigned int flags, int has_mm, int user, int compat, int vm86,
			unsigned long ip, unsigned long sp, unsigned long fp, int uprobe_at_entry)
{
	t->flags = flags;
	t->mm = has_mm ? (void *)t : NULL;
	t->h_regs.cs = user ? (compat ? __USER32_CS : __USER_CS) : __KERNEL_CS;
	t->h_regs.flags = vm86 ? X86_VM_MASK : 0x202;
	t->h_regs.ip = ip;
	t->h_regs.sp = sp;
	t->h_regs.bp = fp;
	t->h_uprobe_at_entry = uprobe_at_entry;
}

/* struct unwind_task_info as it is now. */
struct h_info {
	unsigned long mask;
	u64 id;
	int has_cache;
	unsigned long completed;
	unsigned int nr_entries;
	const unsigned long *entries;
};

void unwindlab_task_info(struct task_struct *t, struct h_info *out)
{
	out->mask = (unsigned long)t->unwind_info.unwind_mask.counter;
	out->id = t->unwind_info.id.id;
	out->has_cache = t->unwind_info.cache != NULL;
	out->completed = t->unwind_info.cache ? t->unwind_info.cache->unwind_completed : 0;
	out->nr_entries = t->unwind_info.cache ? t->unwind_info.cache->nr_entries : 0;
	out->entries = t->unwind_info.cache ? t->unwind_info.cache->entries : NULL;
}

static void *other_main(void *arg)
{
	struct h_other *o = arg;
	self_other = o;
	H.cpu = o->cpu;
	H.cur = NULL;
	H.ctx = NULL;
	/* Wait for the first turn. */
	pthread_mutex_lock(&turn_lock);
	while (o->state != OTHER_RUNNING)
		pthread_cond_wait(&turn_cond, &turn_lock);
	pthread_mutex_unlock(&turn_lock);
	sigjmp_buf jmp;
	if (!sigsetjmp(jmp, 1)) {
		unwindlab_fault_swap(&jmp);
		if (o->kind == 2)
			o->ret = unwind_deferred_init(&works[o->work], work_func);
		else
			unwind_deferred_cancel(&works[o->work]);
	} else {
		note_crash();
		o->ret = -EFAULT;
	}
	unwindlab_fault_swap(NULL);
	pthread_mutex_lock(&turn_lock);
	o->state = OTHER_DONE;
	pthread_cond_broadcast(&turn_cond);
	pthread_mutex_unlock(&turn_lock);
	return NULL;
}

/*
 * unwind_deferred_init() (kind 2) or unwind_deferred_cancel() (kind 3) of
 * work on another CPU: returns its value (0 for a cancel) if it returned,
 * or H_INIT_WAITING if it blocks; its return then comes as an event.
 */
int unwindlab_other(void *ctx, int kind, int work, int cpu)
{
	if (crashed)
		return -EFAULT;
	if (work < 0 || work >= H_MAX_WORKS)
		return -EINVAL;
	struct h_other *o = calloc(1, sizeof *o);
	if (!o)
		return -ENOMEM;
	o->kind = kind;
	o->work = work;
	o->cpu = cpu;
	o->state = OTHER_BLOCKED;
	o->next = others;
	others = o;
	(void)ctx;
	if (pthread_create(&o->thread, NULL, other_main, o)) {
		others = o->next;
		free(o);
		return -ENOMEM;
	}
	if (!run_other(o))
		return H_INIT_WAITING;
	int ret = o->ret;
	free(o);
	return ret;
}

int unwindlab_request(void *ctx, struct task_struct *t, int cpu, int nmi, int work, u64 *cookie)
{
	*cookie = 0;
	H_ENTER(ctx, t, cpu, nmi, -EFAULT);
	int ret = unwind_deferred_request(&works[work], cookie);
	H_LEAVE();
	return ret;
}

/* task_work_run() of the task's queued unwind work (unwind_deferred_task_work()). */
void unwindlab_task_work(void *ctx, struct task_struct *t, int cpu)
{
	H_ENTER(ctx, t, cpu, false, );
	t->unwind_info.work.func(&t->unwind_info.work);
	H_LEAVE();
}

void unwindlab_reset_info(void *ctx, struct task_struct *t, int cpu)
{
	H_ENTER(ctx, t, cpu, false, );
	unwind_reset_info();
	H_LEAVE();
}

void unwindlab_task_exit(void *ctx, struct task_struct *t, int cpu)
{
	H_ENTER(ctx, t, cpu, false, );
	unwind_deferred_task_exit(t);
	H_LEAVE();
}

int unwindlab_work_bit(int work) { return works[work].bit; }

int unwindlab_work_listed(int work)
{
	struct unwind_work *w;
	list_for_each_entry(w, &callbacks, list)
		if (w == &works[work])
			return 1;
	return 0;
}

unsigned long unwindlab_global_mask(void) { return unwind_mask; }

/* deferred.c's SRCU read sections now (the explorer shows them). */
int unwindlab_srcu_readers(void) { return unwind_srcu.readers; }

/* deferred.c's per-CPU cookie counter (the explorer shows it). */
unsigned int unwindlab_ctx_ctr(int cpu) { return cpu >= 0 && cpu < H_NR_CPUS ? unwind_ctx_ctr[cpu] : 0; }

/* The callbacks list, head first, as work numbers. */
int unwindlab_callbacks(int *out, int max)
{
	int n = 0;
	for (struct list_head *l = callbacks.next; l != &callbacks && n < max; l = l->next)
		out[n++] = (int)(list_entry(l, struct unwind_work, list) - works);
	return n;
}

/* Others still blocked (their call has not returned). */
int unwindlab_others_waiting(void)
{
	int n = 0;
	for (struct h_other *o = others; o; o = o->next)
		n++;
	return n;
}

int unwindlab_take_events(struct h_event *out, int max, int *lost)
{
	int n = nr_events < max ? nr_events : max;
	memcpy(out, events, (size_t)n * sizeof *out);
	memmove(events, events + n, (size_t)(nr_events - n) * sizeof *out);
	nr_events -= n;
	*lost = lost_events;
	lost_events = 0;
	return n;
}

/* Frees every task's state without calling the lab (the kernel is gone). */
void unwindlab_release_all(void)
{
	while (tasks) {
		struct task_struct *t = tasks;
		tasks = t->h_next;
		kfree(t->unwind_info.cache);
		free(t);
	}
}

/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unwindlab's shim: everything the kernel's kernel/unwind/deferred.c and
 * user.c (and the headers they take from the tree) use, in user space, as
 * the kernel's own tools/testing/vma/vma_internal.h does for mm/vma.c.
 *
 * Every primitive that the deferred-unwind code can be interrupted around
 * (each atomic, bit operation, task_work call, SRCU, mutex and RCU
 * operation, list step and user read) is a macro that names its call site
 * (file, line, function, operation) and first calls h_point(): the lab's
 * preemption point, where its explorer may place an NMI or run another
 * CPU's call.
 *
 * The world outside the two files (current, CPUs, NMI context, user
 * memory, task_work, the tracers' callbacks) is the lab's, reached through
 * struct h_ops (harness.c).
 */
#ifndef UNWINDLAB_SHIM_H
#define UNWINDLAB_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration: what a Debian x86-64 kernel config selects ---- */
#define CONFIG_UNWIND_USER 1
#define CONFIG_HAVE_UNWIND_USER_FP 1
#define CONFIG_COMPAT 1
#define CONFIG_X86_64 1
/* CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG comes from the compiler's command line. */

#define __ARG_PLACEHOLDER_1 0,
#define __take_second_arg(__ignored, val, ...) val
#define __is_defined(x) ___is_defined(x)
#define ___is_defined(val) ____is_defined(__ARG_PLACEHOLDER_##val)
#define ____is_defined(arg1_or_junk) __take_second_arg(arg1_or_junk 1, 0)
#define IS_ENABLED(option) __is_defined(option)

/* ---- types ---- */
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;
typedef struct { long counter; } atomic_long_t;

#define __user
#undef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#define __must_check
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define BITS_PER_LONG 64
#define BIT(nr) (1UL << (nr))
#define SZ_4K 0x00001000
#define EBUSY 16
#define EINVAL 22
#define ENOMEM 12
#define ESRCH 3
#define EFAULT 14
#define ENOSYS 38
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif
#define __H_CAT2(a, b) a##b
#define __H_CAT(a, b) __H_CAT2(a, b)
#define __UNIQUE_ID(prefix) __H_CAT(__H_CAT(__unique_, prefix), __COUNTER__)

/* ---- call sites and preemption points ---- */

/* One call site of a primitive in the kernel's code. */
struct h_site {
	const char *file;
	int line;
	const char *func;
	const char *op;
};

#define H_SITE(opname) ({ static const struct h_site __s = { __FILE__, __LINE__, __func__, opname }; &__s; })

void h_point(const struct h_site *site);
void h_warn(const struct h_site *site, const char *what);

/* ---- WARN ---- */
#define WARN_ON_ONCE(cond) ({ bool __c = !!(cond); if (unlikely(__c)) h_warn(H_SITE("WARN_ON_ONCE"), #cond); unlikely(__c); })
#define WARN_ON(cond) ({ bool __c = !!(cond); if (unlikely(__c)) h_warn(H_SITE("WARN_ON"), #cond); unlikely(__c); })
#define WARN_ONCE(cond, fmt, ...) ({ bool __c = !!(cond); if (unlikely(__c)) h_warn(H_SITE("WARN_ONCE"), fmt); unlikely(__c); })
#define BUG_ON(cond) do { if (unlikely(cond)) h_warn(H_SITE("BUG_ON"), #cond); } while (0)

/* ---- annotations without effect in user space ---- */
#define lockdep_assert_irqs_disabled() do { } while (0)
#define might_fault() do { } while (0)
#define might_sleep() do { } while (0)
#define barrier() __asm__ __volatile__("" ::: "memory")

/* ---- READ_ONCE / WRITE_ONCE: plain accesses (one thread runs at a time) ---- */
#define READ_ONCE(x) ({ h_point(H_SITE("READ_ONCE")); *(volatile __typeof__(x) *)&(x); })
#define WRITE_ONCE(x, v) do { h_point(H_SITE("WRITE_ONCE")); *(volatile __typeof__(x) *)&(x) = (v); } while (0)

/* ---- atomics: a preemption point before each, and after each read-modify-write ---- */
#define H_AFTER(opname) h_point(H_SITE("after " opname))
#define atomic_long_read(v) ({ h_point(H_SITE("atomic_long_read")); (v)->counter; })
#define atomic_long_set(v, i) do { h_point(H_SITE("atomic_long_set")); (v)->counter = (i); H_AFTER("atomic_long_set"); } while (0)
#define atomic_long_or(i, v) do { h_point(H_SITE("atomic_long_or")); (v)->counter |= (long)(i); H_AFTER("atomic_long_or"); } while (0)
#define atomic_long_andnot(i, v) do { h_point(H_SITE("atomic_long_andnot")); (v)->counter &= ~(long)(i); H_AFTER("atomic_long_andnot"); } while (0)
#define atomic_long_fetch_or(i, v) ({ h_point(H_SITE("atomic_long_fetch_or")); long __o = (v)->counter; (v)->counter = __o | (long)(i); H_AFTER("atomic_long_fetch_or"); __o; })
#define atomic_long_fetch_andnot(i, v) ({ h_point(H_SITE("atomic_long_fetch_andnot")); long __o = (v)->counter; (v)->counter = __o & ~(long)(i); H_AFTER("atomic_long_fetch_andnot"); __o; })
#define atomic_long_try_cmpxchg(v, oldp, new) ({ \
	h_point(H_SITE("atomic_long_try_cmpxchg")); \
	long __cur = (v)->counter; bool __ok = __cur == (long)*(oldp); \
	if (__ok) (v)->counter = (long)(new); else *(oldp) = __cur; H_AFTER("atomic_long_try_cmpxchg"); __ok; })
#define try_cmpxchg(ptr, oldp, new) ({ \
	h_point(H_SITE("try_cmpxchg")); \
	__typeof__(*(ptr)) __cur = *(ptr); bool __ok = __cur == *(oldp); \
	if (__ok) *(ptr) = (new); else *(oldp) = __cur; H_AFTER("try_cmpxchg"); __ok; })

/* ---- bit operations ---- */
#define test_bit(nr, addr) ({ long __nr = (long)(nr); h_bit_check(H_SITE("test_bit"), __nr); \
	(__nr >= 0 && __nr < BITS_PER_LONG) ? (int)((*(const unsigned long *)(addr) >> __nr) & 1) : 0; })
#define __set_bit(nr, addr) do { long __nr = (long)(nr); h_bit_check(H_SITE("__set_bit"), __nr); \
	if (__nr >= 0 && __nr < BITS_PER_LONG) *(unsigned long *)(addr) |= 1UL << __nr; } while (0)
#define __clear_bit(nr, addr) do { long __nr = (long)(nr); h_bit_check(H_SITE("__clear_bit"), __nr); \
	if (__nr >= 0 && __nr < BITS_PER_LONG) *(unsigned long *)(addr) &= ~(1UL << __nr); } while (0)
#define clear_bit(nr, addr) __clear_bit(nr, addr)
#define set_bit(nr, addr) __set_bit(nr, addr)
#define ffz(word) ((unsigned long)__builtin_ctzl(~(unsigned long)(word)))
#define for_each_set_bit(bit, addr, size) \
	for ((bit) = 0; (bit) < (size); (bit)++) \
		if (!((*(const unsigned long *)(addr) >> (bit)) & 1)) {} else

/* A bit number outside the word: undefined in the kernel (BIT(-1)); the lab says so. */
void h_bit_check(const struct h_site *site, long nr);

/* ---- lists (RCU flavours: plain, one CPU runs at a time) ---- */
struct list_head { struct list_head *next, *prev; };
#define LIST_HEAD_INIT(name) { &(name), &(name) }
#define LIST_HEAD(name) struct list_head name = LIST_HEAD_INIT(name)
static inline void INIT_LIST_HEAD(struct list_head *l) { l->next = l; l->prev = l; }
#define list_entry(ptr, type, member) container_of(ptr, type, member)
static inline void __h_list_add(struct list_head *n, struct list_head *prev, struct list_head *next)
{
	next->prev = n; n->next = next; n->prev = prev; prev->next = n;
}
#define list_add_rcu(n, head) do { h_point(H_SITE("list_add_rcu")); __h_list_add((n), (head), (head)->next); } while (0)
#define list_add(n, head) __h_list_add((n), (head), (head)->next)
#define LIST_POISON1 ((struct list_head *)0x100)
#define LIST_POISON2 ((struct list_head *)0x122)
#define list_del_rcu(e) do { struct list_head *__e = (e); h_point(H_SITE("list_del_rcu")); \
	h_list_del_check(H_SITE("list_del_rcu"), __e); \
	if (__e->prev != LIST_POISON2) { __e->next->prev = __e->prev; __e->prev->next = __e->next; } \
	__e->prev = LIST_POISON2; } while (0)
void h_list_del_check(const struct h_site *site, struct list_head *e);
/* The walk reads each next pointer once, as rcu_dereference() does. */
#define list_for_each_entry_srcu(pos, head, member, cond) \
	for (pos = list_entry(h_list_next(H_SITE("list_for_each_entry_srcu"), (head)), __typeof__(*pos), member); \
	     &pos->member != (head); \
	     pos = list_entry(h_list_next(H_SITE("list_for_each_entry_srcu"), &pos->member), __typeof__(*pos), member))
#define list_for_each_entry_rcu(pos, head, member, ...) list_for_each_entry_srcu(pos, head, member, 0)
#define list_for_each_entry(pos, head, member) \
	for (pos = list_entry((head)->next, __typeof__(*pos), member); &pos->member != (head); \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))
struct list_head *h_list_next(const struct h_site *site, struct list_head *l);

/* ---- task_work ---- */
struct callback_head {
	struct callback_head *next;
	void (*func)(struct callback_head *head);
};
enum task_work_notify_mode {
	TWA_NONE = 0,
	TWA_RESUME,
	TWA_SIGNAL,
	TWA_SIGNAL_NO_IPI,
	TWA_NMI_CURRENT,
	TWA_FLAGS = 0xff00,
	TWAF_NO_ALLOC = 0x0100,
};
static inline void init_task_work(struct callback_head *twork, void (*func)(struct callback_head *))
{
	twork->func = func;
}
struct task_struct;
#define task_work_add(task, work, mode) h_task_work_add(H_SITE("task_work_add"), (task), (work), (mode))
#define task_work_cancel(task, work) h_task_work_cancel(H_SITE("task_work_cancel"), (task), (work))
int h_task_work_add(const struct h_site *site, struct task_struct *task, struct callback_head *work, int mode);
bool h_task_work_cancel(const struct h_site *site, struct task_struct *task, struct callback_head *work);

/* ---- locking: mutex, SRCU, RCU, irqs; guard() as in linux/cleanup.h ---- */
struct mutex { int locked; };
#define DEFINE_MUTEX(name) struct mutex name = { 0 }
struct srcu_struct { int readers; u64 next_reader; u64 active[64]; };
#define DEFINE_STATIC_SRCU(name) static struct srcu_struct name = { 0 }
#define DEFINE_SRCU(name) struct srcu_struct name = { 0 }
#define srcu_read_lock_held(ssp) 1

void h_mutex_lock(const struct h_site *site, struct mutex *m);
void h_mutex_unlock(const struct h_site *site, struct mutex *m);
int h_srcu_read_lock(const struct h_site *site, struct srcu_struct *ssp);
void h_srcu_read_unlock(const struct h_site *site, struct srcu_struct *ssp, int idx);
void h_synchronize_srcu(const struct h_site *site, struct srcu_struct *ssp);
#define synchronize_srcu(ssp) h_synchronize_srcu(H_SITE("synchronize_srcu"), (ssp))
#define mutex_lock(m) h_mutex_lock(H_SITE("mutex_lock"), (m))
#define mutex_unlock(m) h_mutex_unlock(H_SITE("mutex_unlock"), (m))

struct h_guard_mutex { struct mutex *m; const struct h_site *site; };
static inline void h_guard_mutex_exit(struct h_guard_mutex *g) { h_mutex_unlock(g->site, g->m); }
struct h_guard_srcu { struct srcu_struct *ssp; int idx; const struct h_site *site; };
static inline void h_guard_srcu_exit(struct h_guard_srcu *g) { h_srcu_read_unlock(g->site, g->ssp, g->idx); }
struct h_guard_plain { const struct h_site *site; };
void h_irq_restore(struct h_guard_plain *g);
void h_rcu_unlock(struct h_guard_plain *g);
struct h_guard_plain h_irq_save(const struct h_site *site);
struct h_guard_plain h_rcu_lock(const struct h_site *site);

#define guard(name) __h_guard_##name
#define __h_guard_mutex(mx) \
	struct h_guard_mutex __UNIQUE_ID(guard) __attribute__((cleanup(h_guard_mutex_exit))) = \
		({ struct mutex *__m = (mx); const struct h_site *__st = H_SITE("guard(mutex)"); h_mutex_lock(__st, __m); (struct h_guard_mutex){ __m, __st }; })
#define __h_guard_srcu(sp) \
	struct h_guard_srcu __UNIQUE_ID(guard) __attribute__((cleanup(h_guard_srcu_exit))) = \
		({ struct srcu_struct *__p = (sp); const struct h_site *__st = H_SITE("guard(srcu)"); (struct h_guard_srcu){ __p, h_srcu_read_lock(__st, __p), __st }; })
#define __h_guard_irqsave() \
	struct h_guard_plain __UNIQUE_ID(guard) __attribute__((cleanup(h_irq_restore))) = h_irq_save(H_SITE("guard(irqsave)"))
#define __h_guard_rcu() \
	struct h_guard_plain __UNIQUE_ID(guard) __attribute__((cleanup(h_rcu_unlock))) = h_rcu_lock(H_SITE("guard(rcu)"))

/* ---- per-CPU data ---- */
#define H_NR_CPUS 64
#define DEFINE_PER_CPU(type, name) type name[H_NR_CPUS]
int h_smp_processor_id(void);
#define smp_processor_id() h_smp_processor_id()
#define raw_smp_processor_id() h_smp_processor_id()
#define __this_cpu_read(var) ({ h_point(H_SITE("__this_cpu_read")); (var)[h_smp_processor_id()]; })
#define __this_cpu_write(var, v) do { h_point(H_SITE("__this_cpu_write")); (var)[h_smp_processor_id()] = (v); } while (0)
#define this_cpu_read(var) __this_cpu_read(var)
#define this_cpu_write(var, v) __this_cpu_write(var, v)

/* ---- registers (x86-64's struct pt_regs, the fields user.c reads) ---- */
struct pt_regs {
	unsigned long bp;
	unsigned long ip;
	unsigned long cs;
	unsigned long flags;
	unsigned long sp;
};
#define X86_VM_MASK 0x00020000UL
#define __USER_CS 0x33
#define __USER32_CS 0x23
#define __KERNEL_CS 0x10
static inline int user_mode(struct pt_regs *regs) { return (regs->cs & 3) == 3; }
static inline bool user_64bit_mode(struct pt_regs *regs) { return regs->cs == __USER_CS; }
static inline unsigned long instruction_pointer(struct pt_regs *regs) { return regs->ip; }
static inline unsigned long user_stack_pointer(struct pt_regs *regs) { return regs->sp; }
static inline unsigned long frame_pointer(struct pt_regs *regs) { return regs->bp; }

/* ---- tasks ---- */
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

#include <linux/unwind_deferred_types.h>

struct task_struct {
	unsigned int flags;
	void *mm;
	struct unwind_task_info unwind_info;
	/* The harness's own fields. */
	struct pt_regs h_regs;
	long h_tid;
	struct task_struct *h_next;
	bool h_uprobe_at_entry;
};

struct task_struct *h_current(void);
#define current h_current()
#define task_pt_regs(task) (&(task)->h_regs)
bool h_in_nmi(void);
#define in_nmi() h_in_nmi()
struct task_struct *h_tasks_first(void);
#define for_each_process_thread(g, t) \
	for ((g) = (t) = h_tasks_first(); (t); (g) = (t) = (t)->h_next)

/* ---- memory ---- */
#define GFP_KERNEL 0
#define kzalloc_flex(obj, member, count) calloc(1, sizeof(obj) + (size_t)(count) * sizeof((obj).member[0]))
#define kzalloc(size, gfp) calloc(1, (size))
#define kfree(p) free(p)

/* get_user(): a read of user memory, which may fault (-EFAULT). */
int h_get_user(const struct h_site *site, void *dst, unsigned long addr, unsigned long size);
#define get_user(x, ptr) ({ \
	__typeof__(*(ptr)) __v; \
	int __r = h_get_user(H_SITE("get_user"), &__v, (unsigned long)(ptr), sizeof(__v)); \
	(x) = __r ? 0 : __v; __r; })

/* x86's uprobes: the lab places no uprobe, unless a test says one is at the entry. */
static inline bool is_uprobe_at_func_entry(struct pt_regs *regs)
{
	return container_of(regs, struct task_struct, h_regs)->h_uprobe_at_entry;
}

#endif /* UNWINDLAB_SHIM_H */

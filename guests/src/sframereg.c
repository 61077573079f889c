/* The .sframe registration interfaces called by the program itself, right
 * and wrong: prctl(PR_ADD_SFRAME / PR_REMOVE_SFRAME) and the proposed
 * sframe_register() / sframe_unregister() system calls, on its own
 * PT_GNU_SFRAME section (found through the auxiliary vector's program
 * headers) and on broken copies of it. Every call's return value is
 * printed, so the output is the test: a kernel without the series answers
 * EINVAL (prctl) and ENOSYS (the calls); the lab's kernel model answers
 * with the errnos of the series.
 *
 *   sframereg [ADD REMOVE REGISTER UNREGISTER]
 *
 * The optional arguments are the prctl options and the system-call
 * numbers (default 79 80 1000 1001, the lab's defaults). */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

struct sframe_setup {
    uint64_t sframe_start, sframe_size, text_start, text_size;
};

static long pr_add = 79, pr_remove = 80, nr_register = 1000, nr_unregister = 1001;

static const char *name(long ret) {
    switch (-ret) {
    case 0: return "ok";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case EEXIST: return "EEXIST";
    case ENOSYS: return "ENOSYS";
    case ENOENT: return "ENOENT";
    default: return "other";
    }
}

static void show(const char *what, long ret) {
    if (ret == -1) ret = -errno;
    printf("%-44s %ld %s\n", what, ret, name(ret));
}

static long add(uint64_t s, uint64_t se, uint64_t t, uint64_t te) {
    return syscall(SYS_prctl, pr_add, s, se, t, te);
}

static long remove_(uint64_t s, uint64_t a3) {
    return syscall(SYS_prctl, pr_remove, s, a3, 0, 0);
}

static long reg(struct sframe_setup *p, long size) {
    return syscall(nr_register, p, size);
}

static long unreg(struct sframe_setup *p, long size) {
    return syscall(nr_unregister, p, size);
}

int main(int argc, char **argv) {
    if (argc > 4) {
        pr_add = atol(argv[1]);
        pr_remove = atol(argv[2]);
        nr_register = atol(argv[3]);
        nr_unregister = atol(argv[4]);
    }
    /* This program's own section and text (static, not PIE: addresses as linked). */
    const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
    unsigned long n = getauxval(AT_PHNUM);
    uint64_t sf = 0, sf_size = 0, text = 0, text_end = 0;
    for (unsigned long i = 0; i < n; i++) {
        if (ph[i].p_type == PT_GNU_SFRAME) {
            sf = ph[i].p_vaddr;
            sf_size = ph[i].p_memsz;
        } else if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
            text = ph[i].p_vaddr;
            text_end = ph[i].p_vaddr + ph[i].p_memsz;
        }
    }
    if (!sf || !text) {
        printf("no PT_GNU_SFRAME or no executable PT_LOAD\n");
        return 1;
    }
    printf("own section: %s\n", sf_size > 28 ? "found" : "too small");

    /* Exec registered it already: adding it again overlaps. */
    show("prctl add own (exec registered it)", add(sf, sf + sf_size, text, text_end));
    show("prctl remove own", remove_(sf, 0));
    show("prctl remove own again", remove_(sf, 0));
    show("prctl remove with arg3 set", remove_(sf, 1));
    show("prctl remove never registered", remove_(sf + 8, 0));
    show("prctl unknown option", syscall(SYS_prctl, 0x7ffe, 0, 0, 0, 0));

    /* Copies of the section in a writable mapping: broken ones. */
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (sf_size + page - 1) / page * page;
    unsigned char *copy = mmap(NULL, len + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) return 1;
    uint64_t c = (uint64_t)(uintptr_t)copy;
    memcpy(copy, (const void *)(uintptr_t)sf, sf_size);
    copy[0] ^= 0xff; /* magic */
    show("prctl add bad magic", add(c, c + sf_size, text, text_end));
    copy[0] ^= 0xff;
    copy[2] = 2; /* version 2 */
    show("prctl add V2 section", add(c, c + sf_size, text, text_end));
    copy[2] = 3;
    show("prctl add section outside any VMA", add(0x10000, 0x10000 + sf_size, text, text_end));
    show("prctl add section past its VMA", add(c, c + len + 2 * page, text, text_end));
    show("prctl add text not executable", add(c, c + sf_size, c, c + sf_size));
    show("prctl add text past its VMA", add(c, c + sf_size, text, text_end + 16 * page));
    show("prctl add zero address", add(0, sf_size, text, text_end));
    mprotect(copy, len, PROT_NONE);
    show("prctl add unreadable header", add(c, c + sf_size, text, text_end));
    show("prctl add own", add(sf, sf + sf_size, text, text_end));
    show("prctl add own overlapping", add(sf, sf + sf_size, text + 16, text_end));

    /* The system calls. */
    struct sframe_setup s = {sf, sf_size, text, text_end - text};
    show("sframe_register size 24", reg(&s, 24));
    show("sframe_register size 40", reg(&s, 40));
    show("sframe_register unreadable struct", reg((struct sframe_setup *)(uintptr_t)8, sizeof s));
    show("sframe_register own (registered)", reg(&s, sizeof s));
    show("sframe_unregister with sframe_size set", unreg(&s, sizeof s));
    struct sframe_setup u = {sf, 0, 0, 0};
    show("sframe_unregister size 16", unreg(&u, 16));
    show("sframe_unregister own", unreg(&u, sizeof u));
    show("sframe_unregister own again", unreg(&u, sizeof u));
    show("sframe_register own", reg(&s, sizeof s));
    return 0;
}

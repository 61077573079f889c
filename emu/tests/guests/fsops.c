/* The file system: reading a host file, listing a host directory (sorted:
   getdents order is the file system's), stat, statx, creating, writing,
   reading back, renaming and removing files and directories (also host
   ones, which the emulator keeps in its overlay), symlink and readlink,
   getcwd/chdir, dup2 and F_DUPFD_CLOEXEC, /dev/null and /dev/zero,
   /proc/self/exe, and the error paths (ENOENT, ENOTDIR, EEXIST, EISDIR,
   ENOTEMPTY, ELOOP).
   argv: a host file, a host directory, the executable's real path. Run in a
   scratch directory holding existing.txt and hostdir/f. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *err(int e)
{
	switch (e) {
	case 0: return "ok";
	case ENOENT: return "ENOENT";
	case ENOTDIR: return "ENOTDIR";
	case EEXIST: return "EEXIST";
	case EISDIR: return "EISDIR";
	case ENOTEMPTY: return "ENOTEMPTY";
	case ELOOP: return "ELOOP";
	case EBADF: return "EBADF";
	case EINVAL: return "EINVAL";
	case EBUSY: return "EBUSY";
	default: return "other";
	}
}

/* Prints the result of a call that returns -1 on error. */
#define TRY(what, call) do { errno = 0; long r_ = (long)(call); \
	printf("%s: %ld %s\n", what, r_, r_ < 0 ? err(errno) : "ok"); } while (0)

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		printf("opendir %s: %s\n", dir, err(errno));
		return;
	}
	char *names[4096];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 4096)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof *names, cmp);
	printf("%s:", dir);
	for (int i = 0; i < n; i++) {
		printf(" %s", names[i]);
		free(names[i]);
	}
	printf("\n");
}

static unsigned long long fnv(const char *p, size_t n)
{
	unsigned long long h = 0xcbf29ce484222325ULL;
	while (n--)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
	return h;
}

static void cat(const char *path)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("cat %s: %s\n", path, err(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	printf("cat %s: %zd [%.*s]\n", path, n, (int)(n > 0 ? n : 0), buf);
}

static void kind(const char *path, int follow)
{
	struct stat st;
	errno = 0;
	int r = follow ? stat(path, &st) : lstat(path, &st);
	if (r < 0) {
		printf("%s %s: %s\n", follow ? "stat" : "lstat", path, err(errno));
		return;
	}
	printf("%s %s: %s size %lld\n", follow ? "stat" : "lstat", path,
	       S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : S_ISLNK(st.st_mode) ? "link" : S_ISCHR(st.st_mode) ? "chr" : "other",
	       S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	/* A host file, whole. */
	int fd = open(argv[1], O_RDONLY);
	static char big[1 << 20];
	ssize_t n = read(fd, big, sizeof big);
	struct stat st, st2;
	fstat(fd, &st);
	stat(argv[1], &st2);
	printf("host file: %zd bytes, fnv %016llx, size %lld, same inode %d\n", n, fnv(big, n > 0 ? n : 0),
	       (long long)st.st_size, st.st_ino == st2.st_ino);
	struct statx sx;
	TRY("statx", statx(AT_FDCWD, argv[1], 0, STATX_BASIC_STATS, &sx));
	printf("statx size %lld regular %d\n", (long long)sx.stx_size, S_ISREG(sx.stx_mode));
	close(fd);
	list(argv[2]);

	/* The working directory. */
	char cwd[4096];
	char *start = strdup(getcwd(cwd, sizeof cwd));
	list(".");
	cat("existing.txt");
	TRY("mkdir d", mkdir("d", 0755));
	TRY("mkdir d again", mkdir("d", 0755));
	TRY("chdir d", chdir("d"));
	printf("cwd is start/d: %d\n", strcmp(getcwd(cwd, sizeof cwd), start) != 0 && !strcmp(cwd + strlen(start), "/d"));
	fd = open("a.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	printf("created fd %d\n", fd);
	TRY("write", write(fd, "hello\n", 6));
	struct iovec iov[2] = { { "two ", 4 }, { "parts\n", 6 } };
	TRY("writev", writev(fd, iov, 2));
	TRY("pwrite", pwrite(fd, "J", 1, 0));
	close(fd);
	cat("a.txt");
	kind("a.txt", 1);
	TRY("chdir ..", chdir(".."));
	TRY("rename", rename("d/a.txt", "d/b.txt"));
	cat("d/a.txt");
	cat("d/b.txt");
	list("d");
	TRY("excl on existing", open("d/b.txt", O_CREAT | O_EXCL | O_WRONLY, 0644));
	TRY("rmdir non-empty", rmdir("d"));
	TRY("unlink dir", unlink("d"));
	TRY("open dir for writing", open("d", O_WRONLY));
	TRY("through a file", open("d/b.txt/x", O_RDONLY));
	TRY("missing", open("d/nothing", O_RDONLY));
	TRY("missing parent", open("nothing/x", O_RDONLY));
	TRY("unlink b", unlink("d/b.txt"));
	TRY("rmdir d", rmdir("d"));
	kind("d", 1);

	/* Host files of the scratch directory: changed, moved, removed. */
	fd = open("existing.txt", O_WRONLY | O_APPEND);
	TRY("append", write(fd, "more\n", 5));
	close(fd);
	cat("existing.txt");
	TRY("rename host file", rename("existing.txt", "moved.txt"));
	kind("existing.txt", 1);
	cat("moved.txt");
	TRY("truncate", truncate("moved.txt", 3));
	cat("moved.txt");
	TRY("unlink hostdir/f", unlink("hostdir/f"));
	TRY("rmdir hostdir", rmdir("hostdir"));
	TRY("mkdir hostdir", mkdir("hostdir", 0700));
	list("hostdir");

	/* Symbolic links. */
	TRY("symlink", symlink("target.txt", "lnk"));
	char target[64] = { 0 };
	TRY("readlink", readlink("lnk", target, sizeof target - 1));
	printf("link to %s\n", target);
	kind("lnk", 0);
	kind("lnk", 1);
	fd = open("target.txt", O_CREAT | O_RDWR, 0600);
	TRY("write target", write(fd, "via link\n", 9));
	cat("lnk");
	kind("lnk", 1);
	TRY("readlink of a file", readlink("target.txt", target, sizeof target));
	TRY("symlink loop1", symlink("loop2", "loop1"));
	TRY("symlink loop2", symlink("loop1", "loop2"));
	TRY("open loop", open("loop1", O_RDONLY));
	TRY("symlink exists", symlink("x", "lnk"));
	TRY("symlink to dir", symlink("hostdir", "dirlnk"));
	TRY("chdir via link", chdir("dirlnk"));
	TRY("chdir ..", chdir(".."));
	printf("back at start: %d\n", !strcmp(getcwd(cwd, sizeof cwd), start));
	list(".");

	/* More error paths. */
	TRY("rename file to dir/", rename("target.txt", "nd/"));
	TRY("O_DIRECTORY on a file", open("target.txt", O_RDONLY | O_DIRECTORY));
	TRY("O_NOFOLLOW on a link", open("lnk", O_RDONLY | O_NOFOLLOW));
	TRY("mkdir in a missing dir", mkdir("no/such", 0755));
	TRY("rmdir a file", rmdir("target.txt"));
	int ro = open("target.txt", O_RDONLY);
	TRY("ftruncate read-only", ftruncate(ro, 0));
	TRY("write read-only", write(ro, "x", 1));
	TRY("seek end", lseek(ro, 0, SEEK_END));
	char small[8] = { 0 };
	TRY("pread", pread(ro, small, 3, 4));
	printf("pread got %s\n", small);
	TRY("rename dir over non-empty", rename("hostdir", "."));
	TRY("mkdir x", mkdir("x", 0755));
	TRY("mkdir x/y", mkdir("x/y", 0755));
	TRY("rename dir into itself", rename("x", "x/y/z"));
	TRY("rename dir", rename("x", "x2"));
	list("x2");
	TRY("rmdir x2/y", rmdir("x2/y"));
	TRY("rmdir x2/", rmdir("x2/"));
	close(ro);

	/* Removing entries while reading the directory in small pieces (rm -r). */
	TRY("mkdir many", mkdir("many", 0755));
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof name, "many/f%02d", i);
		close(open(name, O_CREAT | O_WRONLY, 0644));
	}
	int dfd = open("many", O_RDONLY | O_DIRECTORY);
	int removed = 0;
	char dbuf[64];
	long got;
	while ((got = syscall(SYS_getdents64, dfd, dbuf, sizeof dbuf)) > 0) {
		for (long off = 0; off < got;) {
			struct dirent64 *de = (struct dirent64 *)(dbuf + off);
			off += de->d_reclen;
			if (de->d_name[0] == '.')
				continue;
			removed += unlinkat(dfd, de->d_name, 0) == 0;
		}
	}
	printf("removed %d, last getdents %ld\n", removed, got);
	TRY("tiny getdents buffer", syscall(SYS_getdents64, dfd, dbuf, 8));
	close(dfd);
	TRY("rmdir many", rmdir("many"));

	/* Descriptors. */
	int a = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	printf("dupfd_cloexec %d getfd %d\n", a, fcntl(a, F_GETFD));
	TRY("dup2", dup2(fd, 20));
	printf("dup2 getfd %d\n", fcntl(20, F_GETFD));
	lseek(fd, 4, SEEK_SET);
	printf("shared offset %lld %lld\n", (long long)lseek(a, 0, SEEK_CUR), (long long)lseek(20, 0, SEEK_CUR));
	TRY("dup", dup(fd));
	TRY("dup3 same", dup3(fd, fd, 0));
	TRY("close", close(a));
	TRY("close again", close(a));

	/* Devices and /proc. */
	int null = open("/dev/null", O_RDWR);
	TRY("write null", write(null, "x", 1));
	TRY("read null", read(null, big, 10));
	int zero = open("/dev/zero", O_RDONLY);
	memset(big, 1, 8);
	TRY("read zero", read(zero, big, 8));
	printf("zeros %d\n", big[0] == 0 && big[7] == 0);
	kind("/dev/null", 1);
	char exe[4096] = { 0 };
	TRY("readlink exe", readlink("/proc/self/exe", exe, sizeof exe - 1) > 0);
	printf("exe matches %d\n", !strcmp(exe, argv[3]));
	return 3;
}

/* /proc/self/fd/N, /dev/fd/N and /dev/std* opened again, as Linux does it:
   a pipe gives a new end of the same pipe, in the mode asked for; a regular
   file a new description at offset 0 with its own flags (O_TRUNC and
   O_APPEND honoured), even once unlinked; readlink names a pipe by the
   inode fstat reports; a descriptor that is not open is ENOENT. It prints
   nothing that depends on the host (no inode or descriptor numbers), so
   that qemu-user's output is the reference (tests/fs_proc.rs). argv[1] is
   a scratch directory to work in. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char name[64];

/* "DIR/FD", in a static buffer. */
static const char *at(const char *dir, int fd)
{
	snprintf(name, sizeof name, "%s/%d", dir, fd);
	return name;
}

/* Prints what a call gave: its value, or the error's name. */
static void say(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, errno == ENOENT ? "ENOENT" : errno == ENOTDIR ? "ENOTDIR" : errno == ELOOP ? "ELOOP" : strerror(errno));
	else
		printf("%s: %ld\n", what, r);
}

/* Reads up to n bytes and prints them. */
static void take(const char *what, int fd, size_t n)
{
	char buf[64] = { 0 };
	ssize_t got = read(fd, buf, n < sizeof buf - 1 ? n : sizeof buf - 1);
	if (got < 0)
		say(what, got);
	else
		printf("%s: \"%.*s\"\n", what, (int)got, buf);
}

static void pipes(void)
{
	int p[2];
	if (pipe(p))
		exit(2);
	write(p[1], "abc", 3);
	int r = open(at("/proc/self/fd", p[0]), O_RDONLY);
	take("pipe read again", r, 2);
	take("pipe read end", p[0], 9);
	int w = open(at("/dev/fd", p[1]), O_WRONLY);
	write(w, "de", 2);
	take("written by the new end", p[0], 9);
	/* The read end opened for writing is a writer of the same pipe. */
	int w2 = open(at("/proc/self/fd", p[0]), O_WRONLY);
	write(w2, "fg", 2);
	take("written by the read end opened to write", r, 9);
	int rw = open(at("/proc/self/fd", p[0]), O_RDWR);
	write(rw, "hi", 2);
	take("O_RDWR reads what it wrote", rw, 9);
	printf("flags: %s %s\n", (fcntl(w2, F_GETFL) & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "other",
	       (fcntl(rw, F_GETFL) & O_ACCMODE) == O_RDWR ? "O_RDWR" : "other");
	close(p[1]);
	close(w);
	close(w2);
	close(rw);
	take("end of file once every writer is closed", r, 9);

	struct stat st, again, via;
	char link[64] = { 0 }, expect[64];
	fstat(p[0], &st);
	fstat(r, &again);
	stat(at("/proc/self/fd", p[0]), &via);
	readlink(at("/proc/self/fd", p[0]), link, sizeof link - 1);
	snprintf(expect, sizeof expect, "pipe:[%lu]", (unsigned long)st.st_ino);
	printf("readlink names fstat's inode: %s\n", strcmp(link, expect) ? link : "yes");
	printf("the same pipe: %s, stat through the link: %s\n", st.st_ino == again.st_ino ? "yes" : "no",
	       S_ISFIFO(via.st_mode) && via.st_ino == st.st_ino ? "the pipe" : "other");
	say("a pipe is no directory", open(at("/proc/self/fd", p[0]) , O_RDONLY | O_DIRECTORY));
	char sub[80];
	snprintf(sub, sizeof sub, "%s/x", at("/proc/self/fd", p[0]));
	say("nothing under a pipe", open(sub, O_RDONLY));
	close(p[0]);
	close(r);
}

static void files(void)
{
	int f = open("f.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	write(f, "hello world", 11);
	int g = open(at("/proc/self/fd", f), O_RDONLY);
	take("a new description starts at 0", g, 5);
	printf("the old one is still at %ld, the new one at %ld\n", (long)lseek(f, 0, SEEK_CUR), (long)lseek(g, 0, SEEK_CUR));
	printf("its own access mode: %s\n", (fcntl(g, F_GETFL) & O_ACCMODE) == O_RDONLY ? "O_RDONLY" : "other");
	int h = open(at("/dev/fd", f), O_WRONLY | O_APPEND);
	write(h, "!", 1);
	close(h);
	lseek(g, 0, SEEK_SET);
	take("O_APPEND appends", g, 20);
	/* Opened read-only, opened again to write and truncate. */
	int t = open(at("/proc/self/fd", g), O_WRONLY | O_TRUNC);
	struct stat st;
	fstat(f, &st);
	printf("O_TRUNC truncates: size %ld\n", (long)st.st_size);
	write(t, "new", 3);
	close(t);
	unlink("f.txt");
	int u = open(at("/dev/fd", f), O_RDONLY);
	take("an unlinked file opens again", u, 20);
	close(u);
	close(g);
	close(f);

	int d = open(".", O_RDONLY | O_DIRECTORY);
	int e = open("e.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	write(e, "in the directory", 16);
	close(e);
	char path[80];
	snprintf(path, sizeof path, "/proc/self/fd/%d/e.txt", d);
	int in = open(path, O_RDONLY);
	take("a file under a directory's link", in, 30);
	close(in);
	unlink("e.txt");
	close(d);
}

static void names(void)
{
	char link[64] = { 0 };
	struct stat st;
	readlink("/dev/stdin", link, sizeof link - 1);
	lstat("/dev/stdin", &st);
	printf("/dev/stdin -> %s (%s)\n", link, S_ISLNK(st.st_mode) ? "a link" : "no link");
	memset(link, 0, sizeof link);
	readlink("/dev/stderr", link, sizeof link - 1);
	printf("/dev/stderr -> %s\n", link);
	memset(link, 0, sizeof link);
	readlink("/dev/fd", link, sizeof link - 1);
	printf("/dev/fd -> %s\n", link);
	say("read a closed descriptor", open("/proc/self/fd/99", O_RDONLY));
	say("create at a closed descriptor", open("/dev/fd/99", O_WRONLY | O_CREAT, 0644));
	say("readlink a closed descriptor", readlink("/proc/self/fd/99", link, sizeof link));
	say("O_NOFOLLOW", open("/proc/self/fd/1", O_WRONLY | O_NOFOLLOW));
	snprintf(link, sizeof link, "/proc/%d/fd/1", (int)getpid());
	int out = open(link, O_WRONLY);
	write(out, "through /proc/PID/fd/1\n", 23);
	close(out);
	out = open("/dev/stdout", O_WRONLY | O_TRUNC);
	write(out, "through /dev/stdout\n", 20);
	close(out);
	int in = open("/dev/stdin", O_RDONLY);
	take("/dev/stdin", in, 20);
	close(in);
}

int main(int argc, char **argv)
{
	if (argc < 2 || chdir(argv[1]))
		return 2;
	setvbuf(stdout, NULL, _IONBF, 0);
	pipes();
	files();
	names();
	return 0;
}

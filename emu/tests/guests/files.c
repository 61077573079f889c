/* Files and error paths: a read-only file named on the command line is
   opened, stat'ed, read, seeked and pread; a missing file and a bad buffer
   give ENOENT and EFAULT. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	struct stat st;
	fstat(fd, &st);
	printf("fd %d, regular %d, size %lld\n", fd, S_ISREG(st.st_mode), (long long)st.st_size);
	char buf[100];
	ssize_t n = read(fd, buf, 10);
	printf("read %zd: %.*s\n", n, (int)n, buf);
	printf("lseek end: %lld\n", (long long)lseek(fd, 0, SEEK_END));
	n = pread(fd, buf, 5, 3);
	printf("pread %zd: %.*s\n", n, (int)n, buf);
	FILE *f = fdopen(fd, "r");
	rewind(f);
	int lines = 0;
	while (fgets(buf, sizeof buf, f))
		lines++;
	printf("lines: %d\n", lines);
	fclose(f);
	errno = 0;
	printf("missing: %d %s\n", open("/no/such/file", O_RDONLY), errno == ENOENT ? "ENOENT" : "?");
	errno = 0;
	printf("bad buffer: %zd %s\n", write(1, (void *)16, 4), errno == EFAULT ? "EFAULT" : "?");
	errno = 0;
	printf("bad fd: %zd %s\n", write(42, "x", 1), errno == EBADF ? "EBADF" : "?");
	return 0;
}

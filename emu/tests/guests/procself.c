/* /proc/self as the emulator makes it: maps, fd/ and its links, and
   /dev/urandom from the seeded stream. Output is the emulator's own (qemu
   shows the host's processes), checked by tests/fs_proc.rs. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	char buf[8192];
	int fd = open("/proc/self/maps", O_RDONLY);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	printf("maps fd %d\n%s", fd, buf);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	printf("fds:");
	while ((e = readdir(d)))
		printf(" %s", e->d_name);
	printf("\n");
	char link[256] = { 0 };
	readlink("/proc/self/fd/3", link, sizeof link - 1);
	printf("fd 3 -> %s\n", link);
	unsigned char r[8];
	int u = open("/dev/urandom", O_RDONLY);
	read(u, r, sizeof r);
	printf("urandom %02x%02x%02x%02x%02x%02x%02x%02x\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
	return 0;
}

/* A guest that reads files, for the lab's file tests
   (tests/scenario_files.rs): prints its working directory, then each file
   named on the command line with its contents. Exits with the number of
   files it could not open. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char cwd[256];
	int missing = 0;
	if (getcwd(cwd, sizeof cwd))
		printf("cwd %s\n", cwd);
	for (int i = 1; i < argc; i++) {
		char buf[4096];
		int fd = open(argv[i], O_RDONLY);
		if (fd < 0) {
			printf("%s: cannot open\n", argv[i]);
			missing++;
			continue;
		}
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		printf("%s: %.*s\n", argv[i], n < 0 ? 0 : (int)n, buf);
	}
	return missing;
}

/* An unknown system call must fail with ENOSYS and the program go on. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	errno = 0;
	long r = syscall(987654, 1, 2, 3);
	printf("syscall 987654 returned %ld, errno %s\n", r, errno == ENOSYS ? "ENOSYS" : "something else");
	return 0;
}

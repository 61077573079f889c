/* stdio basics: arguments, environment-free formatting, floating point,
   stderr, and a non-zero exit status. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	printf("hello from %d argument(s)\n", argc);
	for (int i = 1; i < argc; i++)
		printf("argv[%d] = \"%s\" (%zu bytes)\n", i, argv[i], strlen(argv[i]));
	printf("%5.3f %e %g %x %lld %c %s\n", 3.14159, 1e-300, 2.5e10, 0xbeefu, -1234567890123LL, 'z', "end");
	fprintf(stderr, "to stderr\n");
	return 7;
}

/* Heap traffic: brk-sized and mmap-sized blocks, realloc growth (mremap),
   frees in a scrambled order, and a checksum over everything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 600

static unsigned long next = 12345;
static unsigned rnd(void)
{
	next = next * 6364136223846793005UL + 1442695040888963407UL;
	return (unsigned)(next >> 33);
}

int main(void)
{
	static unsigned char *blocks[N];
	static size_t sizes[N];
	unsigned long sum = 0;

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			size_t size = (rnd() % 11 == 0) ? 1000 + rnd() % 200000 : 1 + rnd() % 512;
			blocks[i] = malloc(size);
			if (!blocks[i])
				return 1;
			sizes[i] = size;
			memset(blocks[i], (int)(i + round), size);
		}
		for (int i = 0; i < N; i += 5) {
			size_t size = sizes[i] * 2 + 150000 * (i % 2);
			blocks[i] = realloc(blocks[i], size);
			if (!blocks[i])
				return 2;
			memset(blocks[i] + sizes[i], 0x5a, size - sizes[i]);
			sizes[i] = size;
		}
		for (int i = 0; i < N; i++)
			for (size_t j = 0; j < sizes[i]; j += 97)
				sum = sum * 31 + blocks[i][j];
		for (int k = 0; k < N; k++) {
			int i = (k * 7919) % N;
			free(blocks[i]);
		}
		printf("round %d: checksum %016lx\n", round, sum);
	}
	char *s = NULL;
	for (int i = 0; i < 1000; i++) {
		s = realloc(s, (size_t)(i + 1) * 64);
		memset(s + i * 64, 'a' + i % 26, 64);
	}
	printf("tail %.10s\n", s + 64 * 990);
	free(s);
	return 0;
}

/* Reads all of standard input with stdio and with read(2), and reports
   what it saw. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	char line[256];
	int lines = 0, words = 0, bytes = 0;
	if (!fgets(line, sizeof line, stdin))
		return 2;
	printf("first line: %s", line);
	char buf[64];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		int in_word = 0;
		for (ssize_t i = 0; i < n; i++) {
			bytes++;
			if (buf[i] == '\n')
				lines++;
			if (isspace((unsigned char)buf[i]))
				in_word = 0;
			else if (!in_word) {
				in_word = 1;
				words++;
			}
			buf[i] = (char)toupper((unsigned char)buf[i]);
		}
		fwrite(buf, 1, (size_t)n, stdout);
	}
	printf("\nrest: %d lines, %d words, %d bytes; read returned %zd\n", lines, words, bytes, n);
	return 0;
}

/* SPDX-License-Identifier: MIT */
#include "secret.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

struct vault {
	size_t len;
	unsigned char pad[SECRET_MAX];
	unsigned char masked[SECRET_MAX];
};

static struct vault *v;

int secret_set(const char *pw, size_t len)
{
	if (len > SECRET_MAX)
		return -1;
	if (!v) {
		void *p = mmap(NULL, sizeof *v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		               -1, 0);
		if (p == MAP_FAILED)
			return -1;
		v = p;
		(void)madvise(v, sizeof *v, MADV_DONTDUMP); /* best effort */
		(void)mlock(v, sizeof *v);                  /* best effort: never swapped */
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = getrandom(v->pad + got, len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < len; i++)
		v->masked[i] = (unsigned char)pw[i] ^ v->pad[i];
	v->len = len;
	return 0;
}

int secret_present(void)
{
	return v && v->len > 0;
}

size_t secret_reveal(char *buf, size_t cap)
{
	size_t n = v ? v->len : 0;

	if (n + 1 > cap)
		n = 0;
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(v->masked[i] ^ v->pad[i]);
	buf[n] = '\0';
	return n;
}

void secret_wipe(void)
{
	if (v)
		explicit_bzero(v, sizeof *v);
}

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

static struct vault *v; /* SECRET_SLOTS of them, in one mapping */

int secret_set_slot(enum secret_slot slot, const char *pw, size_t len)
{
	if (len > SECRET_MAX || slot >= SECRET_SLOTS)
		return -1;
	if (!v) {
		void *p = mmap(NULL, SECRET_SLOTS * sizeof *v, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		v = p;
		(void)madvise(v, SECRET_SLOTS * sizeof *v, MADV_DONTDUMP); /* best effort */
		(void)mlock(v, SECRET_SLOTS * sizeof *v); /* best effort: never swapped */
	}
	struct vault *s = &v[slot];
	size_t got = 0;
	while (got < len) {
		ssize_t n = getrandom(s->pad + got, len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < len; i++)
		s->masked[i] = (unsigned char)pw[i] ^ s->pad[i];
	s->len = len;
	return 0;
}

size_t secret_reveal_slot(enum secret_slot slot, char *buf, size_t cap)
{
	size_t n = v && slot < SECRET_SLOTS ? v[slot].len : 0;

	if (n + 1 > cap)
		n = 0;
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(v[slot].masked[i] ^ v[slot].pad[i]);
	buf[n] = '\0';
	return n;
}

size_t secret_reveal(char *buf, size_t cap)
{
	return secret_reveal_slot(SECRET_DATA, buf, cap);
}

void secret_wipe(void)
{
	if (v)
		explicit_bzero(v, SECRET_SLOTS * sizeof *v);
}

/* SPDX-License-Identifier: MIT */
/* bench/pairs: two commands timed as whole processes, A B A B ..., each run from
 * posix_spawn to its reaping (CLOCK_MONOTONIC), the ratio taken pair by pair; prints
 * the medians of A, of B and of A/B, with the quartiles of A/B. For a change's effect
 * on rlock's own cost (issue 40): a burst of load hits both sides of a pair alike.
 * Usage: pairs N 'COMMAND A' 'COMMAND B'   (each split on spaces; no shell)
 * Output goes to /dev/null; an exit status other than 0 is counted and reported. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void split(char *s, char **argv, int max)
{
	int n = 0;
	for (char *t = strtok(s, " "); t && n < max - 1; t = strtok(NULL, " "))
		argv[n++] = t;
	argv[n] = NULL;
}

static double run(char **argv, posix_spawn_file_actions_t *fa, int *bad)
{
	struct timespec a, b;
	pid_t pid;
	int st;

	clock_gettime(CLOCK_MONOTONIC, &a);
	if (posix_spawnp(&pid, argv[0], fa, NULL, argv, environ) != 0) {
		perror(argv[0]);
		exit(2);
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		(*bad)++;
	return (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
}

static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

static double q(double *v, int n, double p)
{
	qsort(v, n, sizeof *v, cmp);
	return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
	char *a[64], *b[64];
	posix_spawn_file_actions_t fa;
	int bad_a = 0, bad_b = 0;

	if (argc != 4 || atoi(argv[1]) < 1) {
		fprintf(stderr, "usage: pairs N 'COMMAND A' 'COMMAND B'\n");
		return 2;
	}
	int n = atoi(argv[1]);
	split(argv[2], a, 64);
	split(argv[3], b, 64);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double *ta = calloc(n, sizeof *ta), *tb = calloc(n, sizeof *tb), *r = calloc(n, sizeof *r);
	for (int i = 0; i < 3; i++) { /* warm-up */
		run(a, &fa, &bad_a);
		run(b, &fa, &bad_b);
	}
	bad_a = bad_b = 0;
	for (int i = 0; i < n; i++) {
		if (i & 1) {
			tb[i] = run(b, &fa, &bad_b);
			ta[i] = run(a, &fa, &bad_a);
		} else {
			ta[i] = run(a, &fa, &bad_a);
			tb[i] = run(b, &fa, &bad_b);
		}
		r[i] = ta[i] / tb[i];
	}
	double r25 = q(r, n, 0.25), r50 = q(r, n, 0.5), r75 = q(r, n, 0.75);
	printf("A %.0f µs  B %.0f µs  A/B %.3f (p25 %.3f, p75 %.3f)  n=%d%s\n", q(ta, n, 0.5),
	       q(tb, n, 0.5), r50, r25, r75, n, bad_a || bad_b ? "  (some runs failed)" : "");
	if (bad_a || bad_b)
		fprintf(stderr, "pairs: failed runs: A %d, B %d\n", bad_a, bad_b);
	return 0;
}

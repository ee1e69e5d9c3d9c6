/* SPDX-License-Identifier: MIT */
/* bench/floor-serial: the first floor (issue 25), kept beside bench/floor.c to show what
 * the ordering is worth: here every step waits for the one before. Connect to
 * 127.0.0.1:PORT, SET KEY TOKEN NX PX 30000, read the reply, fork and exec the command, wait for
 * it, DEL KEY. With -w, one more fork: a watchdog in its own session that waits on a pipe and kills
 * the command's group when the pipe ends without a goodbye (what rlock's watchdog guarantees, minus
 * the renewal deadlines); the command, in its own group, execs only once the watchdog is forked (a
 * go pipe). No renewal, no token check on release, no signal handling: not a lock to use. Usage:
 * floor-serial [-w] PORT KEY CMD [ARG...]; built by bench/run with cc alone. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int roundtrip(int fd, const char *req, char *rep, size_t n)
{
	size_t len = strlen(req);
	ssize_t r;

	if (write(fd, req, len) != (ssize_t)len)
		return -1;
	r = read(fd, rep, n - 1);
	if (r <= 0)
		return -1;
	rep[r] = '\0';
	return 0;
}

static pid_t watchdog(pid_t pgid, int *wfd)
{
	int p[2];

	if (pipe(p) < 0)
		return -1;
	pid_t w = fork();
	if (w == 0) {
		char c;
		close(p[1]);
		setsid();
		if (read(p[0], &c, 1) != 1)
			kill(-pgid, SIGKILL); /* no goodbye */
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return w;
}

int main(int argc, char **argv)
{
	int wd = argc > 1 && !strcmp(argv[1], "-w");
	int wfd = -1;
	unsigned char rnd[16];
	char tok[33], req[512], rep[256];
	struct sockaddr_in sa = {.sin_family = AF_INET};

	argv += wd;
	argc -= wd;
	if (argc < 4)
		return 64;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return 69;
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		return 71;
	for (int i = 0; i < 16; i++)
		snprintf(tok + 2 * i, 3, "%02x", rnd[i]);
	size_t kl = strlen(argv[2]);
	snprintf(
	    req, sizeof req,
	    "*6\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$32\r\n%s\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n",
	    kl, argv[2], tok);
	if (roundtrip(fd, req, rep, sizeof rep) < 0 || strncmp(rep, "+OK", 3))
		return 75;
	int go[2] = {-1, -1};
	if (wd && pipe(go) < 0)
		return 71;
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		setpgid(0, 0);
		if (wd && (close(go[1]), read(go[0], &c, 1) != 1))
			_exit(71);
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	setpgid(pid, pid);
	if (wd) {
		close(go[0]);
		if (watchdog(pid, &wfd) < 0)
			return 71;
		(void)!write(go[1], "", 1);
		close(go[1]);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0)
		;
	if (wfd >= 0)
		(void)!write(wfd, "", 1);
	snprintf(req, sizeof req, "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", kl, argv[2]);
	if (roundtrip(fd, req, rep, sizeof rep) < 0)
		return 69;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* SPDX-License-Identifier: MIT */
/* bench/floor: the least a Redis lock wrapper that does what rlock does can cost, the
 * yardstick bench/run holds rlock against (issue 40). In rlock's order:
 *   connect to 127.0.0.1:PORT; write SET KEY TOKEN NX PX 30000 (the reply not read yet);
 *   fork a watchdog while the server answers: it calls setsid, writes a ready byte, reads
 *   the command's group from its pipe and kills that group if the pipe ends without a
 *   goodbye; read the reply; vfork the command: setpgid, PR_SET_PDEATHSIG, read the
 *   watchdog's ready byte, write the group on the watchdog's pipe, exec; wait for it;
 *   say goodbye to the watchdog; DEL KEY (one round trip).
 * No renewal, no token check on release, no fence, no owner record, no history, no
 * signal handling, no deadlines: not a lock to use. bench/floor-serial.c is the first
 * floor, each step after the one before.
 * Usage: floor PORT KEY CMD [ARG...]; built by bench/run with cc alone. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The watchdog: out of the caller's session, then the group to guard, then a goodbye
 * (one byte) or the end of its pipe (the caller died: kill the group). */
static pid_t watchdog(int ready, int *wfd)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t w = fork();
	if (w == 0) {
		int64_t pg = 0;
		char c;
		close(p[1]);
		if (setsid() < 0)
			_exit(71);
		(void)!write(ready, "", 1);
		if (read(p[0], &pg, sizeof pg) != (ssize_t)sizeof pg)
			_exit(0); /* no command */
		if (read(p[0], &c, 1) != 1)
			kill(-(pid_t)pg, SIGKILL); /* no goodbye */
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return w;
}

int main(int argc, char **argv)
{
	unsigned char rnd[16];
	char tok[33], req[512], rep[256];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int ready[2], wfd = -1;

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
	int len = snprintf(
	    req, sizeof req,
	    "*6\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$32\r\n%s\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n",
	    kl, argv[2], tok);
	if (len < 0 || (size_t)len >= sizeof req || write(fd, req, (size_t)len) != len)
		return 69;
	/* the watchdog's fork while the server answers */
	if (pipe2(ready, O_CLOEXEC) < 0 || watchdog(ready[1], &wfd) < 0)
		return 71;
	close(ready[1]);
	ssize_t r = read(fd, rep, sizeof rep - 1);
	if (r <= 0)
		return 69;
	rep[r] = '\0';
	if (strncmp(rep, "+OK", 3))
		return 75; /* busy: the watchdog ends at the end of its pipe */
	pid_t parent = getpid();
	pid_t pid = vfork();
	if (pid == 0) {
		char c;
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || read(ready[0], &c, 1) != 1)
			_exit(71);
		int64_t pg = getpid();
		if (write(wfd, &pg, sizeof pg) != (ssize_t)sizeof pg)
			_exit(71);
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	close(ready[0]);
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0)
		;
	(void)!write(wfd, "", 1); /* goodbye */
	len = snprintf(req, sizeof req, "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", kl, argv[2]);
	if (write(fd, req, (size_t)len) != len || read(fd, rep, sizeof rep - 1) <= 0)
		return 69;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

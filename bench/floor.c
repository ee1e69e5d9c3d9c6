/* SPDX-License-Identifier: MIT */
/* bench/floor: the least a Redis lock wrapper that does what rlock does can cost, the
 * yardstick bench/run holds rlock against (issue 40). In rlock's order:
 *   connect to 127.0.0.1:PORT; write SET KEY TOKEN NX PX 30000 (the reply not read yet);
 *   fork a watchdog while the server answers: it calls setsid, writes a ready byte, reads
 *   the command's group from its pipe and kills that group if the pipe ends without a
 *   goodbye; read the reply; vfork the command: setpgid, PR_SET_PDEATHSIG, read the
 *   watchdog's ready byte, write the group on the watchdog's pipe, exec; wait for it;
 *   say goodbye to the watchdog; DEL KEY (one round trip).
 * With -W (the hand-off and throughput floor): a busy lock is waited for on a wake list,
 * BLPOP KEY:wake (1 s at most, then SET NX again), and the release pushes one wake-up in
 * the same round trip as its DEL: DEL KEY, RPUSH KEY:wake 1, LTRIM KEY:wake 0 0 (one
 * write, three replies; the list never holds more than one stale wake-up).
 * No renewal, no token check on release, no fence, no owner record, no history, no
 * signal handling, no deadlines: not a lock to use. bench/floor-serial.c is the first
 * floor, each step after the one before.
 * With -G ACQ REL (the guarded floor): the least rlock's guarantees ask of the server, by
 * two scripts already loaded (bench/run: SCRIPT LOAD, their SHA-1s here): the acquire
 * EVALSHA ACQ 3 KEY KEY:owner KEY:fence TOKEN PX PID (SET NX PX, INCR the fence, HSET
 * the holder's record with its fence and pid, PEXPIRE it: the fence as an integer, or
 * nil), the release EVALSHA REL 2 KEY KEY:owner TOKEN (GET and compare, DEL both,
 * PUBLISH KEY:released: 1, or 0 when the lock was not ours); no history, no waiters.
 * Usage: floor [-W | -G ACQ REL] PORT KEY CMD [ARG...]; built by bench/run with cc alone. */
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

/* Read n replies (each a line: +OK, :1, $-1, *-1 ... or a short bulk / array); the first
 * one's first byte in *first. Enough for SET, DEL, RPUSH, LTRIM and BLPOP's replies here. */
static int replies(int fd, int n, char *first, char *buf, size_t cap)
{
	size_t have = 0;
	int lines = 0, need = 0;

	*first = 0;
	while (n > 0) {
		ssize_t r = read(fd, buf + have, cap - have - 1);
		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = 0;
		if (!*first)
			*first = buf[0];
		/* count whole replies: a line, or *2 with two bulks (BLPOP: 5 lines) */
		lines = 0;
		for (size_t i = 0; i + 1 < have; i++)
			if (buf[i] == '\r' && buf[i + 1] == '\n')
				lines++;
		need = 0;
		for (size_t i = 0, k = 0; k < (size_t)n && i < have; k++) {
			int l = buf[i] == '*' && buf[i + 1] == '2'   ? 5
			        : buf[i] == '$' && buf[i + 1] != '-' ? 2
			                                             : 1;
			need += l;
			for (int j = 0; j < l && i < have; j++) {
				char *e = strstr(buf + i, "\r\n");
				if (!e)
					break;
				i = (size_t)(e - buf) + 2;
			}
		}
		if (lines >= need)
			return 0;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned char rnd[16];
	char tok[33], req[512], rep[256];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int ready[2], wfd = -1;
	int wait = argc > 1 && !strcmp(argv[1], "-W");
	const char *gacq = NULL, *grel = NULL;

	argv += wait;
	argc -= wait;
	if (!wait && argc > 3 && !strcmp(argv[1], "-G")) {
		gacq = argv[2];
		grel = argv[3];
		argv += 3;
		argc -= 3;
	}
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
	char pids[24];
	int pl = snprintf(pids, sizeof pids, "%ld", (long)getpid());
	int len =
	    gacq ? snprintf(req, sizeof req,
	                    "*9\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n3\r\n$%zu\r\n%s\r\n"
	                    "$%zu\r\n%s:owner\r\n$%zu\r\n%s:fence\r\n$32\r\n%s\r\n$5\r\n30000\r\n"
	                    "$%d\r\n%s\r\n",
	                    gacq, kl, argv[2], kl + 6, argv[2], kl + 6, argv[2], tok, pl, pids)
	         : snprintf(req, sizeof req,
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
	while (wait && strncmp(rep, "+OK", 3)) {
		char bl[256], c;
		int bn =
		    snprintf(bl, sizeof bl, "*3\r\n$5\r\nBLPOP\r\n$%zu\r\n%s:wake\r\n$1\r\n1\r\n",
		             kl + 5, argv[2]);
		if (write(fd, bl, (size_t)bn) != bn || replies(fd, 1, &c, rep, sizeof rep) < 0)
			return 69;
		if (write(fd, req, (size_t)len) != len || (r = read(fd, rep, sizeof rep - 1)) <= 0)
			return 69;
		rep[r] = '\0';
	}
	if (gacq ? rep[0] != ':' : strncmp(rep, "+OK", 3) != 0)
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
	len = grel ? snprintf(req, sizeof req,
	                      "*6\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n2\r\n$%zu\r\n%s\r\n"
	                      "$%zu\r\n%s:owner\r\n$32\r\n%s\r\n",
	                      grel, kl, argv[2], kl + 6, argv[2], tok)
	           : snprintf(req, sizeof req, "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", kl, argv[2]);
	if (wait) /* the wake-up, in the same write */
		len += snprintf(req + len, sizeof req - (size_t)len,
		                "*3\r\n$5\r\nRPUSH\r\n$%zu\r\n%s:wake\r\n$1\r\n1\r\n"
		                "*4\r\n$5\r\nLTRIM\r\n$%zu\r\n%s:wake\r\n$1\r\n0\r\n$1\r\n0\r\n",
		                kl + 5, argv[2], kl + 5, argv[2]);
	char c;
	if (write(fd, req, (size_t)len) != len ||
	    replies(fd, wait ? 3 : 1, &c, rep, sizeof rep) < 0)
		return 69;
	if (grel && c != ':')
		return 69; /* a script error (not loaded: bench/run loads both) */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* SPDX-License-Identifier: MIT */
#include "holder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "procstat.h"

void holder_human_ms(char *buf, size_t n, long long ms)
{
	if (ms < 0)
		snprintf(buf, n, "-");
	else if (ms < 10000)
		snprintf(buf, n, "%.1fs", (double)ms / 1000);
	else if (ms < 60000) /* one family: 3.0s, 29s, 4m05s, 2h05m (never 0m29s) */
		snprintf(buf, n, "%llds", ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, n, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, n, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
}

const char *holder_broken(const struct broken *b, const char *token, char *buf, size_t n)
{
	char ago[32];

	if (!b->known || !token[0] || !strstr(b->tokens, token))
		return NULL;
	holder_human_ms(ago, sizeof ago, b->ago_ms);
	log_reason(buf, n, "broken %s ago by --break from %s pid %lld (user %s)%s%s%s", ago,
	           b->host[0] ? b->host : "?", b->pid, b->user[0] ? b->user : "?",
	           b->label[0] ? " [" : "", b->label, b->label[0] ? "]" : "");
	return buf;
}

/* Escaped for a terminal; "?" when empty (unless empty_ok). */
static void field(char *dst, size_t n, const char *s, int empty_ok)
{
	if (!*s && !empty_ok)
		s = "?";
	log_escape(dst, n, s, strlen(s));
}

void holder_text(const struct holder *h, long long now_unix_ms, struct holder_text *t)
{
	field(t->host, sizeof t->host, h->host, 0);
	field(t->user, sizeof t->user, h->user, 0);
	field(t->cmd, sizeof t->cmd, h->cmd, 0);
	field(t->label, sizeof t->label, h->label, 1);
	snprintf(t->pid, sizeof t->pid, "?");
	if (h->pid >= 0)
		snprintf(t->pid, sizeof t->pid, "%lld", h->pid);
	snprintf(t->fence, sizeof t->fence, "?");
	if (h->has_fence)
		snprintf(t->fence, sizeof t->fence, "%lld", h->fence);
	holder_human_ms(t->held, sizeof t->held, h->start_ms > 0 ? now_unix_ms - h->start_ms : -1);
	holder_human_ms(t->left, sizeof t->left, h->pttl_ms);
}

const char *holder_format(const struct holder *h, unsigned what, char *buf, size_t n)
{
	struct holder_text t;
	int raw = (what & HOLDER_RAW) != 0;

	if (h->split[0]) { /* Redlock: nobody holds a majority of the nodes (lock.h) */
		if (raw)
			snprintf(buf, n, "%s", h->split);
		else
			log_escape(buf, n, h->split, strlen(h->split));
		return buf;
	}
	if (h->delayed) { /* nobody holds it: a lease ended unreleased (lock.h) */
		char left[32];
		holder_human_ms(left, sizeof left, h->pttl_ms);
		/* its time unknown (a Redlock merge no node's answer gave one): no "-" */
		snprintf(buf, n, "closed by lock-delay%s%s%s", h->pttl_ms >= 0 ? " for " : "",
		         h->pttl_ms >= 0 ? left : "", h->pttl_ms >= 0 ? " more" : "");
		return buf;
	}
	if (raw) {
		snprintf(t.host, sizeof t.host, "%s", h->host[0] ? h->host : "?");
		snprintf(t.cmd, sizeof t.cmd, "%s", h->cmd[0] ? h->cmd : "?");
		snprintf(t.label, sizeof t.label, "%s", h->label);
		snprintf(t.pid, sizeof t.pid, "?");
		if (h->pid >= 0)
			snprintf(t.pid, sizeof t.pid, "%lld", h->pid);
	} else {
		holder_text(h, 0, &t);
	}
	int cmd = (what & HOLDER_CMD) != 0, label = (what & HOLDER_LABEL) && t.label[0];
	char kept[96] = "", left[32];
	if (h->queued) { /* nobody holds it: the fair queue goes first */
		snprintf(buf, n, "%d --fair waiter%s first", h->queued,
		         h->queued == 1 ? " goes" : "s go");
		return buf;
	}
	if (h->writer) { /* nobody holds it: a waiting exclusive request goes first */
		snprintf(buf, n, "an exclusive request waits, it goes first");
		return buf;
	}
	if (h->reserved) { /* nobody holds it: kept for the request that preempted its holder */
		holder_human_ms(left, sizeof left, h->pttl_ms);
		snprintf(buf, n, "reserved for the --preempt request of %s pid %s%s%s%s%s%s%s",
		         t.host, t.pid, label ? " [" : "", label ? t.label : "", label ? "]" : "",
		         h->pttl_ms >= 0 ? " for " : "", h->pttl_ms >= 0 ? left : "",
		         h->pttl_ms >= 0 ? " more" : "");
		return buf;
	}
	if (h->kept) { /* nobody runs: the command ended, --min-hold keeps the lease */
		holder_human_ms(left, sizeof left, h->pttl_ms);
		snprintf(kept, sizeof kept, ", its command has ended (kept by --min-hold%s%s%s)",
		         h->pttl_ms >= 0 ? " for " : "", h->pttl_ms >= 0 ? left : "",
		         h->pttl_ms >= 0 ? " more" : "");
	}
	snprintf(buf, n, "%s pid %s%s%s%s%s%s%s%s", t.host, t.pid, cmd ? " (" : "",
	         cmd ? t.cmd : "", cmd ? ")" : "", label ? " [" : "", label ? t.label : "",
	         label ? "]" : "", kept);
	return buf;
}

/* The boot time (unix s) from /proc/stat, or -1. */
static long long boot_time(void)
{
	char line[256];
	long long bt = -1;
	FILE *f = fopen("/proc/stat", "re");

	while (f && bt < 0 && fgets(line, sizeof line, f))
		if (sscanf(line, "btime %lld", &bt) != 1)
			bt = -1;
	if (f)
		fclose(f);
	return bt;
}

/* /proc/PID/stat: the state letter and the start time (unix ms): 0, or -1 (no such
 * file or an unexpected one). */
static int proc_stat(long long pid, char *state, long long *start_unix_ms)
{
	struct proc_stat st;

	if (proc_stat_read(pid, &st) < 0)
		return -1;
	*state = st.state;
	long long bt = boot_time(), hz = sysconf(_SC_CLK_TCK);
	*start_unix_ms =
	    bt < 0 || hz <= 0
	        ? -1
	        : bt * 1000 + (long long)(st.start_ticks * 1000 / (unsigned long long)hz);
	return 0;
}

/* The pid namespace's inode number in *ino: readlink's "pid:[N]" (the N stat gives as
 * st_ino, without the look-up of the namespace's inode), else stat's. 0, or -1. */
static int pid_ns(unsigned long long *ino)
{
	char link[64];
	struct stat st;
	int used = 0;
	ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);

	if (n > 0) {
		link[n] = '\0';
		if (sscanf(link, "pid:[%llu]%n", ino, &used) == 1 && used == n)
			return 0;
	}
	if (stat("/proc/self/ns/pid", &st) < 0)
		return -1;
	*ino = (unsigned long long)st.st_ino;
	return 0;
}

const char *holder_proc_self(void)
{
	static char self[80];
	char boot[48] = "";
	unsigned long long ns;

	if (self[0])
		return self;
	/* one read, no stdio buffer: "UUID\n" */
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, boot, sizeof boot - 1);
		boot[n > 0 ? n : 0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		close(fd);
	}
	if (boot[0] && !strchr(boot, ' ') && pid_ns(&ns) == 0)
		snprintf(self, sizeof self, "%s %llu", boot, ns);
	return self;
}

enum holder_proc holder_process(const struct holder *h)
{
	char host[256] = "", state = '?';
	long long started = -1;
	const char *self = holder_proc_self();

	if (h->pid <= 0 || h->pid > INT_MAX || !h->host[0] ||
	    gethostname(host, sizeof host - 1) < 0 || strcmp(host, h->host) != 0)
		return HOLDER_ELSEWHERE;
	/* Who the pid names: without the holder's boot and pid namespace (an older record,
	 * or this host's unknown), nothing can be told from a pid here. */
	if (!h->proc[0] || !self[0])
		return HOLDER_ELSEWHERE;
	size_t boot_len = strcspn(self, " ");
	if (strncmp(h->proc, self, boot_len) != 0 || h->proc[boot_len] != ' ') {
		/* Another boot: gone when the holder took the lock before this boot began
		 * (this host rebooted since); else it is another machine of the same name. */
		long long bt = boot_time();
		return bt > 0 && h->start_ms > 0 && h->start_ms < bt * 1000 - 2000
		           ? HOLDER_GONE
		           : HOLDER_ELSEWHERE;
	}
	if (strcmp(h->proc, self) != 0)
		return HOLDER_ELSEWHERE; /* another pid namespace: its pid is not ours */
	if (kill((pid_t)h->pid, 0) < 0 && errno == ESRCH)
		return HOLDER_GONE;
	if (proc_stat(h->pid, &state, &started) < 0)
		return HOLDER_ELSEWHERE; /* kill(2) found it; /proc says no more */
	/* A zombie looks alive to kill(2). A process that started after the holder took the
	 * lock (its start time, with a second for /proc's coarse boot time) is another one
	 * that got the pid. */
	if (state == 'Z' || state == 'X' ||
	    (started > 0 && h->start_ms > 0 && started > h->start_ms + 2000))
		return HOLDER_GONE;
	return started > 0 && h->start_ms > 0 ? HOLDER_ALIVE : HOLDER_ELSEWHERE;
}

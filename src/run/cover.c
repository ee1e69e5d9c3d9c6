/* SPDX-License-Identifier: MIT */
#include "cover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procstat.h"

#define COVER_WALK    4096 /* processes */
#define INHERITED_MAX 64

/* rlock's children before the command (or INHERITED_MAX + 1: too many to tell orphans
 * from them, so none is taken for one). */
static pid_t inherited[INHERITED_MAX];
static int ninherited = -1;

/* A child list's pids (read from its start: a seq file is made anew by each read at 0)
 * appended to q from *n, up to max. */
static void read_pids(int fd, pid_t *q, int *n, int max)
{
	char buf[4096];
	ssize_t len = pread(fd, buf, sizeof buf - 1, 0);

	buf[len > 0 ? len : 0] = '\0';
	for (char *p = buf, *end; *n < max; p = end) {
		long c = strtol(p, &end, 10);
		if (end == p)
			break;
		q[(*n)++] = (pid_t)c;
	}
}

/* The children of pid (every thread's list) appended to q from *n, up to max. */
static void children_of(pid_t pid, pid_t *q, int *n, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	DIR *d = opendir(path);
	struct dirent *e;

	while (d && (e = readdir(d)) && *n < max) {
		char file[128];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(file, sizeof file, "/proc/%ld/task/%.20s/children", (long)pid, e->d_name);
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		read_pids(fd, q, n, max);
		close(fd);
	}
	if (d)
		closedir(d);
}

/* rlock's own children, from its main thread's list: the one its forks (the command,
 * the watchdog) and exec's inheritance are on, and the one the kernel gives orphans to
 * (the first live thread of their subreaper). One read, where children_of() reads every
 * thread's. */
static int kids_fd = -1; /* that list, opened ahead: a read of it is then one pread */

static void own_children(pid_t *q, int *n, int max)
{
	char path[64];
	if (kids_fd < 0) {
		snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)getpid());
		kids_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (kids_fd >= 0)
		read_pids(kids_fd, q, n, max);
}

/* cover.h */
void cover_note_inherited(void)
{
	pid_t q[INHERITED_MAX + 1];
	int n = 0;
	siginfo_t si;

	if (ninherited >= 0)
		return;
	/* no child at all (the common case): one call says so; the list is opened all the
	 * same, for the end's look at it (the open, not the read, is what costs) */
	if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)getpid());
		kids_fd = open(path, O_RDONLY | O_CLOEXEC);
		ninherited = 0;
		return;
	}
	own_children(q, &n, INHERITED_MAX + 1);
	memcpy(inherited, q, sizeof(pid_t) * (size_t)(n > INHERITED_MAX ? INHERITED_MAX : n));
	ninherited = n;
}

/* One process's group, session and whether it can run, from /proc/PID/stat: 0 or -1. */
static int proc_facts(pid_t pid, pid_t *pgrp, pid_t *sid, int *live)
{
	struct proc_stat st;

	if (proc_stat_read(pid, &st) < 0)
		return -1;
	*pgrp = st.pgrp;
	*sid = st.sid;
	*live = proc_stat_live(&st);
	return 0;
}

/* rlock's children from q[from] on: drop cmd (when walked from already: 0 if not), the
 * watchdog (in a session of its own) and the inherited ones. */
static void keep_orphans(pid_t *q, int from, int *n, pid_t cmd, pid_t watchdog)
{
	for (int i = from; i < *n; i++) {
		int old = (cmd && q[i] == cmd) || q[i] == watchdog;
		for (int k = 0; k < ninherited && !old; k++)
			old = q[i] == inherited[k];
		if (old)
			q[i--] = q[--*n];
	}
}

/* cover.h */
int cover_orphans(pid_t cmd, pid_t watchdog, pid_t *out, int max)
{
	int n = 0;

	if (ninherited < 0 || ninherited > INHERITED_MAX)
		return 0;
	own_children(out, &n, max);
	keep_orphans(out, 0, &n, cmd, watchdog);
	return n;
}

/* cover.h */
int cover_groups(pid_t cmd, pid_t sid, int orphans, pid_t watchdog, pid_t skip, const pid_t *roots,
                 int nroots, pid_t *g, int *live)
{
	static pid_t q[COVER_WALK]; /* the watchdog and the supervisor: one thread each */
	int n = 0, ng = 1;

	g[0] = cmd;
	*live = 0;
	/* the command's pid names it only while its group lives (a pid that leads a group
	 * is not given to another process); an empty group's may be anyone's by now */
	int walked = kill(-cmd, 0) == 0;
	if (walked)
		q[n++] = cmd;
	for (int i = 0; i < nroots && n < COVER_WALK; i++)
		q[n++] = roots[i];
	if (orphans && ninherited >= 0 && ninherited <= INHERITED_MAX) {
		int from = n;
		own_children(q, &n, COVER_WALK);
		keep_orphans(q, from, &n, walked ? cmd : 0, watchdog);
	}
	for (int i = 0; i < n; i++) {
		pid_t pg, ps;
		int lv;
		if (proc_facts(q[i], &pg, &ps, &lv) < 0 || ps != sid)
			continue; /* gone, or a session of its own: not below it either */
		if (pg != skip && pg != cmd) {
			*live |= lv;
			int k = 1;
			while (k < ng && g[k] != pg)
				k++;
			if (k == ng && ng < COVER_MAX)
				g[ng++] = pg;
		}
		children_of(q[i], q, &n, COVER_WALK);
	}
	return ng;
}

/* cover.h */
int cover_is_rlock(pid_t pid)
{
	struct stat self, other;
	char exe[64];

	if (pid <= 1 || pid == getpid())
		return 0;
	snprintf(exe, sizeof exe, "/proc/%ld/exe", (long)pid);
	return stat("/proc/self/exe", &self) == 0 && stat(exe, &other) == 0 &&
	       self.st_dev == other.st_dev && self.st_ino == other.st_ino;
}

/* Is group g a nested rlock's command's: its leader a child of another rlock (not this
 * one: its own command's group is the cover's first)? */
static int nested_command_group(pid_t g)
{
	struct proc_stat st;

	return proc_stat_read(g, &st) == 0 && cover_is_rlock(st.ppid);
}

/* cover.h */
void cover_kill(pid_t cmd, pid_t sid, int orphans, pid_t skip, int sig, unsigned how)
{
	pid_t g[COVER_MAX];
	int live;

	if (!(how & COVER_NOT_CMD))
		kill(-cmd, sig);
	int n = cover_groups(cmd, sid, orphans, 0, skip, NULL, 0, g, &live);
	for (int i = 1; i < n; i++)
		if (!(how & COVER_LEAVE_NESTED) || !nested_command_group(g[i]))
			kill(-g[i], sig);
}

/* cover.h */
void cover_freeze_kill(pid_t cmd, pid_t sid, pid_t skip, const pid_t *roots, int nroots)
{
	pid_t g[COVER_MAX], more[COVER_MAX];
	int live;

	/* The groups first, then the freeze: a stopped command's group that rlock's death
	 * orphans (the watchdog hears the end of its pipe before the kernel reparents
	 * rlock's children) gets the kernel's SIGHUP and SIGCONT, and its shell dies of it,
	 * its children reparented out of a walk's sight (timeout(1)'s group, still running). */
	int n = cover_groups(cmd, sid, 0, 0, skip, roots, nroots, g, &live);
	for (int i = 0; i < n; i++)
		kill(-g[i], SIGSTOP);
	/* again, frozen: what was forked meanwhile */
	int m = cover_groups(cmd, sid, 0, 0, skip, roots, nroots, more, &live);
	for (int j = 1; j < m && n < COVER_MAX; j++) {
		int k = 0;
		while (k < n && g[k] != more[j])
			k++;
		if (k == n) {
			kill(-more[j], SIGSTOP);
			g[n++] = more[j];
		}
	}
	for (int i = 0; i < n; i++)
		kill(-g[i], SIGKILL);
}

/* cover.h */
int cover_group_live(pid_t pgid)
{
	if (kill(-pgid, 0) < 0 && errno == ESRCH)
		return 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 1;
	int live = 0;
	struct dirent *e;
	while (!live && (e = readdir(d))) {
		pid_t pg, sid;
		int lv;
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    proc_facts((pid_t)atol(e->d_name), &pg, &sid, &lv) == 0 && pg == pgid)
			live = lv;
	}
	closedir(d);
	return live;
}

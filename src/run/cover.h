/* SPDX-License-Identifier: MIT */
/* The command's cover: what the lock covers, and how all of it is signalled.
 *
 * The lock covers the command's process group and every process group of rlock's
 * session that a process the command started moved to (setpgid: timeout(1) without
 * --foreground, a job-control shell's jobs). A process that started a session of its own
 * (a daemon) leaves the cover, as documented. The cover is walked down the kernel's
 * child lists (/proc/PID/task/TID/children) from its roots: the command, and rlock's
 * children that are the command's orphans (reparented to rlock, its child subreaper) —
 * never a child rlock had before the command (one it inherited through exec, the
 * watchdog); for the watchdog, also the orphans rlock told it of (child.c). Its cost is the cover's
 * size, not the machine's; the command's group is signalled before the walk, so nothing the walk
 * costs delays that. Used by the supervisor (child.c) and by the watchdog, in a process of its own.
 */
#ifndef RLOCK_COVER_H
#define RLOCK_COVER_H

#include <sys/types.h>

#define COVER_MAX 64 /* groups */

/* Note rlock's children before the command starts (once; off the acquire's path). */
void cover_note_inherited(void);

/* rlock's children that it did not have before the command, but cmd and the watchdog:
 * the command's orphans (reparented to rlock), up to max into out. Their number. */
int cover_orphans(pid_t cmd, pid_t watchdog, pid_t *out, int max);

/* The groups of the cover of the command cmd (its group: cmd) in session sid, never the
 * group skip (rlock's own); with orphans, also below rlock's children that it did not
 * have before the command, but the watchdog (0: none given); also below the nroots
 * processes roots (the orphans rlock told its watchdog of: once rlock is gone they are
 * another reaper's children). Returns their number (cmd first) in g[COVER_MAX]; *live:
 * a process of the cover other than the command's group's can still run. */
int cover_groups(pid_t cmd, pid_t sid, int orphans, pid_t watchdog, pid_t skip, const pid_t *roots,
                 int nroots, pid_t *g, int *live);

/* Send sig to the command's group at once, then to the other groups of its cover
 * (rlock: the orphans of a group that dies meanwhile come to rlock, and are walked).
 * how: COVER_LEAVE_NESTED when sig is one a nested rlock forwards to its command
 * (child.c's list): a group of the cover that is a nested rlock's command's is left to
 * that rlock, which has it too (its group is in the cover), so that its command hears
 * it once; COVER_NOT_CMD: not to the command's group (it had sig already). */
#define COVER_LEAVE_NESTED 1u
#define COVER_NOT_CMD      2u
void cover_kill(pid_t cmd, pid_t sid, int orphans, pid_t skip, int sig, unsigned how);

/* Is pid another process of this rlock's executable (an ancestor's or a nested rlock)?
 * Reads /proc: not for a run's hot path. */
int cover_is_rlock(pid_t pid);

/* The watchdog's kill: every group of the cover, below the command and below the
 * roots (cover_groups), found while the tree is in place, frozen (SIGSTOP: nothing of
 * it runs on, and nothing of it dies, so its orphans do not go to another reaper, out
 * of sight), found again (what forked meanwhile) and SIGKILLed. */
void cover_freeze_kill(pid_t cmd, pid_t sid, pid_t skip, const pid_t *roots, int nroots);

/* Does process group pgid still hold a process that can run? Zombies cannot: ours are
 * reaped before this is asked, and one whose parent left the group (setsid) and never
 * reaps it must not hold the lock forever. */
int cover_group_live(pid_t pgid);

#endif

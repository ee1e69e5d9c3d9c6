/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/procstat.c, against the kernel's own answers: this process's
 * group, session and start; a name holding ") (" and spaces (the fields are read after
 * the last ')'); a zombie; a pid that is gone. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procstat.h"

#include "unit.h"

int main(void)
{
	struct proc_stat st, again;

	CHECK(proc_stat_read(getpid(), &st) == 0);
	CHECK(st.pgrp == getpgrp());
	CHECK(st.ppid == getppid());
	CHECK(st.sid == getsid(0));
	CHECK(st.threads == 1);
	CHECK(st.start_ticks > 0);
	CHECK(proc_stat_live(&st));

	/* a name that looks like the fields that follow it */
	const char *odd = "a) Z 1 2 (b";
	CHECK(prctl(PR_SET_NAME, odd) == 0);
	CHECK(proc_stat_read(getpid(), &again) == 0);
	CHECK(strcmp(again.comm, odd) == 0);
	CHECK(again.pgrp == st.pgrp && again.sid == st.sid && again.state != 'Z');
	CHECK(again.start_ticks == st.start_ticks);

	/* a zombie: not live; then gone: -1 */
	pid_t kid = fork();
	if (kid == 0)
		_exit(0);
	CHECK(kid > 0);
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT) == 0);
	CHECK(proc_stat_read(kid, &st) == 0);
	CHECK(st.state == 'Z' && !proc_stat_live(&st));
	CHECK(waitpid(kid, NULL, 0) == kid);
	CHECK(proc_stat_read(kid, &st) == -1);
	CHECK(proc_stat_read(-1, &st) == -1);

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

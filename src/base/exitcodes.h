/* SPDX-License-Identifier: MIT */
/* The exit-status table, once: the constants below and --help's "Exit status:" rows
 * are built from it (cli.c); docs.bats holds the man page's and the README's tables
 * against --help. */
#ifndef RLOCK_EXITCODES_H
#define RLOCK_EXITCODES_H

#include <errno.h>

/* X(code, constant, what --help shows in the status column (NULL: shown on the row
 * before), its meaning ('\n' starts a continuation line)). Besides these, rlock exits
 * with the command's own status, or dies of its signal. */
#define RL_EXIT_TABLE(X)                                                                           \
	X(64, RL_EX_USAGE, "64",                                                                   \
	  "usage error: bad option, URL, duration, config; or the lock is\n"                       \
	  "held with -s against -l, or another -l N")                                              \
	X(66, RL_EX_NOINPUT, "66",                                                                 \
	  "a file named on the command line or in the config cannot be\n"                          \
	  "read (config, password file, --cacert, --cert, --tls-key,\n"                            \
	  "--acquire's --log-file), is not of its type, or another user\n"                         \
	  "can change it (ssh's rule)")                                                            \
	X(69, RL_EX_UNAVAILABLE, "69",                                                             \
	  "Redis unavailable before the command started (connect, TLS, auth;\n"                    \
	  "-n: at once; else when the --wait ran out on it),\n"                                    \
	  "or the lock's fence counter cannot count (not an integer,\n"                            \
	  "at its max); --held: Redis cannot say")                                                 \
	X(70, RL_EX_SOFTWARE, "70", "internal error")                                              \
	X(71, RL_EX_OSERR, "71",                                                                   \
	  "cannot fork or set up the command; or the host ran out of\n"                            \
	  "processes, descriptors or memory before the command started,\n"                         \
	  "or cannot do it (no TLS module, no /dev/null)")                                         \
	X(74, RL_EX_IOERR, "74",                                                                   \
	  "cannot write the output of --status, --list, --held, --history,\n"                      \
	  "--check, --acquire (the lock is given back), --help, --version")                        \
	X(75, RL_EX_CONFLICT, "75", "lock not acquired: busy with -n, or --wait expired (see -E)") \
	X(79, RL_EX_LOST, "79",                                                                    \
	  "the lock was lost while the command ran (its group was terminated,\n"                   \
	  "or the release found the lock gone); --held: the token no longer\n"                     \
	  "holds the lock; --break --token/--if-fence: no such holder, nothing\n"                  \
	  "broken")                                                                                \
	X(80, RL_EX_SUPERSEDED, "80",                                                              \
	  "--supersede: a newer --supersede request took this one's place\n"                       \
	  "(see --superseded-exit-code)")                                                          \
	X(81, RL_EX_PREEMPTED, "81",                                                               \
	  "--preemptible: a --preempt request stopped the command (as on a\n"                      \
	  "lost lease) and the lock was released to it (gone by then: the\n"                       \
	  "command's own status)")                                                                 \
	X(124, RL_EX_TIMEOUT, "124",                                                               \
	  "--max-hold expired and the command was stopped (as timeout(1))")                        \
	X(126, RL_EX_NOEXEC, "126/127", "command not executable / not found")                      \
	X(127, RL_EX_NOTFOUND, NULL, NULL)                                                         \
	X(137, RL_EX_TIMEOUT_KILLED, "137",                                                        \
	  "--max-hold expired and it took SIGKILL to stop the command (128+9,\n"                   \
	  "as timeout(1))")

enum rlock_exit {
#define RL_EX_ENUM(code, name, shown, meaning) name = code,
	RL_EXIT_TABLE(RL_EX_ENUM)
#undef RL_EX_ENUM
};

/* An errno that says the host, not a file or a server, is short of something: no
 * descriptor (EMFILE, ENFILE), no memory (ENOMEM, ENOBUFS). A file or a connection
 * that fails so is 71, not 66 or 69: the file is fine, the server was not asked. */
static inline int rl_ex_host_short(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS;
}

/* The status of a user-named file that cannot be opened or read (errno e). */
static inline int rl_ex_file(int e)
{
	return rl_ex_host_short(e) ? RL_EX_OSERR : RL_EX_NOINPUT;
}

#endif

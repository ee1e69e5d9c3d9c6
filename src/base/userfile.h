/* SPDX-License-Identifier: MIT */
/* Files a user names (the config layers, --password-file, --log-file, --events,
 * --metrics-file, the TLS files): opened so that nothing can block (a FIFO with no
 * writer or reader, a device) and checked for their type before a byte is read or
 * written; trusted only as far as their author is (ssh's rule).
 *
 * Whose file it is: a file, and every directory above it, must be owned by root or by
 * the user rlock runs as (its real uid), and writable by nobody else (a directory with
 * the sticky bit, as /tmp, is safe: others cannot replace what they do not own in
 * it). A config layer that breaks the rule is refused whole, so a path named in a
 * layer always comes from root or from the user. A file rlock writes (a log, the
 * events, the metrics) is never reached through a symbolic link at its own name, and
 * is one of the user's or root's. */
#ifndef RLOCK_USERFILE_H
#define RLOCK_USERFILE_H

#include <stddef.h>
#include <sys/stat.h>

/* The kinds a file may be (a mask). */
#define UF_REG  1u
#define UF_DIR  2u
#define UF_CHR  4u /* a character device: /dev/null, a terminal */
#define UF_FIFO 8u /* opened only when the other end is there (never waits for it) */

/* Open path for reading (O_NONBLOCK, close-on-exec, no controlling terminal) and
 * fstat it into *st: the fd, or -1 with why (a short phrase, "is a directory",
 * "No such file or directory") and errno set (ENOENT: missing). The fd of a regular
 * file is blocking again, as reads of it never wait anyway. */
int userfile_read(const char *path, unsigned kinds, struct stat *st, char *why, size_t n);

/* Open path for appending (created 0600/mode when missing): O_NOFOLLOW, O_NONBLOCK,
 * close-on-exec. A regular file must be the user's or root's. The fd, or -1 with why. */
int userfile_append(const char *path, unsigned kinds, int mode, char *why, size_t n);

/* Is the file (its fstat in *st, its name path) and every directory above it the
 * user's or root's and writable by nobody else? 0, or -1 with why. */
int userfile_trusted(const char *path, const struct stat *st, char *why, size_t n);

/* A file rlock is about to replace or append to (its lstat in *st): 0 when it is the
 * user's or root's, -1 with why. */
int userfile_owned(const struct stat *st, char *why, size_t n);

#endif

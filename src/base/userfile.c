/* SPDX-License-Identifier: MIT */
#include "userfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned kind_of(mode_t m)
{
	return S_ISREG(m)    ? UF_REG
	       : S_ISDIR(m)  ? UF_DIR
	       : S_ISCHR(m)  ? UF_CHR
	       : S_ISFIFO(m) ? UF_FIFO
	                     : 0;
}

static const char *kind_name(mode_t m)
{
	return S_ISDIR(m)    ? "is a directory"
	       : S_ISFIFO(m) ? "is not a regular file (a FIFO)"
	       : S_ISSOCK(m) ? "is not a regular file (a socket)"
	       : S_ISBLK(m)  ? "is not a regular file (a block device)"
	       : S_ISCHR(m)  ? "is not a regular file (a character device)"
	                     : "is not a regular file";
}

static int fail(int fd, int e, char *why, size_t n, const char *text)
{
	if (fd >= 0)
		close(fd);
	snprintf(why, n, "%s", text ? text : strerror(e));
	errno = e;
	return -1;
}

int userfile_read(const char *path, unsigned kinds, struct stat *st, char *why, size_t n)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return fail(-1, errno, why, n, NULL);
	if (fstat(fd, st) < 0)
		return fail(fd, errno, why, n, NULL);
	if (!(kind_of(st->st_mode) & kinds))
		return fail(fd, EINVAL, why, n, kind_name(st->st_mode));
	if (S_ISREG(st->st_mode)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return fail(fd, errno, why, n, NULL);
	}
	return fd;
}

int userfile_owned(const struct stat *st, char *why, size_t n)
{
	if (st->st_uid == 0 || st->st_uid == getuid() || st->st_uid == geteuid())
		return 0;
	snprintf(why, n, "belongs to another user (uid %ld)", (long)st->st_uid);
	errno = EPERM;
	return -1;
}

int userfile_append(const char *path, unsigned kinds, int mode, char *why, size_t n)
{
	struct stat st;
	int fd = open(
	    path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
	    mode);

	if (fd < 0 && errno == ELOOP)
		return fail(-1, ELOOP, why, n,
		            "is a symbolic link (rlock writes only to the file named)");
	if (fd < 0 && errno == ENXIO)
		return fail(-1, ENXIO, why, n, "is a FIFO that nobody reads");
	if (fd < 0)
		return fail(-1, errno, why, n, NULL);
	if (fstat(fd, &st) < 0)
		return fail(fd, errno, why, n, NULL);
	if (!(kind_of(st.st_mode) & kinds))
		return fail(fd, EINVAL, why, n, kind_name(st.st_mode));
	char owner[120];
	if (S_ISREG(st.st_mode) && userfile_owned(&st, owner, sizeof owner) < 0)
		return fail(fd, EPERM, why, n, owner);
	return fd;
}

/* Owned by root or the user, writable by nobody else (a sticky directory may be). */
static int safe_mode(const struct stat *st, int dir)
{
	if (st->st_uid != 0 && st->st_uid != getuid())
		return 0;
	return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (dir && (st->st_mode & S_ISVTX));
}

/* Every directory of the resolved (link-free, absolute) path dir, up to "/", passes
 * safe_mode. 0, or -1 with why. */
static int dirs_safe(const char *dir, char *why, size_t n)
{
	char real[PATH_MAX];
	struct stat ds;

	snprintf(real, sizeof real, "%s", dir);
	for (;;) {
		if (stat(real, &ds) < 0) {
			snprintf(why, n, "cannot check its directory %s: %s", real,
			         strerror(errno));
			return -1;
		}
		if (!safe_mode(&ds, 1)) {
			if (ds.st_uid != 0 && ds.st_uid != getuid())
				snprintf(why, n,
				         "is in %s, which belongs to another user (uid %ld)", real,
				         (long)ds.st_uid);
			else
				snprintf(why, n, "is in %s, which is writable by %s (mode %03o)",
				         real, ds.st_mode & S_IWOTH ? "others" : "its group",
				         (unsigned)(ds.st_mode & 0777));
			return -1;
		}
		char *slash = strrchr(real, '/');
		if (!slash || !strcmp(real, "/"))
			return 0;
		slash[slash == real] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
	}
}

/* Resolve path one name at a time, as the kernel does: each symbolic link met (in the
 * path as named, and in the links' targets) must be root's or the user's and lie in a
 * directory that dirs_safe accepts, or whoever can write there could point it at
 * another file. The resolved path into real. 0, or -1 with why. */
static int resolve_safely(const char *path, char *real, size_t cap, char *why, size_t n)
{
	char todo[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
	int links = 0;

	if (path[0] == '/')
		snprintf(real, cap, "/");
	else if (!getcwd(real, cap)) {
		snprintf(why, n, "cannot resolve its directory: %s", strerror(errno));
		return -1;
	}
	if (snprintf(todo, sizeof todo, "%s", path) >= (int)sizeof todo)
		goto too_long;
	char *rest = todo;
	while (*rest) {
		while (*rest == '/')
			rest++;
		if (!*rest)
			break;
		size_t len = strcspn(rest, "/");
		char name[NAME_MAX + 1];
		if (len > NAME_MAX)
			goto too_long;
		memcpy(name, rest, len);
		name[len] = '\0';
		rest += len;
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			char *slash = strrchr(real, '/');
			if (slash)
				slash[slash == real] = '\0';
			continue;
		}
		char cand[PATH_MAX];
		if (snprintf(cand, sizeof cand, "%s%s%s", real, strcmp(real, "/") ? "/" : "",
		             name) >= (int)sizeof cand)
			goto too_long;
		struct stat ls;
		if (lstat(cand, &ls) < 0) {
			snprintf(why, n, "cannot resolve %s: %s", cand, strerror(errno));
			return -1;
		}
		if (!S_ISLNK(ls.st_mode)) {
			snprintf(real, cap, "%s", cand);
			continue;
		}
		if (++links > 40) {
			snprintf(why, n, "cannot resolve it: %s", strerror(ELOOP));
			return -1;
		}
		if (ls.st_uid != 0 && ls.st_uid != getuid()) {
			snprintf(why, n, "is reached through %s, a link of another user (uid %ld)",
			         cand, (long)ls.st_uid);
			return -1;
		}
		char dwhy[PATH_MAX + 128];
		if (dirs_safe(real, dwhy, sizeof dwhy) < 0) {
			snprintf(why, n, "is reached through the link %s, %s", cand, dwhy + 3);
			return -1;
		}
		ssize_t tl = readlink(cand, target, sizeof target - 1);
		if (tl < 0) {
			snprintf(why, n, "cannot resolve %s: %s", cand, strerror(errno));
			return -1;
		}
		target[tl] = '\0';
		if (snprintf(next, sizeof next, "%s%s", target, rest) >= (int)sizeof next)
			goto too_long;
		memcpy(todo, next, strlen(next) + 1);
		rest = todo;
		if (target[0] == '/')
			snprintf(real, cap, "/");
	}
	return 0;
too_long:
	snprintf(why, n, "cannot resolve it: %s", strerror(ENAMETOOLONG));
	return -1;
}

int userfile_trusted(const char *path, const struct stat *st, char *why, size_t n)
{
	char real[PATH_MAX];

	if (!safe_mode(st, 0)) {
		if (st->st_uid != 0 && st->st_uid != getuid())
			snprintf(why, n, "belongs to another user (uid %ld)", (long)st->st_uid);
		else
			snprintf(why, n, "is writable by %s (mode %03o)",
			         st->st_mode & S_IWOTH ? "others" : "its group",
			         (unsigned)(st->st_mode & 0777));
		return -1;
	}
	if (resolve_safely(path, real, sizeof real, why, n) < 0)
		return -1;
	struct stat rs; /* what the name leads to now is what was opened */
	if (stat(real, &rs) < 0 || rs.st_dev != st->st_dev || rs.st_ino != st->st_ino) {
		snprintf(why, n, "was replaced while rlock read it");
		return -1;
	}
	char *slash = strrchr(real, '/');
	if (slash)
		slash[slash == real] = '\0'; /* its directory */
	return dirs_safe(real, why, n);
}

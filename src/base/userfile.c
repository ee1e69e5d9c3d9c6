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

int userfile_trusted(const char *path, const struct stat *st, char *why, size_t n)
{
	char real[PATH_MAX];
	struct stat ds;

	if (!safe_mode(st, 0)) {
		if (st->st_uid != 0 && st->st_uid != getuid())
			snprintf(why, n, "belongs to another user (uid %ld)", (long)st->st_uid);
		else
			snprintf(why, n, "is writable by %s (mode %03o)",
			         st->st_mode & S_IWOTH ? "others" : "its group",
			         (unsigned)(st->st_mode & 0777));
		return -1;
	}
	if (!realpath(path, real)) {
		snprintf(why, n, "cannot resolve its directory: %s", strerror(errno));
		return -1;
	}
	for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
		slash[slash == real] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
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
		if (!strcmp(real, "/"))
			break;
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* Unit tests for src/base/userfile.c and log_utf8_len (src/base/log.c): the opens that cannot
 * block (a FIFO with nobody at the other end), the type checks, the link at a name
 * rlock writes, ssh's rule for a file and the directories above it; and which bytes
 * start a valid UTF-8 sequence (what JSON can carry). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "userfile.h"

#include "unit.h"

static char dir[64];

static const char *at(const char *name)
{
	static char path[4][128];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/%s", dir, name);
	return path[i];
}

static void utf8(void)
{
	CHECK(log_utf8_len((const unsigned char *)"a") == 1);
	CHECK(log_utf8_len((const unsigned char *)"\xc3\xa9") == 2);
	CHECK(log_utf8_len((const unsigned char *)"\xe2\x82\xac") == 3);
	CHECK(log_utf8_len((const unsigned char *)"\xf0\x9f\x98\x80") == 4);
	CHECK(log_utf8_len((const unsigned char *)"\xff") == 0);
	CHECK(log_utf8_len((const unsigned char *)"\x80") == 0);             /* a continuation */
	CHECK(log_utf8_len((const unsigned char *)"\xc0\xaf") == 0);         /* overlong '/' */
	CHECK(log_utf8_len((const unsigned char *)"\xe0\x80\xaf") == 0);     /* overlong */
	CHECK(log_utf8_len((const unsigned char *)"\xed\xa0\x80") == 0);     /* a surrogate */
	CHECK(log_utf8_len((const unsigned char *)"\xf4\x90\x80\x80") == 0); /* > U+10FFFF */
	CHECK(log_utf8_len((const unsigned char *)"\xc3") == 0);             /* cut by the NUL */
	CHECK(log_utf8_len((const unsigned char *)"\xe2\x82") == 0);
}

static void opens(void)
{
	struct stat st;
	char why[300];
	int fd;

	CHECK(mkfifo(at("fifo"), 0600) == 0);
	/* Reading: a FIFO opens at once (no writer needed) and is refused by type. */
	fd = userfile_read(at("fifo"), UF_REG, &st, why, sizeof why);
	CHECK(fd < 0 && errno == EINVAL && strstr(why, "FIFO"));
	/* Writing: nobody reads it, so the open fails at once instead of waiting. */
	fd = userfile_append(at("fifo"), UF_REG | UF_FIFO, 0600, why, sizeof why);
	CHECK(fd < 0 && errno == ENXIO && strstr(why, "nobody reads"));
	/* A directory, a missing file. */
	fd = userfile_read(dir, UF_REG, &st, why, sizeof why);
	CHECK(fd < 0 && errno == EINVAL && strstr(why, "directory"));
	fd = userfile_read(at("missing"), UF_REG, &st, why, sizeof why);
	CHECK(fd < 0 && errno == ENOENT);
	/* A regular file: created for appending, then read back, blocking again. */
	fd = userfile_append(at("log"), UF_REG, 0600, why, sizeof why);
	CHECK(fd >= 0 && write(fd, "x\n", 2) == 2);
	close(fd);
	fd = userfile_read(at("log"), UF_REG, &st, why, sizeof why);
	CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK) && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
	close(fd);
	/* A link at the name rlock writes: refused, its target untouched. */
	CHECK(symlink(at("log"), at("link")) == 0);
	fd = userfile_append(at("link"), UF_REG, 0600, why, sizeof why);
	CHECK(fd < 0 && errno == ELOOP);
	CHECK(stat(at("log"), &st) == 0 && st.st_size == 2);
}

static void trust(void)
{
	struct stat st;
	char why[300];

	CHECK(chmod(at("log"), 0644) == 0 && stat(at("log"), &st) == 0);
	CHECK(userfile_trusted(at("log"), &st, why, sizeof why) == 0);
	CHECK(chmod(at("log"), 0664) == 0 && stat(at("log"), &st) == 0);
	CHECK(userfile_trusted(at("log"), &st, why, sizeof why) < 0 && strstr(why, "its group"));
	CHECK(chmod(at("log"), 0646) == 0 && stat(at("log"), &st) == 0);
	CHECK(userfile_trusted(at("log"), &st, why, sizeof why) < 0 && strstr(why, "others"));
	CHECK(chmod(at("log"), 0600) == 0 && stat(at("log"), &st) == 0);
	/* The directory above: writable by others is refused, unless sticky. */
	CHECK(chmod(dir, 0777) == 0);
	CHECK(userfile_trusted(at("log"), &st, why, sizeof why) < 0 && strstr(why, dir));
	CHECK(chmod(dir, 01777) == 0);
	CHECK(userfile_trusted(at("log"), &st, why, sizeof why) == 0);
	CHECK(chmod(dir, 0700) == 0);
	if (getuid() == 0) { /* another owner: only root can make one here */
		CHECK(chown(at("log"), 65534, (gid_t)-1) == 0 && stat(at("log"), &st) == 0);
		CHECK(userfile_trusted(at("log"), &st, why, sizeof why) < 0 &&
		      strstr(why, "another user"));
		CHECK(userfile_owned(&st, why, sizeof why) < 0);
		int fd = userfile_append(at("log"), UF_REG, 0600, why, sizeof why);
		CHECK(fd < 0 && errno == EPERM && strstr(why, "another user"));
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof dir, "%.40s/unit_userfile.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	utf8();
	opens();
	trust();
	const char *names[] = {"fifo", "log", "link"};
	for (size_t i = 0; i < 3; i++)
		unlink(at(names[i]));
	rmdir(dir);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

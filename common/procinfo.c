/*
 * procinfo.c — reads /proc/PID/stat for a process's state and start time.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/procinfo.h"

uint64_t sfs_proc_starttime(pid_t pid)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parens: fields resume after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	p += 2;
	if (*p == 'Z' || *p == 'X')	/* state: dead or zombie */
		return 0;
	/* p is at field 3 (state); the start time is field 22. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10);
}

int sfs_proc_alive(pid_t pid, uint64_t start)
{
	if (pid <= 0 || start == 0)
		return 0;
	return sfs_proc_starttime(pid) == start;
}

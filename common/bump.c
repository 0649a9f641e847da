/*
 * bump.c — a bump arena of 256 KiB chunks (bump.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/bump.h"

#define CHUNK (256u << 10)

struct sfs_bump_chunk {
	struct sfs_bump_chunk *next;
	size_t size, used;
	unsigned char data[];
};

void *sfs_bump_copy(struct sfs_bump *a, const void *p, size_t n)
{
	struct sfs_bump_chunk *c = a->head;
	void *out;

	if (!c || c->size - c->used < n) {
		size_t size = n > CHUNK ? n : CHUNK;

		if (!(c = malloc(sizeof(*c) + size)))
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	out = c->data + c->used;
	c->used += (n + 7) & ~(size_t)7;
	if (c->used > c->size)
		c->used = c->size;
	if (n)
		memcpy(out, p, n);
	return out;
}

void sfs_bump_reset(struct sfs_bump *a)
{
	struct sfs_bump_chunk *keep = NULL;

	while (a->head) {
		struct sfs_bump_chunk *c = a->head;

		a->head = c->next;
		if (!keep && c->size == CHUNK) {
			keep = c;
			continue;
		}
		free(c);
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	a->head = keep;
}

void sfs_bump_free(struct sfs_bump *a)
{
	sfs_bump_reset(a);
	free(a->head);
	a->head = NULL;
}


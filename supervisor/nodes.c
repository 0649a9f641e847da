/*
 * nodes.c — how many NUMA nodes a group spans (supervisor/nodes.h).
 */
#include <numa.h>

#include "supervisor/nodes.h"

int sfs_node_count(void)
{
	if (numa_available() < 0)
		return 1;
	return numa_max_node() + 1;
}

/*
 * nodes.h — how many NUMA nodes a group spans: a group has one segment per
 * node, so every command that attaches to a running group (run, stat, top,
 * get, the metrics) asks this first.
 */
#ifndef SFS_SUPERVISOR_NODES_H
#define SFS_SUPERVISOR_NODES_H

/* Number of NUMA nodes the group spans (1 without libnuma support). */
int sfs_node_count(void);

#endif

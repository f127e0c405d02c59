/* Other processes of this user on this machine that stage copies now: they
 * share its CPUs, so each keeps fewer of its workers awake. */
#ifndef PINFAST_PEERS_H
#define PINFAST_PEERS_H

/* Marks this process as staging now and returns how many processes, this
 * one included, staged within the last second (at least 1).  Reads a small
 * table shared through /dev/shm; a few loads most calls, a scan of the table
 * at most every PEERS_REFRESH_MS. */
int pf_peers_staging(void);

/* In a forked child: it is another process, with a slot of its own. */
void pf_peers_forked(void);

#endif

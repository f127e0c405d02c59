/* CPU sharing between processes: other processes of this user on this machine
 * that stage copies now share its CPUs, so each keeps fewer workers awake. */
#ifndef PINFAST_STAGING_PROCESSES_H
#define PINFAST_STAGING_PROCESSES_H

/* Marks this process as staging now and returns how many processes, this
 * one included, staged within the last second (at least 1).  Reads a small
 * table shared through /dev/shm; a few loads most calls, a scan of the table
 * at most every REFRESH_MS. */
int pf_staging_processes_now(void);

/* At exit: gives this process's slot back, if it has one. */
void pf_staging_processes_exit(void);

/* In a forked child: it is another process, with a slot of its own. */
void pf_staging_processes_forked(void);

#endif

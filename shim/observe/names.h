/* The words the report and the trace print for the counters' indices. */
#ifndef PINFAST_NAMES_H
#define PINFAST_NAMES_H

extern const char *const pf_copy_api_names[];  /* by enum pf_copy_api */
extern const char *const pf_alloc_api_names[]; /* by enum pf_alloc_api */
extern const char *const pf_dir_names[];       /* by enum pf_dir */
extern const char *const pf_mem_names[];       /* by enum pf_mem */
extern const char *const pf_path_names[];      /* by enum pf_path */

#endif

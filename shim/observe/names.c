#include "names.h"
#include "stats.h"

#define PF_API_NAME_(id, name) name,
const char *const pf_copy_api_names[] = {PF_COPY_APIS(PF_API_NAME_)};
const char *const pf_alloc_api_names[] = {PF_ALLOC_APIS(PF_API_NAME_)};
#undef PF_API_NAME_
const char *const pf_dir_names[] = {"H2D", "D2H", "D2D", "H2H", "mixed"};
const char *const pf_mem_names[] = {"pageable", "pinned", "pinfast", "managed",
                                        "device", "mixed", "unknown"};
const char *const pf_path_names[] = {"passthrough", "staged"};

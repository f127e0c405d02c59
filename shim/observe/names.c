#include "names.h"
#include "observe.h"

/* The families' names are the table's (driver/symbols.h): the report prints
 * what the table calls them. */
#define PF_FAMILY_NAME_(family, opens, shape, ptds, name) PF_IF_##opens(#family, )
const char *const pf_copy_api_names[] = {PF_COPY_ENTRIES(PF_FAMILY_NAME_)};
const char *const pf_alloc_api_names[] = {PF_ALLOC_ENTRIES(PF_FAMILY_NAME_)};
#undef PF_FAMILY_NAME_
const char *const pf_dir_names[] = {"H2D", "D2H", "D2D", "H2H", "mixed"};
const char *const pf_mem_names[] = {"pageable", "pinned", "pinfast", "managed", "device", "mixed", "unknown"};
const char *const pf_path_names[] = {"passthrough", "staged", "bounced", "registered"};

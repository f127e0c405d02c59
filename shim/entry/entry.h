/* What the wrapper files share.  Each expands its part of THE table of
 * entry points (driver/symbols.h) with a WRAP_<shape>(family, ptds, symbol)
 * macro per shape: the table says which functions exist, the shape what
 * their bodies are. */
#ifndef PINFAST_ENTRY_H
#define PINFAST_ENTRY_H

#include "../base/clock.h"
#include "../driver/cuda_api.h"
#include "../driver/driver.h"
#include "../base/options.h"
#include "../observe/observe.h"

/* Expands a table row into its wrapper. */
#define PF_WRAP(family, opens, shape, ptds, symbol) WRAP_##shape(family, ptds, symbol)

/* Loads the driver; returns 1 when pinfast acts on the call (counts it, may
 * stage it), 0 when it must only pass it through. */
static inline int pf_enter(void) {
    if (!pf_driver_load() || pf_options()->disable)
        return 0;
    pf_stats_touch();
    return 1;
}

#endif

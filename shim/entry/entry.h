/* What the wrapper files share. */
#ifndef PINFAST_ENTRY_H
#define PINFAST_ENTRY_H

#include "../memory/classify.h"
#include "../base/clock.h"
#include "../driver/cuda_api.h"
#include "../driver/driver.h"
#include "../base/options.h"
#include "../observe/stats.h"

/* Loads the driver; returns 1 when pinfast acts on the call (counts it, may
 * stage it), 0 when it must only pass it through. */
static inline int pf_enter(void) {
    if (!pf_driver_load() || pf_options()->disable)
        return 0;
    pf_stats_touch();
    return 1;
}

#endif

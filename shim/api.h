/* What the wrapper files share. */
#ifndef PINFAST_API_H
#define PINFAST_API_H

#include "classify.h"
#include "clock.h"
#include "cuda_api.h"
#include "driver.h"
#include "options.h"
#include "stats.h"

/* Loads the driver; returns 1 when pinfast acts on the call (counts it, may
 * stage it), 0 when it must only pass it through. */
static inline int pf_enter(void) {
    if (!pf_driver_load() || pf_options()->disable)
        return 0;
    pf_stats_touch();
    return 1;
}

#endif

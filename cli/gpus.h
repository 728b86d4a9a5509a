/* gpus: `ckplan sweep MODEL --gpus N --device D`: plans MODEL with dp in every layout of N
 * GPUs (planner/layouts) at the device's per-GPU budget and prints them best first, with
 * their per-GPU memory, step time and communication bytes (docs/parallel.md, "Which
 * layout?"). Nothing is appended to a runs file. */
#ifndef CK_GPUS_H
#define CK_GPUS_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"
#include "planner/planner.h"
#include "planner/workload.h"

typedef struct {
    const char *model_path;
    uint64_t gpus;
    uint64_t global_batch; /* sequences a step; 0: gpus x the microbatch */
    bool csv;              /* one CSV row per layout instead of the table */
    const ck_planner_opts *planner_opts;
    const ck_workload_opts *workload_opts; /* with a device: its budget and rates; no layout */
} ck_gpus_settings;

/* Prints the layouts to stdout, diagnostics to stderr. CK_ERR_INPUT for a model that
 * cannot be loaded, a chain file included (loading one with a layout is refused). */
int ck_gpus_sweep(const ck_gpus_settings *s, ck_err *err);

#endif

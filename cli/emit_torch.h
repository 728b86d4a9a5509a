/* emit_torch: `ckplan emit torch MODEL [options] [--plan PLAN] [-o FILE.py]`, a standalone
 * Python module that implements MODEL in PyTorch and, with a plan, runs its schedule
 * exactly (docs/pytorch.md). Its runtime is cli/torch_runtime.py, built into ckplan. */
#ifndef CK_EMIT_TORCH_H
#define CK_EMIT_TORCH_H

/* The subcommand of `ckplan emit` (argv[0] is "torch"): the process exit code. */
int ck_emit_torch(int argc, char **argv);

/* cli/torch_runtime.py's text, NUL-terminated (made from it by the Makefile). */
extern const char ck_emit_torch_runtime[];

#endif

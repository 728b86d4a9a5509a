#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

static int parse_rate(const char *text, const char *flag, double *out, ck_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v <= 0 || isspace((unsigned char)*text))
        return ck_fail(err, CK_ERR_INPUT, "%s: expected a positive number such as 1e11, got '%s'",
                       flag, text);
    *out = v;
    return CK_OK;
}

int ck_workload_option(int code, const char *arg, ck_workload_opts *o, ck_err *err)
{
    switch (code) {
    case CK_OPT_GRANULARITY:
        if (!ck_granularity_parse(arg, &o->granularity))
            return ck_fail(err, CK_ERR_INPUT, "--granularity: expected 'op' or 'block', got '%s'", arg);
        return CK_OK;
    case CK_OPT_GEMM_FLOPS:
        return parse_rate(arg, "--gemm-flops", &o->cost.gemm_flops, err);
    case CK_OPT_MEM_BANDWIDTH:
        return parse_rate(arg, "--mem-bandwidth", &o->cost.mem_bandwidth, err);
    case CK_OPT_COSTS:
        o->costs_path = arg;
        return CK_OK;
    default:
        return ck_fail(err, CK_ERR_INPUT, "internal error: option code %d", code);
    }
}

void ck_workload_options_help(FILE *out)
{
    ck_cost_model cost;
    ck_cost_model_default(&cost);
    fprintf(out,
            "  --granularity G       for model files: cut stages at every op where one tensor\n"
            "                        carries all state (op), or only between top-level blocks\n"
            "                        and ops (block, the default)\n"
            "  --gemm-flops RATE     for model files: the cost model's matrix-product rate in\n"
            "                        FLOP/s (default %g)\n"
            "  --mem-bandwidth RATE  for model files: the cost model's memory bandwidth in\n"
            "                        bytes/s (default %g)\n"
            "  --costs FILE          for model files: stage times measured by 'ckplan profile'\n"
            "                        instead of the cost model\n",
            cost.gemm_flops, cost.mem_bandwidth);
}

int ck_parse_count(const char *text, const char *flag, uint64_t min, uint64_t max, uint64_t *out,
                   ck_err *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!isdigit((unsigned char)*text) || *end || errno || v < min || v > max)
        return ck_fail(err, CK_ERR_INPUT, "%s: expected a whole number from %llu to %llu, got '%s'",
                       flag, (unsigned long long)min, (unsigned long long)max, text);
    *out = v;
    return CK_OK;
}

int ck_option_error(const char *cmd, char **argv, int code, ck_err *err)
{
    /* getopt names a bad short option in optopt; a bad long one is the argument it just read. */
    char short_name[3] = {'-', (char)optopt, '\0'};
    const char *given = optopt ? short_name : argv[optind - 1];
    if (code == ':')
        return ck_fail(err, CK_ERR_INPUT, "%s: option '%s' needs a value; see 'ckplan %s --help'",
                       cmd, given, cmd);
    return ck_fail(err, CK_ERR_INPUT, "%s: unknown option '%s'; see 'ckplan %s --help'", cmd,
                   given, cmd);
}

int ck_model_operand(const char *cmd, int argc, char **argv, const ck_workload_opts *opts,
                     ck_workload *w, ck_err *err)
{
    if (optind != argc - 1)
        return ck_fail(err, CK_ERR_INPUT, "%s: expected exactly one MODEL; usage: ckplan %s "
                                          "MODEL [-o FILE] (see --help)", cmd, cmd);
    return ck_workload_load(argv[optind], opts, w, err);
}

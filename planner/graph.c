#include "planner/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/chain.h"
#include "planner/json.h"
#include "planner/limits.h"
#include "planner/size.h"

bool ck_graph_is_checkmate(const cJSON *root)
{
    return cJSON_IsObject(root) && !cJSON_GetObjectItemCaseSensitive(root, "format") &&
           (cJSON_GetObjectItemCaseSensitive(root, "nodes") ||
            cJSON_GetObjectItemCaseSensitive(root, "links"));
}

void ck_graph_free(ck_graph *g)
{
    if (!g)
        return;
    for (size_t v = 0; g->nodes && v < g->n_nodes; v++) {
        free(g->nodes[v].name);
        free(g->nodes[v].inputs);
        free(g->nodes[v].users);
    }
    free(g->nodes);
    free(g->name);
    memset(g, 0, sizeof *g);
}

static int fill_users(ck_graph *g, ck_err *err)
{
    for (size_t v = 0; v < g->n_nodes; v++)
        g->nodes[v].n_users = 0;
    for (size_t v = 0; v < g->n_nodes; v++)
        for (size_t k = 0; k < g->nodes[v].n_inputs; k++)
            g->nodes[g->nodes[v].inputs[k]].n_users++;
    for (size_t v = 0; v < g->n_nodes; v++) {
        ck_graph_node *nd = &g->nodes[v];
        free(nd->users);
        nd->users = malloc((nd->n_users ? nd->n_users : 1) * sizeof *nd->users);
        if (!nd->users)
            return ck_err_oom(err);
        nd->n_users = 0;
    }
    /* users in ascending order: readers are visited by increasing id */
    for (size_t v = 0; v < g->n_nodes; v++)
        for (size_t k = 0; k < g->nodes[v].n_inputs; k++) {
            ck_graph_node *u = &g->nodes[g->nodes[v].inputs[k]];
            u->users[u->n_users++] = v;
        }
    return CK_OK;
}

/* Where a node's field is, for messages: its JSON path in `file` when the graph was read
 * from one (where[v] is node v's index in nodes[]), else the node's id. */
static void field_at(char *buf, size_t len, const char *file, const size_t *where, size_t v,
                     const char *field)
{
    if (where)
        snprintf(buf, len, "%s: nodes[%zu].%s", file, where[v], field);
    else
        snprintf(buf, len, "graph node %zu: %s", v, field);
}

/* Forward nodes before backward ones, costs within bounds, the bytes of all (transients
 * included) below 2^53;
 * sets g->loss. */
static int check_nodes(ck_graph *g, const char *file, const size_t *where, ck_err *err)
{
    uint64_t total = 0;
    char at[CK_JSON_PATH_MAX + 64];
    g->loss = g->n_nodes;
    for (size_t v = 0; v < g->n_nodes; v++) {
        const ck_graph_node *nd = &g->nodes[v];
        if (nd->backward && g->loss == g->n_nodes)
            g->loss = v;
        if (!nd->backward && g->loss < v) {
            field_at(at, sizeof at, file, where, v, "backward");
            return ck_err_fail(err, CK_ERR_INPUT, "%s: expected true, got false: node %zu comes after "
                               "the first backward node (%zu, the loss), and forward nodes come first",
                               at, v, g->loss);
        }
        if (!(nd->cost >= 0 && nd->cost <= CK_CHAIN_MAX_TIME)) {
            field_at(at, sizeof at, file, where, v, "cost_cpu");
            return ck_err_fail(err, CK_ERR_INPUT, "%s: expected a number from 0 to %g, got %g: "
                               CK_CHAIN_MAX_TIME_WHY, at, CK_CHAIN_MAX_TIME, nd->cost);
        }
        if (!ck_size_add(total, nd->bytes, &total) ||
            !ck_size_add(total, nd->transient_bytes, &total) || total >= CK_EXACT_LIMIT) {
            field_at(at, sizeof at, file, where, v, "cost_ram");
            return ck_err_fail(err, CK_ERR_INPUT, "%s: the nodes' bytes add up past 2^53 here: "
                               CK_EXACT_LIMIT_WHY, at);
        }
    }
    return CK_OK;
}

int ck_graph_finish(ck_graph *g, ck_err *err)
{
    for (size_t v = 0; v < g->n_nodes; v++) {
        const ck_graph_node *nd = &g->nodes[v];
        for (size_t k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] >= v || (k > 0 && nd->inputs[k] <= nd->inputs[k - 1]))
                return ck_err_fail(err, CK_ERR_INPUT, "graph node %zu: input %zu is not below the "
                                   "node, or the inputs are not ascending without repeats",
                                   v, nd->inputs[k]);
    }
    int rc = check_nodes(g, "", NULL, err);
    return rc == CK_OK ? fill_users(g, err) : rc;
}

/* ---- Checkmate's node-link documents ---- */

static size_t max_nodes(void)
{
    unsigned long n = ck_limits_get(CK_LIMIT_GRAPH_NODES, CK_GRAPH_MAX_NODES);
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* directed (true), multigraph (false) and graph ({"name": ...}), all optional. */
static int read_header(const cJSON *root, const char *file, const char **name, ck_err *err)
{
    static const char *const keys[] = {"directed", "multigraph", "graph", "nodes", "links", NULL};
    static const char *const graph_keys[] = {"name", NULL};
    bool directed = true, multigraph = false;
    int rc = ck_json_expect_object(root, keys, file, "", err);
    if (rc == CK_OK) rc = ck_json_get_bool(root, "directed", false, &directed, file, "", err);
    if (rc == CK_OK) rc = ck_json_get_bool(root, "multigraph", false, &multigraph, file, "", err);
    if (rc != CK_OK)
        return rc;
    if (!directed || multigraph)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected %s, got %s", file,
                           directed ? "multigraph" : "directed", directed ? "false" : "true",
                           directed ? "true" : "false");
    const cJSON *graph = cJSON_GetObjectItemCaseSensitive(root, "graph");
    if (!graph)
        return CK_OK;
    rc = ck_json_expect_object(graph, graph_keys, file, "graph", err);
    return rc == CK_OK ? ck_json_get_string(graph, "name", false, name, file, "graph", err) : rc;
}

/* nodes[index]: its id (a free slot below n) and figures go to g->nodes[id]; where[id] =
 * index, for messages about it later. */
static int read_node(const cJSON *js, size_t index, const char *file, ck_graph *g, size_t *where,
                     ck_err *err)
{
    static const char *const keys[] = {"id", "name", "backward", "cost_cpu", "cost_ram",
                                       "transient_bytes", NULL};
    char path[CK_JSON_PATH_MAX], idpath[CK_JSON_PATH_MAX];
    ck_json_path_index(path, "nodes", index);
    ck_json_path_key(idpath, path, "id");
    uint64_t id = 0;
    int rc = ck_json_expect_object(js, keys, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "id", true, &id, file, path, err);
    if (rc != CK_OK)
        return rc;
    if (id >= g->n_nodes)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected an id below the number of nodes (%zu), "
                           "got %llu: ids are 0 .. n-1 in topological order", file, idpath,
                           g->n_nodes, (unsigned long long)id);
    if (where[id] != SIZE_MAX)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: id %llu is also nodes[%zu]'s", file, idpath,
                           (unsigned long long)id, where[id]);
    where[id] = index;
    ck_graph_node *nd = &g->nodes[id];
    const char *name = NULL;
    rc = ck_json_get_string(js, "name", false, &name, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_bool(js, "backward", true, &nd->backward, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_time(js, "cost_cpu", true, &nd->cost, file, path, err);
    if (rc == CK_OK) rc = ck_json_get_u64(js, "cost_ram", true, &nd->bytes, file, path, err);
    if (rc == CK_OK)
        rc = ck_json_get_u64(js, "transient_bytes", false, &nd->transient_bytes, file, path, err);
    if (rc != CK_OK)
        return rc;
    char fallback[32];
    snprintf(fallback, sizeof fallback, "n%llu", (unsigned long long)id);
    nd->name = strdup(name ? name : fallback);
    return nd->name ? CK_OK : ck_err_oom(err);
}


typedef struct {
    size_t source, target, index; /* index: the link's place in links[] */
} link_rec;

static int read_link(const cJSON *js, size_t index, const char *file, size_t n, link_rec *l,
                     ck_err *err)
{
    static const char *const keys[] = {"source", "target", NULL};
    char path[CK_JSON_PATH_MAX];
    ck_json_path_index(path, "links", index);
    uint64_t ends[2] = {0, 0};
    int rc = ck_json_expect_object(js, keys, file, path, err);
    for (int e = 0; e < 2 && rc == CK_OK; e++) {
        rc = ck_json_get_u64(js, keys[e], true, &ends[e], file, path, err);
        if (rc == CK_OK && ends[e] >= n)
            rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s.%s: expected a node id below %zu, got %llu",
                             file, path, keys[e], n, (unsigned long long)ends[e]);
    }
    if (rc != CK_OK)
        return rc;
    if (ends[0] >= ends[1])
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected a source below the target, got %llu -> "
                           "%llu: ids are in topological order", file, path,
                           (unsigned long long)ends[0], (unsigned long long)ends[1]);
    *l = (link_rec){(size_t)ends[0], (size_t)ends[1], index};
    return CK_OK;
}

static int compare_links(const void *pa, const void *pb)
{
    const link_rec *a = pa, *b = pb;
    if (a->target != b->target)
        return a->target < b->target ? -1 : 1;
    if (a->source != b->source)
        return a->source < b->source ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* links[] sorted by target then source: each node's inputs, ascending; a link given twice is
 * an error naming the later one. */
static int set_inputs(ck_graph *g, const link_rec *links, size_t n_links, const char *file,
                      ck_err *err)
{
    size_t dup = SIZE_MAX, first = 0;
    for (size_t j = 1; j < n_links; j++)
        if (links[j].source == links[j - 1].source && links[j].target == links[j - 1].target &&
            links[j].index < dup) {
            dup = links[j].index;
            first = links[j - 1].index;
        }
    if (dup != SIZE_MAX)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: links[%zu]: expected each link once, got a repeat "
                           "of links[%zu]", file, dup, first);
    for (size_t j = 0, end; j < n_links; j = end) {
        ck_graph_node *nd = &g->nodes[links[j].target];
        for (end = j; end < n_links && links[end].target == links[j].target; end++)
            ;
        if (!(nd->inputs = malloc((end - j) * sizeof *nd->inputs)))
            return ck_err_oom(err);
        for (size_t k = j; k < end; k++)
            nd->inputs[nd->n_inputs++] = links[k].source;
    }
    return CK_OK;
}

static int read_links(const cJSON *links, const char *file, ck_graph *g, ck_err *err)
{
    size_t n = (size_t)cJSON_GetArraySize(links), i = 0;
    link_rec *recs = malloc((n ? n : 1) * sizeof *recs);
    if (!recs)
        return ck_err_oom(err);
    int rc = CK_OK;
    for (const cJSON *js = links->child; js && rc == CK_OK; js = js->next, i++)
        rc = read_link(js, i, file, g->n_nodes, &recs[i], err);
    if (rc == CK_OK) {
        qsort(recs, n, sizeof *recs, compare_links);
        rc = set_inputs(g, recs, n, file, err);
    }
    free(recs);
    return rc;
}

static int read_nodes(const cJSON *nodes, const char *file, ck_graph *g, size_t *where, ck_err *err)
{
    size_t i = 0;
    int rc = CK_OK;
    for (size_t v = 0; v < g->n_nodes; v++)
        where[v] = SIZE_MAX;
    for (const cJSON *js = nodes->child; js && rc == CK_OK; js = js->next, i++)
        rc = read_node(js, i, file, g, where, err);
    return rc == CK_OK ? check_nodes(g, file, where, err) : rc;
}

int ck_graph_from_checkmate(const cJSON *root, const char *file, ck_graph *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    const char *name = NULL;
    const cJSON *nodes = NULL, *links = NULL;
    int rc = read_header(root, file, &name, err);
    if (rc == CK_OK) rc = ck_json_get_array(root, "nodes", true, &nodes, file, "", err);
    if (rc == CK_OK) rc = ck_json_get_array(root, "links", true, &links, file, "", err);
    if (rc != CK_OK)
        return rc;
    size_t n = (size_t)cJSON_GetArraySize(nodes), limit = max_nodes();
    if (n == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: nodes: expected at least one node, got an empty "
                           "array", file);
    if (n > limit)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: nodes: %zu nodes is more than the limit of %zu "
                           "(set %s to raise it)", file, n, limit, ck_limits_name(CK_LIMIT_GRAPH_NODES));
    size_t *where = malloc(n * sizeof *where);
    out->name = strdup(name ? name : "");
    out->nodes = calloc(n, sizeof *out->nodes);
    out->n_nodes = n;
    rc = where && out->name && out->nodes ? CK_OK : ck_err_oom(err);
    if (rc == CK_OK) rc = read_nodes(nodes, file, out, where, err);
    if (rc == CK_OK) rc = read_links(links, file, out, err);
    if (rc == CK_OK) rc = fill_users(out, err);
    free(where);
    if (rc != CK_OK)
        ck_graph_free(out);
    return rc;
}

/* ---- schedules ---- */

bool ck_graph_schedule_push(ck_graph_schedule *s, ck_graph_op_kind kind, size_t node)
{
    if (!ck_size_reserve((void **)&s->ops, &s->cap, s->n, sizeof *s->ops))
        return false;
    s->ops[s->n++] = (ck_graph_op){kind, node};
    return true;
}

void ck_graph_schedule_free(ck_graph_schedule *s)
{
    if (!s)
        return;
    free(s->ops);
    memset(s, 0, sizeof *s);
}

static int replay_compute(const ck_graph *g, size_t k, size_t v, bool *resident, uint64_t *live,
                          ck_err *err)
{
    const ck_graph_node *nd = &g->nodes[v];
    if (resident[v])
        return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (compute %zu): node %zu (%s) is already "
                           "resident", k, v, v, nd->name);
    for (size_t j = 0; j < nd->n_inputs; j++)
        if (!resident[nd->inputs[j]])
            return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (compute %zu): needs node %zu (%s), "
                               "which is not resident", k, v, nd->inputs[j],
                               g->nodes[nd->inputs[j]].name);
    if (!ck_size_add(*live, nd->bytes, live))
        return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (compute %zu): the resident bytes "
                           "overflow 64 bits", k, v);
    resident[v] = true;
    return CK_OK;
}

static int replay_ops(const ck_graph *g, const ck_graph_schedule *s, bool *resident, bool *computed,
                      ck_graph_replay *out, ck_err *err)
{
    uint64_t live = 0;
    for (size_t k = 0; k < s->n; k++) {
        size_t v = s->ops[k].node;
        bool compute = s->ops[k].kind == CK_GRAPH_COMPUTE;
        if (v >= g->n_nodes)
            return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (%s %zu): no such node (the graph "
                               "has %zu)", k, compute ? "compute" : "free", v, g->n_nodes);
        if (!compute) {
            if (!resident[v])
                return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (free %zu): node %zu (%s) is "
                                   "not resident", k, v, v, g->nodes[v].name);
            resident[v] = false;
            live -= g->nodes[v].bytes;
            continue;
        }
        int rc = replay_compute(g, k, v, resident, &live, err);
        if (rc != CK_OK)
            return rc;
        computed[v] = true;
        out->computes++;
        out->time += g->nodes[v].cost;
        /* Below 2^53 with the transient too (check_nodes). */
        uint64_t top = live + g->nodes[v].transient_bytes;
        if (top > out->peak_bytes || out->computes == 1) {
            out->peak_bytes = top;
            out->peak_op = k;
        }
    }
    return CK_OK;
}

int ck_graph_replay_schedule(const ck_graph *g, const ck_graph_schedule *s, ck_graph_replay *out,
                             ck_err *err)
{
    memset(out, 0, sizeof *out);
    bool *resident = calloc(2 * (g->n_nodes ? g->n_nodes : 1), sizeof *resident);
    if (!resident)
        return ck_err_oom(err);
    bool *computed = resident + g->n_nodes;
    int rc = replay_ops(g, s, resident, computed, out, err);
    for (size_t v = 0; rc == CK_OK && v < g->n_nodes; v++)
        if (!computed[v])
            rc = ck_err_fail(err, CK_ERR_INPUT, "schedule: never computes node %zu (%s)%s", v,
                             g->nodes[v].name, g->nodes[v].backward ? ", a backward node" : "");
    free(resident);
    return rc;
}

int ck_graph_schedule_baseline(const ck_graph *g, ck_graph_schedule *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    bool ok = true;
    for (size_t v = 0; ok && v < g->n_nodes; v++) {
        const ck_graph_node *nd = &g->nodes[v];
        ok = ck_graph_schedule_push(out, CK_GRAPH_COMPUTE, v);
        for (size_t j = 0; ok && j < nd->n_inputs; j++) {
            const ck_graph_node *u = &g->nodes[nd->inputs[j]];
            if (u->users[u->n_users - 1] == v)
                ok = ck_graph_schedule_push(out, CK_GRAPH_FREE, nd->inputs[j]);
        }
        if (ok && !nd->n_users && !nd->backward)
            ok = ck_graph_schedule_push(out, CK_GRAPH_FREE, v);
    }
    if (ok)
        return CK_OK;
    ck_graph_schedule_free(out);
    return ck_err_oom(err);
}

void ck_graph_plan_result_init(ck_graph_plan_result *r)
{
    memset(r, 0, sizeof *r);
    r->bound = NAN;
    r->gap = NAN;
}

void ck_graph_plan_result_free(ck_graph_plan_result *r)
{
    ck_graph_schedule_free(&r->schedule);
    ck_graph_plan_result_init(r);
}

/* ---- writing ---- */

static bool add_node_json(cJSON *nodes, const ck_graph_node *nd, size_t id)
{
    cJSON *js = cJSON_CreateObject();
    bool ok = js && cJSON_AddItemToArray(nodes, js) && cJSON_AddNumberToObject(js, "id", (double)id) &&
              cJSON_AddStringToObject(js, "name", nd->name) &&
              cJSON_AddBoolToObject(js, "backward", nd->backward) &&
              ck_json_add_number(js, "cost_cpu", nd->cost) &&
              cJSON_AddNumberToObject(js, "cost_ram", (double)nd->bytes);
    if (ok && nd->transient_bytes)
        ok = cJSON_AddNumberToObject(js, "transient_bytes", (double)nd->transient_bytes);
    return ok;
}

cJSON *ck_graph_to_checkmate(const ck_graph *g)
{
    cJSON *root = cJSON_CreateObject(), *graph = NULL, *nodes = NULL, *links = NULL;
    bool ok = root && cJSON_AddBoolToObject(root, "directed", true) &&
              cJSON_AddBoolToObject(root, "multigraph", false) &&
              (graph = cJSON_AddObjectToObject(root, "graph")) &&
              cJSON_AddStringToObject(graph, "name", g->name) &&
              (nodes = cJSON_AddArrayToObject(root, "nodes")) &&
              (links = cJSON_AddArrayToObject(root, "links"));
    for (size_t v = 0; ok && v < g->n_nodes; v++)
        ok = add_node_json(nodes, &g->nodes[v], v);
    for (size_t v = 0; ok && v < g->n_nodes; v++)
        for (size_t k = 0; ok && k < g->nodes[v].n_inputs; k++) {
            cJSON *link = cJSON_CreateObject();
            ok = link && cJSON_AddItemToArray(links, link) &&
                 cJSON_AddNumberToObject(link, "source", (double)g->nodes[v].inputs[k]) &&
                 cJSON_AddNumberToObject(link, "target", (double)v);
        }
    if (ok)
        return root;
    cJSON_Delete(root);
    return NULL;
}

uint64_t ck_graph_least_peak(const ck_graph *g, size_t *node)
{
    uint64_t most = 0;
    for (size_t v = 0; v < g->n_nodes; v++) {
        uint64_t need = g->nodes[v].bytes + g->nodes[v].transient_bytes;
        for (size_t p = 0; p < g->nodes[v].n_inputs; p++)
            need += g->nodes[g->nodes[v].inputs[p]].bytes;
        if (need > most || v == 0) {
            most = need;
            if (node)
                *node = v;
        }
    }
    return most;
}

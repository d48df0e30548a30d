/* The drain verdict's reading of one node and one job list, as slurmrestd
 * of 22.05 (v0.0.38) or 26.05 (v0.0.44) writes them: the input picks the
 * node's base state, its state words (DRAIN, UNDRAIN, COMPLETING, a second
 * base word, a word nobody knows), what is allocated, and up to eight jobs
 * (state, flag, which nodes they list, hostlists that do not expand). The
 * facts judge() combines (sm_node_drained, then no job of the list that
 * holds the node: sm_job_holds_nodes over the expanded hostlist, a list
 * that does not expand proving nothing) may say "free" only when the
 * input's own truth is free: drained, a jobless base state, nothing
 * completing or unknown, nothing allocated where Slurm counts it, and no
 * job naming the node that is not over with nothing left there. */
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/mem.h"
#include "fuzz.h"
#include "slurmio/hostlist.h"
#include "slurmio/model.h"

static const char *const BASES[] = {"IDLE",  "DOWN",  "FUTURE",  "ALLOCATED",
                                    "MIXED", "ERROR", "UNKNOWN", "SHINY"};
static const int BASE_FREE[] = {1, 1, 1, 0, 0, 0, 0, 0};
static const char *const JSTATES[] = {"COMPLETED", "CANCELLED",  "FAILED",  "TIMEOUT",
                                      "PREEMPTED", "NODE_FAIL",  "RUNNING", "SUSPENDED",
                                      "PENDING",   "COMPLETING", "STOPPED", "SHINY"};
static const int JSTATE_OVER[] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
/* Flags on a v0.0.44 job (one word each); only the first leaves nothing. */
static const char *const JFLAGS[] = {"",          "UPDATE_DB", "COMPLETING", "REQUEUED",
                                     "STAGE_OUT", "SIGNALING", "GLOW"};
static const int JFLAG_BENIGN[] = {1, 1, 0, 0, 0, 0, 0};
static const char *const LISTS[] = {"", "n1", "n[0-2]", "n0,n1", "n2", "n[1-", "n0"};
static const int LIST_NAMES_N1[] = {0, 1, 1, 1, 0, -1, 0}; /* -1: does not expand */

static int holds_n1(const sm_job *j, int *bad)
{
    if (!j->nodes || !*j->nodes || !sm_job_holds_nodes(j))
        return 0;
    hostlist_names hn;
    int found = 0;
    if (hostlist_expand(j->nodes, 0, &hn) < 0) {
        *bad = 1;
    } else {
        for (size_t i = 0; i < hn.n; i++)
            found |= strcmp(hn.names[i], "n1") == 0;
    }
    hostlist_names_free(&hn);
    return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t size)
{
    if (size < 4)
        return 0;
    int v44 = d[0] & 1;
    int version = v44 ? SM_V44 : SM_V38;
    int base = d[1] % 8, words = d[2], alloc = d[3] % 4;
    int drain = words & 1, undrain = words & 2, completing = words & 4, second = words & 8,
        unknown = words & 16;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int rc = 0;
    if (v44) {
        rc |= buf_printf(&b, "{\"nodes\":[{\"name\":\"n1\",\"state\":[\"%s\"%s%s%s%s%s],\"alloc_cpus\":%d,"
                             "\"alloc_memory\":%d}],\"last_update\":{\"set\":true,\"infinite\":false,"
                             "\"number\":100},\"errors\":[]}",
                         BASES[base], drain ? ",\"DRAIN\"" : "", undrain ? ",\"UNDRAIN\"" : "",
                         completing ? ",\"COMPLETING\"" : "", second ? ",\"ALLOCATED\"" : "",
                         unknown ? ",\"GLOW\"" : "", alloc & 1, (alloc & 2) ? 512 : 0);
    } else {
        rc |= buf_printf(&b, "{\"nodes\":[{\"name\":\"n1\",\"state\":\"%s\",\"state_flags\":[\"X\"%s%s%s%s],"
                             "\"alloc_cpus\":%d}],\"errors\":[]}",
                         BASES[base], drain ? ",\"DRAIN\"" : "", undrain ? ",\"UNDRAIN\"" : "",
                         completing ? ",\"COMPLETING\"" : "", unknown ? ",\"GLOW\"" : "", alloc & 1);
    }
    /* v0.0.38's flag list always carries one word nobody knows ("X") so the
     * truth below need not guess it: such a node is never free. */
    int truth =
        drain && !undrain && BASE_FREE[base] && !completing && !unknown && !(v44 && (second || alloc)) && v44;
    buf_t j;
    buf_init(&j, BUF_UNLIMITED);
    rc |= buf_puts(&j, "{\"jobs\":[");
    size_t n_jobs = (size_t)(size - 4) / 3;
    if (n_jobs > 8)
        n_jobs = 8;
    for (size_t k = 0; k < n_jobs; k++) {
        const uint8_t *p = d + 4 + 3 * k;
        int st = p[0] % 12, fl = p[1] % 7, li = p[2] % 7;
        if (v44)
            rc |= buf_printf(&j, "%s{\"job_id\":%zu,\"job_state\":[\"%s\"%s%s%s],\"nodes\":\"%s\"}",
                             k ? "," : "", k + 1, JSTATES[st], *JFLAGS[fl] ? ",\"" : "", JFLAGS[fl],
                             *JFLAGS[fl] ? "\"" : "", LISTS[li]);
        else
            rc |= buf_printf(&j, "%s{\"job_id\":%zu,\"job_state\":\"%s\",\"nodes\":\"%s\"}", k ? "," : "",
                             k + 1, JSTATES[st], LISTS[li]);
        int over = JSTATE_OVER[st] && (!v44 || JFLAG_BENIGN[fl]);
        if (LIST_NAMES_N1[li] < 0 || (LIST_NAMES_N1[li] && !over))
            truth = 0;
    }
    rc |=
        buf_puts(&j, v44 ? "],\"last_update\":{\"set\":true,\"infinite\":false,\"number\":100},\"errors\":[]}"
                         : "],\"errors\":[]}");
    FUZZ_ASSERT(rc == 0);
    sm_response nr, jr;
    int nrc = sm_parse(version, SM_KIND_NODES, 200, buf_cstr(&b), b.len, &nr);
    int jrc = sm_parse(version, SM_KIND_JOBS, 200, buf_cstr(&j), j.len, &jr);
    int free_ = nrc == 0 && jrc == 0 && nr.n_nodes == 1 && sm_node_drained(&nr.nodes[0]);
    int bad = 0;
    for (size_t k = 0; free_ && k < jr.n_jobs; k++)
        if (holds_n1(&jr.jobs[k], &bad) || bad)
            free_ = 0;
    if (free_ && !truth) {
        fprintf(stderr, "node %s\njobs %s\n", buf_cstr(&b), buf_cstr(&j));
        FUZZ_ASSERT(!"a delete licensed that the truth does not allow");
    }
    /* Nothing busy is ever drained. */
    FUZZ_ASSERT(nrc != 0 || nr.n_nodes != 1 ||
                !(sm_node_busy(&nr.nodes[0]) && sm_node_drained(&nr.nodes[0])));
    sm_response_free(&nr);
    sm_response_free(&jr);
    buf_free(&b);
    buf_free(&j);
    return 0;
}

/* hostlist: Slurm hostlist expressions, in pure C.
 *
 * Slurm names sets of nodes with expressions such as "g[00001-00003,7],n1"
 * or "rack[1-2]node[01-02]" (several bracket groups multiply out). The
 * operator needs both directions: a job's "nodes" field must be expanded to
 * find the pods whose deadline it sets, and a batch of node updates (every
 * node drained in one loop tick) goes to Slurm as one compressed expression
 * so that 8,192 drains are one RPC instead of 8,192.
 *
 * Grammar accepted by hostlist_expand (the subset of Slurm's that node
 * names use): entries separated by ',' or whitespace outside brackets; an
 * entry is literal text with zero or more bracket groups; a group holds a
 * comma-separated list of N or N-M, decimal, at most 18 digits; the low
 * bound's digit count sets the zero-padded width ("[01-10]" gives 01..10,
 * "[1-10]" gives 1..10). Nested or unbalanced brackets, empty groups, M < N,
 * and empty entries between commas are malformed. Names are not
 * de-duplicated, as in Slurm.
 *
 * Everything is bounded: the caller gives the largest number of names it is
 * willing to receive, and the count is computed before anything is
 * allocated, so "n[0-999999999999]" costs nothing but an error.
 */
#ifndef OP_HOSTLIST_H
#define OP_HOSTLIST_H

#include <stddef.h>

/** Longest node name accepted or produced, in bytes (Slurm's own limit is
 *  lower in practice; this is a sanity bound against hostile input). */
#define HOSTLIST_NAME_MAX 255
/** A sensible default bound for expansions (MaxNodeCount-scale). */
#define HOSTLIST_DEFAULT_MAX 65536

/** The result of an expansion: names[0..n-1], each NUL-terminated. */
typedef struct hostlist_names {
    char **names; /* read-only; owned by the struct */
    size_t n;     /* read-only */
} hostlist_names;

/**
 * Expand a hostlist expression.
 *
 * @param expr  the expression (NULL or "" gives zero names).
 * @param max   the largest number of names accepted (0 means
 *              HOSTLIST_DEFAULT_MAX).
 * @param out   receives the names; always initialised, also on failure.
 * @return 0; OP_EPARSE when expr is malformed or a name would be longer than
 *         HOSTLIST_NAME_MAX; OP_ETOOBIG when more than max names would result
 *         (nothing is allocated then).
 */
int hostlist_expand(const char *expr, size_t max, hostlist_names *out);

/** Count the names expr expands to without expanding it (same errors). */
int hostlist_count(const char *expr, size_t max, size_t *count);

/** Release the names of an expansion; the struct is empty afterwards. */
void hostlist_names_free(hostlist_names *hn);

/**
 * Compress names into the shortest usual Slurm expression.
 *
 * The names are sorted (by the text before the trailing digits, then by
 * the number), duplicates are dropped, and names that share a prefix and
 * a zero-padding width become ranges: {"g00001","g00002","g00003","g00007"}
 * gives "g[00001-00003,00007]"; {"n9","n10"} gives "n[9-10]"; names without
 * trailing digits stay as they are. The result expands back to the same
 * set (hostlist_expand(hostlist_compress(x)) == sorted unique x).
 *
 * @param names  n names; none may be NULL. The array is not modified.
 * @return a malloc'd string ("" for n == 0); NULL (with nothing allocated)
 *         when a name is empty, longer than HOSTLIST_NAME_MAX or contains
 *         a character that cannot appear in an expression (',', '[', ']',
 *         whitespace).
 */
char *hostlist_compress(const char *const *names, size_t n);

/**
 * Whether a single node name is usable in an expression (non-empty, at most
 * HOSTLIST_NAME_MAX bytes, no ',', '[', ']' or whitespace).
 */
int hostlist_name_valid(const char *name);

#endif

#include "reconcilers/partconf.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum vkind { V_ANY, V_BOOL, V_STATE, V_COUNT };

/* since: the oldest Slurm (YY * 100 + MM) whose slurmctld takes the key; 0
 * for every version slurmop supports (22.05 on). Measured on the Slurm labs
 * (tests/integration/test_slurm_partconf.py): 22.05 refuses ExclusiveTopo,
 * MaxCPUsPerSocket and PowerDownOnIdle, which 24.11 takes; 24.11 refuses
 * Topology, which came with 25.05's multiple topologies (26.05 takes it).
 * Versions between the labs' are not assumed. */
static const struct key {
    const char *name;
    enum vkind v;
    int since;
} keys[] = {
    {"AllocNodes", V_ANY, 0},         {"AllowAccounts", V_ANY, 0},       {"AllowGroups", V_ANY, 0},
    {"AllowQos", V_ANY, 0},           {"Alternate", V_ANY, 0},           {"CpuBind", V_ANY, 0},
    {"Default", V_BOOL, 0},           {"DefaultTime", V_ANY, 0},         {"DefCpuPerGPU", V_COUNT, 0},
    {"DefMemPerCPU", V_COUNT, 0},     {"DefMemPerGPU", V_COUNT, 0},      {"DefMemPerNode", V_COUNT, 0},
    {"DenyAccounts", V_ANY, 0},       {"DenyQos", V_ANY, 0},             {"DisableRootJobs", V_BOOL, 0},
    {"ExclusiveTopo", V_BOOL, 2411},  {"ExclusiveUser", V_BOOL, 0},      {"GraceTime", V_COUNT, 0},
    {"Hidden", V_BOOL, 0},            {"LLN", V_BOOL, 0},                {"MaxCPUsPerNode", V_COUNT, 0},
    {"MaxCPUsPerSocket", V_COUNT, 2411}, {"MaxMemPerCPU", V_COUNT, 0},   {"MaxMemPerNode", V_COUNT, 0},
    {"MaxNodes", V_COUNT, 0},         {"MaxTime", V_ANY, 0},             {"MinNodes", V_COUNT, 0},
    {"OverSubscribe", V_ANY, 0},      {"OverTimeLimit", V_COUNT, 0},     {"PowerDownOnIdle", V_BOOL, 2411},
    {"PreemptMode", V_ANY, 0},        {"PriorityJobFactor", V_COUNT, 0}, {"PriorityTier", V_COUNT, 0},
    {"QOS", V_ANY, 0},                {"ReqResv", V_BOOL, 0},            {"ResumeTimeout", V_COUNT, 0},
    {"RootOnly", V_BOOL, 0},          {"SelectTypeParameters", V_ANY, 0}, {"State", V_STATE, 0},
    {"SuspendTime", V_ANY, 0},        {"SuspendTimeout", V_COUNT, 0},    {"Topology", V_ANY, 2505},
    {"TRESBillingWeights", V_ANY, 0},
};

/* Written by the operator on the same line: a second Nodes= would put other
 * nodes (Nodes=ALL: every node of the cluster) into the partition. */
static const char *const reserved[] = {"PartitionName", "Nodes"};

static int fail(char *why, size_t size, const char *fmt, const char *a, size_t alen)
{
    if (why && size)
        snprintf(why, size, fmt, (int)alen, a);
    return -1;
}

static int value_char(int c)
{
    return c > ' ' && c < 0x7f && c != '"' && c != '#' && c != '\\';
}

static int one_of(const char *v, size_t n, const char *const *list, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (strlen(list[i]) == n && strncasecmp(v, list[i], n) == 0)
            return 1;
    return 0;
}

static int value_ok(enum vkind kind, const char *v, size_t n)
{
    static const char *const bools[] = {"YES", "NO"};
    static const char *const states[] = {"UP", "DOWN", "DRAIN", "INACTIVE"};
    static const char *const unlimited[] = {"UNLIMITED", "INFINITE"};
    switch (kind) {
    case V_BOOL:
        return one_of(v, n, bools, 2);
    case V_STATE:
        return one_of(v, n, states, 4);
    case V_COUNT:
        if (one_of(v, n, unlimited, 2))
            return 1;
        for (size_t i = 0; i < n; i++)
            if (!isdigit((unsigned char)v[i]))
                return 0;
        return n > 0;
    case V_ANY:
        break;
    }
    return 1;
}

int pcf_check(const char *config, int slurm_version, char *why, size_t size)
{
    if (config == NULL)
        return 0;
    if (strlen(config) > PCF_MAX_LEN)
        return fail(why, size, "is longer than 4096 characters%.*s", "", 0);
    const char *p = config;
    const char *seen[sizeof(keys) / sizeof(keys[0])] = {0};
    while (*p) {
        if (*p == ' ' || *p == '\t') {
            p++;
            continue;
        }
        const char *word = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '=')
            p++;
        size_t klen = (size_t)(p - word);
        if (*p != '=' || klen == 0) {
            while (*p && *p != ' ' && *p != '\t')
                p++;
            return fail(why, size, "\"%.*s\" is not KEY=VALUE", word, (size_t)(p - word));
        }
        for (size_t i = 0; i < klen; i++)
            if (!isalnum((unsigned char)word[i]))
                return fail(why, size, "\"%.*s\" is not a partition key", word, klen);
        if (one_of(word, klen, reserved, 2))
            return fail(why, size, "%.*s is written by the operator and may not be set", word, klen);
        size_t k = 0;
        while (k < sizeof(keys) / sizeof(keys[0]) &&
               !(strlen(keys[k].name) == klen && strncasecmp(keys[k].name, word, klen) == 0))
            k++;
        if (k == sizeof(keys) / sizeof(keys[0]))
            return fail(why, size, "%.*s is not a key Slurm accepts on a partition line (slurm.conf(5))",
                        word, klen);
        if (keys[k].since && slurm_version < keys[k].since) {
            if (why && size)
                snprintf(why, size,
                         "%.*s needs Slurm %d.%02d or later, and the Controller's slurmctld image %s",
                         (int)klen, word, keys[k].since / 100, keys[k].since % 100,
                         slurm_version ? "is older" : "names no version (its tag)");
            return -1;
        }
        if (seen[k])
            return fail(why, size, "%.*s is given twice", word, klen);
        seen[k] = word;
        p++; /* '=' */
        const char *v = p;
        size_t vlen;
        if (*p == '"') {
            p++;
            while (*p && *p != '"') {
                if (*p < ' ' || *p >= 0x7f || *p == '#' || *p == '\\')
                    return fail(why, size, "the value of %.*s holds a character slurm.conf reads specially",
                                word, klen);
                p++;
            }
            if (*p != '"')
                return fail(why, size, "the value of %.*s has no closing quote", word, klen);
            p++;
            vlen = (size_t)(p - v) - 2;
            v++;
            if (*p && *p != ' ' && *p != '\t')
                return fail(why, size, "the value of %.*s goes on after its closing quote", word, klen);
        } else {
            while (*p && *p != ' ' && *p != '\t') {
                if (!value_char((unsigned char)*p))
                    return fail(why, size, "the value of %.*s holds a character slurm.conf reads specially",
                                word, klen);
                p++;
            }
            vlen = (size_t)(p - v);
        }
        if (vlen == 0)
            return fail(why, size, "%.*s has no value", word, klen);
        if (!value_ok(keys[k].v, v, vlen))
            return fail(why, size, "the value of %.*s is not one Slurm accepts", word, klen);
    }
    return 0;
}

int pcf_check_name(const char *name, char *why, size_t size)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 253)
        return fail(why, size, "the Slurm NodeSet name \"%.*s\" is empty or longer than 253 characters",
                    name ? name : "", n > 40 ? 40 : n);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
            return fail(
                why, size,
                "the Slurm NodeSet name \"%.*s\" (from spec.template.spec.hostname) may hold only letters, "
                "digits, '-', '_' and '.'",
                name, n);
    return 0;
}

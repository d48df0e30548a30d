/* Unit tests for reconcilers/nodeset_precreate: when a scale-out's node records may be made first (the
 * --conf declares the hardware slurmd would register), the create line it sends, and how a pod template's
 * GPU request is found. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconcilers/nodeset_precreate.h"

static void test_check(void **state)
{
    (void)state;
    assert_int_equal(nspr_check("CPUs=2\vRealMemory=1000", 0, 0), NSPR_OK);
    /* Keys are read in any case, as slurmd reads them. */
    assert_int_equal(nspr_check("cpus=2\vrealmemory=1000", 0, 0), NSPR_OK);
    assert_int_equal(nspr_check("Features=gpu\vRealMemory=1000", 0, 0), NSPR_NO_CPUS);
    assert_int_equal(nspr_check("CPUs=2\vFeatures=gpu", 0, 0), NSPR_NO_MEMORY);
    assert_int_equal(nspr_check("", 0, 0), NSPR_NO_CPUS);
    assert_int_equal(nspr_check(NULL, 0, 0), NSPR_NO_CPUS);
    /* An empty value declares nothing; a key that only starts the same is another key. */
    assert_int_equal(nspr_check("CPUs=\vRealMemory=1000", 0, 0), NSPR_NO_CPUS);
    assert_int_equal(nspr_check("CPUsX=2\vRealMemory=1000", 0, 0), NSPR_NO_CPUS);
    assert_int_equal(nspr_check("CPUs=2\vRealMemory=1000", 1, 0), NSPR_NO_GRES);
    assert_int_equal(nspr_check("CPUs=2\vRealMemory=1000\vGres=gpu:8", 1, 0), NSPR_OK);
    assert_int_equal(nspr_check("CPUs=2\vRealMemory=1000\vGres=gpu:8", 1, 1), NSPR_OPTED_OUT);
    for (int w = NSPR_OK; w <= NSPR_OPTED_OUT; w++)
        assert_true(strlen(nspr_why_str((enum nspr_why)w)) > 0);
    assert_non_null(strstr(nspr_why_str(NSPR_OPTED_OUT), NSPR_ANNOTATION));
}

static void test_line(void **state)
{
    (void)state;
    const char *names[] = {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-7"};
    char *line = nspr_line("CPUs=2\vRealMemory=1000\vFeatures=gpu,a100", names, 5);
    assert_non_null(line);
    assert_string_equal(line,
                        "NodeName=gpu-[0-3,7] State=FUTURE CPUs=2 RealMemory=1000 Features=gpu,a100");
    free(line);

    /* Items keep their order; empty items between separators are dropped. */
    line = nspr_line("RealMemory=1\v\vCPUs=4\v", names, 1);
    assert_non_null(line);
    assert_string_equal(line, "NodeName=gpu-0 State=FUTURE RealMemory=1 CPUs=4");
    free(line);

    /* A space would split one item into two on slurmctld's side. */
    assert_null(nspr_line("CPUs=2\vFeatures=a b", names, 5));
    assert_null(nspr_line("CPUs=2", names, 0));
    const char *bad[] = {"gpu-0", "gpu[1]"};
    assert_null(nspr_line("CPUs=2", bad, 2));
}

static void test_template_gpus(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        int want;
    } cases[] = {
        {"{}", 0},
        {"{\"containers\":[{\"name\":\"slurmd\"}]}", 0},
        {"{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}]}", 0},
        {"{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}", 1},
        {"{\"containers\":[{\"resources\":{\"requests\":{\"amd.com/gpu\":\"1\"}}}]}", 1},
        {"{\"containers\":[{}],\"initContainers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]}", 1},
        /* A name that only contains "gpu" is not a GPU request. */
        {"{\"containers\":[{\"resources\":{\"limits\":{\"example.com/gpu-mem\":\"1\"}}}]}", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *j = cJSON_Parse(cases[i].spec);
        assert_non_null(j);
        if (nspr_template_gpus(j) != cases[i].want)
            fail_msg("case %zu: %s", i, cases[i].spec);
        cJSON_Delete(j);
    }
    assert_int_equal(nspr_template_gpus(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_line),
        cmocka_unit_test(test_template_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

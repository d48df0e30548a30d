/* Unit tests for reconcilers/podtemplate: the Slinky template merge rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "reconcilers/podtemplate.h"

static cJSON *J(const char *s)
{
    cJSON *o = json_parse(s, strlen(s), NULL);
    assert_non_null(o);
    return o;
}

static void expect(cJSON *o, const char *want)
{
    char *got = json_dump(o);
    assert_string_equal(got, want);
    free(got);
}

static void test_container_override(void **state)
{
    cJSON *base = J(
        "{\"name\":\"slurmd\",\"image\":\"a\",\"args\":[\"-Z\"],\"env\":[{\"name\":\"X\",\"value\":\"1\"}],"
        "\"livenessProbe\":{\"httpGet\":{\"path\":\"/livez\",\"port\":\"slurmd\"},\"failureThreshold\":6}}");
    cJSON *user = J("{\"name\":\"ignored\",\"image\":\"b\",\"args\":[\"-vvv\"],\"env\":[{\"name\":\"Y\","
                    "\"value\":\"2\"}],"
                    "\"livenessProbe\":{\"tcpSocket\":{\"port\":6818}}}");
    base = pt_merge_container(base, user);
    expect(
        base,
        "{\"name\":\"slurmd\",\"image\":\"b\",\"args\":[\"-Z\",\"-vvv\"],\"env\":[{\"name\":\"X\",\"value\":"
        "\"1\"},{\"name\":\"Y\",\"value\":\"2\"}],\"livenessProbe\":{\"failureThreshold\":6,\"tcpSocket\":"
        "{\"port\":6818}}}");
    cJSON_Delete(base);
    cJSON_Delete(user);
}

static void test_template_merge(void **state)
{
    cJSON *base =
        J("{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"slurmd\"}},\"spec\":{\"containers\":"
          "[{\"name\":\"slurmd\"}],\"volumes\":[{\"name\":\"etc\"}],\"hostname\":\"x\"}}");
    cJSON *user =
        J("{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"evil\",\"team\":\"a\"}},\"spec\":"
          "{\"containers\":[{\"name\":\"slurmd\",\"image\":\"side\"}],\"volumes\":[{\"name\":\"data\"}],"
          "\"nodeSelector\":{\"gpu\":\"1\"}}}");
    base = pt_merge_template(base, user);
    expect(base,
           "{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"slurmd\",\"team\":\"a\"}},\"spec\":"
           "{\"containers\":[{\"name\":\"slurmd\"},{\"name\":\"slurmd\",\"image\":\"side\"}],\"volumes\":"
           "[{\"name\":\"etc\"},{\"name\":\"data\"}],\"hostname\":\"x\",\"nodeSelector\":{\"gpu\":\"1\"}}}");
    cJSON_Delete(base);
    cJSON_Delete(user);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_container_override),
        cmocka_unit_test(test_template_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

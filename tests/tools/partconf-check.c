/* partconf-check: whether slurmop would write a NodeSet's partition config
 * into slurm.conf (reconcilers/partconf.h), for tests and people.
 *
 *   partconf-check VERSION CONFIG...   VERSION as "24.11" (or "0": unknown)
 *
 * Prints "ok" or the reason for each CONFIG, one line each. The real-Slurm
 * test (tests/integration/test_slurm_partconf.py) checks that a slurmctld of
 * the lab's version starts with every config this tool accepts.
 *
 * Exit status: 0 when every CONFIG is accepted, 1 when one is not, 2 on bad
 * usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconcilers/partconf.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: partconf-check VERSION CONFIG...\n");
        return 2;
    }
    int major = 0, minor = 0;
    if (strcmp(argv[1], "0") != 0 && sscanf(argv[1], "%d.%d", &major, &minor) != 2) {
        fprintf(stderr, "partconf-check: VERSION is YY.MM or 0, not %s\n", argv[1]);
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        char why[512];
        if (pcf_check(argv[i], major * 100 + minor, why, sizeof(why)) == 0) {
            printf("ok\n");
        } else {
            printf("%s\n", why);
            rc = 1;
        }
    }
    return rc;
}

/* Replay a corpus through a fuzz target without libFuzzer: every regular
 * file of every directory (or file) named on the command line. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/mem.h"
#include "fuzz.h"

static int run_file(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    if (file_read_all(path, 16u << 20, &data, &len) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
    /* Hand the target an exact-size copy so ASan sees reads past the end. */
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    free(data);
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0, bad = 0;
    mem_init();
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[i]);
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            bad += run_file(path);
            n++;
        }
        if (d)
            closedir(d);
    }
    printf("replayed %d input(s)\n", n);
    return bad ? 1 : (n ? 0 : 1);
}

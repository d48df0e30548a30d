/* Watch-stream framing: the input is cut into fragments at arbitrary points
 * (the first byte seeds the cut lengths) and fed to the splitter; every
 * line it yields must be exactly a line of the whole input, in order, and
 * is parsed as a watch event as kube.c does. */
#include <string.h>

#include "core/json.h"
#include "core/ndjson.h"
#include "fuzz.h"

struct ctx {
    const uint8_t *data;
    size_t size;
    size_t pos; /* where the next expected line starts */
    int lines;
};

/* The next non-blank line of the input after pos, trimmed like ndjson. */
static int next_expected(struct ctx *c, const char **s, size_t *n)
{
    while (c->pos < c->size) {
        const uint8_t *nl = memchr(c->data + c->pos, '\n', c->size - c->pos);
        size_t end = nl ? (size_t)(nl - c->data) : c->size;
        size_t k = end - c->pos;
        const char *p = (const char *)c->data + c->pos;
        c->pos = nl ? end + 1 : c->size;
        while (k && (p[k - 1] == '\r' || p[k - 1] == ' ' || p[k - 1] == '\t'))
            k--;
        if (k) {
            *s = p;
            *n = k;
            return 1;
        }
    }
    return 0;
}

static int on_line(const char *line, size_t len, void *data)
{
    struct ctx *c = data;
    const char *want;
    size_t wn;
    FUZZ_ASSERT(next_expected(c, &want, &wn));
    FUZZ_ASSERT(wn == len && memcmp(want, line, len) == 0);
    c->lines++;
    cJSON *ev = json_parse(line, len, NULL);
    if (ev) {
        (void)json_get_str(ev, "type");
        (void)json_get_str(ev, "object.metadata.resourceVersion");
        cJSON_Delete(ev);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned seed = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    struct ctx c = {p, n, 0, 0};
    ndjson s;
    ndjson_init(&s, 1u << 16);
    size_t off = 0;
    int rc = 0;
    while (off < n && rc == 0) {
        seed = seed * 1103515245u + 12345u;
        size_t cut = 1 + (seed >> 16) % 37;
        if (cut > n - off)
            cut = n - off;
        rc = ndjson_feed(&s, (const char *)p + off, cut, on_line, &c);
        off += cut;
    }
    if (rc == 0)
        ndjson_finish(&s, on_line, &c);
    if (rc == 0) {
        const char *w;
        size_t wn;
        FUZZ_ASSERT(!next_expected(&c, &w, &wn)); /* every line was delivered */
    }
    ndjson_free(&s);
    return 0;
}

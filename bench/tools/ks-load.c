/* ks-load: a load generator for kubesim (or any API server on plain HTTP).
 *
 *   ks-load --url http://127.0.0.1:PORT [-n 8192] [-c 8] [-k 64] [--watchers 5] [--pid PID]
 *
 * Opens the watchers first (GET .../pods?watch=1, each on its own
 * connection), then creates n pods with k requests in flight spread over c
 * keep-alive connections (pipelined: k/c per connection), reports creates/s,
 * waits until every watcher has seen every ADDED event, reads the server's
 * RSS from /proc/<pid>/status, and times a LIST of all pods (one call, then
 * paged at --page items). Plain HTTP only: this measures the API server, not
 * TLS. Ends with one JSON line of results.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/mem.h"

typedef struct conn conn;
typedef void (*resp_cb)(conn *c, int status, const char *body, size_t len);

struct conn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    buf_t in;
    int connected;
    int inflight;
    int watch; /* streaming: count events */
    int headers_done;
    unsigned long long added;
    char tail[32]; /* pattern match across reads */
    resp_cb on_resp;
    int id;
};

static struct {
    uv_loop_t *loop;
    char host[64];
    int port;
    const char *ns;
    int n, conns, inflight, watchers, page, pid;
    int sent, done, failed;
    uint64_t t_start, t_end;
    conn *cc;
    conn *ww;
    int phase;
    int list_items;
    size_t list_bytes;
    char cont[2048];
} G;

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    (void)h;
    (void)sz;
    static char slab[1 << 16];
    b->base = slab;
    b->len = sizeof(slab);
}

static void on_write(uv_write_t *w, int status)
{
    if (status)
        fprintf(stderr, "ks-load: write: %s\n", uv_strerror(status));
    free(w->data);
    free(w);
}

static void send_raw(conn *c, const char *p, size_t n)
{
    uv_write_t *w = xmalloc(sizeof(*w));
    char *copy = xmalloc(n);
    memcpy(copy, p, n);
    w->data = copy;
    uv_buf_t b = uv_buf_init(copy, (unsigned)n);
    uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_write);
}

static void send_req(conn *c, const char *method, const char *path, const char *body)
{
    char *req;
    if (body)
        req = xasprintf(
            "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: ks-load/1.0\r\nAccept: application/json\r\n"
            "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
            method, path, G.host, G.port, strlen(body), body);
    else
        req = xasprintf(
            "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: ks-load/1.0\r\nAccept: application/json\r\n\r\n",
            method, path, G.host, G.port);
    send_raw(c, req, strlen(req));
    free(req);
    c->inflight++;
}

/* Parse complete Content-Length responses out of c->in. */
static void parse_responses(conn *c)
{
    while (c->in.len) {
        char *hdr_end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
        if (hdr_end == NULL)
            return;
        size_t hlen = (size_t)(hdr_end - c->in.data) + 4;
        int status = atoi(c->in.data + 9);
        const char *cl = strcasestr(c->in.data, "\r\nContent-Length:");
        size_t blen = 0;
        if (cl && cl < hdr_end)
            blen = strtoull(cl + 17, NULL, 10);
        if (c->in.len < hlen + blen)
            return;
        c->inflight--;
        c->on_resp(c, status, c->in.data + hlen, blen);
        buf_consume(&c->in, hlen + blen);
    }
}

static const char PAT[] = "{\"type\":\"ADDED\"";
#define PATLEN (sizeof(PAT) - 1)

/* Count ADDED events in a watch stream, also when the pattern is split
 * between two reads (tail keeps the last PATLEN-1 bytes). */
static void count_added(conn *c, const char *p, size_t n)
{
    char join[2 * PATLEN];
    size_t tl = strlen(c->tail);
    size_t take = n < PATLEN - 1 ? n : PATLEN - 1;
    memcpy(join, c->tail, tl);
    memcpy(join + tl, p, take);
    for (size_t i = 0; i < tl && i + PATLEN <= tl + take; i++)
        if (memcmp(join + i, PAT, PATLEN) == 0)
            c->added++;
    for (const char *q = p; (q = memmem(q, (size_t)(p + n - q), PAT, PATLEN)) != NULL; q += PATLEN)
        c->added++;
    if (n >= PATLEN - 1) {
        memcpy(c->tail, p + n - (PATLEN - 1), PATLEN - 1);
        c->tail[PATLEN - 1] = '\0';
    } else {
        size_t keep = tl + n > PATLEN - 1 ? PATLEN - 1 : tl + n;
        char tmp[2 * PATLEN];
        memcpy(tmp, c->tail, tl);
        memcpy(tmp + tl, p, n);
        memcpy(c->tail, tmp + tl + n - keep, keep);
        c->tail[keep] = '\0';
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn *c = (conn *)s;
    if (nread < 0) {
        if (G.phase < 9)
            fprintf(stderr, "ks-load: connection %d: %s\n", c->id, uv_strerror((int)nread));
        uv_close((uv_handle_t *)s, NULL);
        return;
    }
    if (c->watch) {
        if (!c->headers_done) {
            c->headers_done = 1;
            if (strncmp(b->base, "HTTP/1.1 200", 12) != 0)
                fprintf(stderr, "ks-load: watch %d refused: %.60s\n", c->id, b->base);
        }
        count_added(c, b->base, (size_t)nread);
        return;
    }
    if (buf_append(&c->in, b->base, (size_t)nread) != 0)
        abort();
    parse_responses(c);
}

static void start_phase(void);

static void on_connect(uv_connect_t *r, int status)
{
    conn *c = r->data;
    if (status) {
        fprintf(stderr, "ks-load: connect: %s\n", uv_strerror(status));
        exit(1);
    }
    c->connected = 1;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    start_phase();
}

static void conn_open(conn *c, int id)
{
    memset(c, 0, sizeof(*c));
    c->id = id;
    buf_init(&c->in, BUF_UNLIMITED);
    uv_tcp_init(G.loop, &c->tcp);
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_in a;
    uv_ip4_addr(G.host, G.port, &a);
    c->creq.data = c;
    uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&a, on_connect);
}

static double now_s(void)
{
    return (double)uv_hrtime() / 1e9;
}

static long rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

static char *pod_body(int i)
{
    return xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"load-%05d\",\"labels\":{\"app."
        "kubernetes.io/name\":\"slurmd\",\"app.kubernetes.io/instance\":\"gpu\",\"slinky.slurm.net/"
        "nodeset\":\"gpu\"},\"annotations\":{\"slinky.slurm.net/pod-template-hash\":\"6d9f7c5b8\"}},"
        "\"spec\":{\"hostname\":\"gpu-%d\",\"containers\":[{\"name\":\"slurmd\",\"image\":\"ghcr.io/"
        "slinkyproject/slurmd:25.05-ubuntu24.04\",\"args\":[\"-Z\",\"--conf-server\",\"slurm-"
        "controller:6817\"],\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"ports\":[{\"name\":"
        "\"slurmd\",\"containerPort\":6818}],\"securityContext\":{\"privileged\":true}}],\"subdomain\":"
        "\"slurm-compute\"}}",
        i, i);
}

/* ---- phases ------------------------------------------------------------ */

enum { PH_WATCH_CONNECT, PH_CONNECT, PH_CREATE, PH_FANOUT, PH_LIST, PH_PAGED, PH_DONE = 9 };
static int connected_watchers, connected_conns;
static double t_create0, t_create1, t_fanout1, t_list0, t_list1, t_paged0, t_paged1;
static long rss_after_create, rss_after_list;
static int pages;

static void on_create_resp(conn *c, int status, const char *body, size_t len)
{
    (void)body;
    (void)len;
    G.done++;
    if (status != 201) {
        if (G.failed++ < 5)
            fprintf(stderr, "ks-load: create -> %d %.*s\n", status, (int)(len > 200 ? 200 : len), body);
    }
    if (G.sent < G.n) {
        char *b = pod_body(G.sent++);
        char path[256];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", G.ns);
        send_req(c, "POST", path, b);
        free(b);
    }
    if (G.done == G.n) {
        t_create1 = now_s();
        G.phase = PH_FANOUT;
        start_phase();
    }
}

static void on_list_resp(conn *c, int status, const char *body, size_t len)
{
    (void)c;
    t_list1 = now_s();
    if (status != 200)
        fprintf(stderr, "ks-load: list -> %d\n", status);
    cJSON *o = json_parse(body, len, NULL);
    G.list_items = json_len(json_get(o, "items"));
    G.list_bytes = len;
    cJSON_Delete(o);
    G.phase = PH_PAGED;
    start_phase();
}

static void on_page_resp(conn *c, int status, const char *body, size_t len)
{
    if (status != 200) {
        fprintf(stderr, "ks-load: page -> %d %.*s\n", status, (int)(len > 300 ? 300 : len), body);
        exit(1);
    }
    pages++;
    cJSON *o = json_parse(body, len, NULL);
    G.list_items += json_len(json_get(o, "items"));
    const char *cont = json_get_str(o, "metadata.continue");
    if (cont && *cont) {
        /* percent-encode the token for the query string */
        size_t k = 0;
        for (const char *p = cont; *p && k + 4 < sizeof(G.cont); p++) {
            if (*p == '+' || *p == '/' || *p == '=')
                k += (size_t)snprintf(G.cont + k, sizeof(G.cont) - k, "%%%02X", (unsigned char)*p);
            else
                G.cont[k++] = *p;
        }
        G.cont[k] = '\0';
        cJSON_Delete(o);
        char path[2600];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?limit=%d&continue=%s", G.ns, G.page, G.cont);
        send_req(c, "GET", path, NULL);
        return;
    }
    cJSON_Delete(o);
    t_paged1 = now_s();
    G.phase = PH_DONE;
    start_phase();
}

static uv_timer_t poll_timer;

static void fanout_check(uv_timer_t *t)
{
    (void)t;
    int all = 1;
    for (int i = 0; i < G.watchers; i++)
        if (G.ww[i].added < (unsigned long long)G.n)
            all = 0;
    if (all || now_s() - t_create1 > 60) {
        if (!all)
            fprintf(stderr, "ks-load: watchers did not see every ADDED within 60 s\n");
        t_fanout1 = now_s();
        uv_timer_stop(&poll_timer);
        if (G.pid > 0) {
            rss_after_create = rss_kib(G.pid);
        }
        G.phase = PH_LIST;
        start_phase();
    }
}

static void start_phase(void)
{
    char path[512];
    switch (G.phase) {
    case PH_WATCH_CONNECT:
        if (++connected_watchers < G.watchers)
            return;
        for (int i = 0; i < G.watchers; i++) {
            G.ww[i].watch = 1;
            snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?watch=1&allowWatchBookmarks=true", G.ns);
            send_req(&G.ww[i], "GET", path, NULL);
        }
        G.phase = PH_CONNECT;
        for (int i = 0; i < G.conns; i++)
            conn_open(&G.cc[i], i);
        return;
    case PH_CONNECT:
        if (++connected_conns < G.conns)
            return;
        G.phase = PH_CREATE;
        t_create0 = now_s();
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", G.ns);
        for (int i = 0; i < G.inflight && G.sent < G.n; i++) {
            conn *c = &G.cc[i % G.conns];
            c->on_resp = on_create_resp;
            char *b = pod_body(G.sent++);
            send_req(c, "POST", path, b);
            free(b);
        }
        return;
    case PH_FANOUT:
        uv_timer_init(G.loop, &poll_timer);
        uv_timer_start(&poll_timer, fanout_check, 0, 5);
        return;
    case PH_LIST:
        G.cc[0].on_resp = on_list_resp;
        t_list0 = now_s();
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", G.ns);
        send_req(&G.cc[0], "GET", path, NULL);
        return;
    case PH_PAGED:
        G.list_items = 0;
        G.cc[0].on_resp = on_page_resp;
        t_paged0 = now_s();
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?limit=%d", G.ns, G.page);
        send_req(&G.cc[0], "GET", path, NULL);
        return;
    case PH_DONE:
        if (G.pid > 0)
            rss_after_list = rss_kib(G.pid);
        uv_close((uv_handle_t *)&poll_timer, NULL);
        for (int i = 0; i < G.conns; i++) {
            uv_read_stop((uv_stream_t *)&G.cc[i].tcp);
            uv_close((uv_handle_t *)&G.cc[i].tcp, NULL);
        }
        for (int i = 0; i < G.watchers; i++) {
            uv_read_stop((uv_stream_t *)&G.ww[i].tcp);
            uv_close((uv_handle_t *)&G.ww[i].tcp, NULL);
        }
        return;
    }
}

int main(int argc, char **argv)
{
    mem_init();
    const char *url = NULL;
    G.n = 8192;
    G.conns = 8;
    G.inflight = 64;
    G.watchers = 5;
    G.page = 500;
    G.ns = "default";
    static const struct option opts[] = {
        {"url", 1, 0, 'u'},      {"n", 1, 0, 'n'},   {"conns", 1, 0, 'c'}, {"inflight", 1, 0, 'k'},
        {"watchers", 1, 0, 'w'}, {"pid", 1, 0, 'p'}, {"page", 1, 0, 'P'},  {"namespace", 1, 0, 'N'},
        {"help", 0, 0, 'h'},     {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "u:n:c:k:w:p:P:N:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'n':
            G.n = atoi(optarg);
            break;
        case 'c':
            G.conns = atoi(optarg);
            break;
        case 'k':
            G.inflight = atoi(optarg);
            break;
        case 'w':
            G.watchers = atoi(optarg);
            break;
        case 'p':
            G.pid = atoi(optarg);
            break;
        case 'P':
            G.page = atoi(optarg);
            break;
        case 'N':
            G.ns = optarg;
            break;
        default:
            fprintf(stderr, "usage: ks-load --url http://127.0.0.1:PORT [-n N] [-c conns] [-k inflight] "
                            "[--watchers W] [--pid PID] [--page P] [--namespace NS]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (url == NULL || sscanf(url, "http://%63[^:]:%d", G.host, &G.port) != 2) {
        fprintf(stderr, "ks-load: --url http://HOST:PORT is required (plain HTTP)\n");
        return 2;
    }
    if (G.conns < 1)
        G.conns = 1;
    if (G.inflight < G.conns)
        G.inflight = G.conns;
    G.loop = uv_default_loop();
    G.cc = xcalloc((size_t)G.conns, sizeof(conn));
    G.ww = xcalloc((size_t)(G.watchers ? G.watchers : 1), sizeof(conn));
    if (G.watchers == 0) {
        connected_watchers = -1;
        G.phase = PH_WATCH_CONNECT;
        start_phase();
    } else {
        for (int i = 0; i < G.watchers; i++)
            conn_open(&G.ww[i], 1000 + i);
    }
    long rss0 = G.pid > 0 ? rss_kib(G.pid) : -1;
    uv_run(G.loop, UV_RUN_DEFAULT);
    double create_s = t_create1 - t_create0;
    printf("creates: %d pods in %.3f s = %.0f creates/s (%d in flight over %d connections, %d failed)\n", G.n,
           create_s, G.n / create_s, G.inflight, G.conns, G.failed);
    printf("watch fan-out: %d watchers saw every ADDED %.3f s after the last create\n", G.watchers,
           t_fanout1 - t_create1);
    printf("list: %.1f MB in %.3f s (one call)\n", G.list_bytes / 1e6, t_list1 - t_list0);
    printf("paged list: %d items in %d pages of %d in %.3f s\n", G.list_items, pages, G.page,
           t_paged1 - t_paged0);
    if (G.pid > 0)
        printf("kubesim RSS: %.1f MiB before, %.1f MiB after creates, %.1f MiB after lists (%.2f KiB/pod)\n",
               rss0 / 1024.0, rss_after_create / 1024.0, rss_after_list / 1024.0,
               (double)(rss_after_create - rss0) / G.n);
    printf("{\"n\":%d,\"inflight\":%d,\"conns\":%d,\"watchers\":%d,\"create_s\":%.4f,\"creates_per_s\":%.0f,"
           "\"fanout_s\":%.4f,\"list_s\":%.4f,\"list_bytes\":%zu,\"paged_s\":%.4f,\"pages\":%d,\"rss_kib_"
           "before\":%ld,"
           "\"rss_kib_after_create\":%ld,\"rss_kib_after_list\":%ld,\"failed\":%d}\n",
           G.n, G.inflight, G.conns, G.watchers, create_s, G.n / create_s, t_fanout1 - t_create1,
           t_list1 - t_list0, G.list_bytes, t_paged1 - t_paged0, pages, rss0, rss_after_create,
           rss_after_list, G.failed);
    for (int i = 0; i < G.conns; i++)
        buf_free(&G.cc[i].in);
    for (int i = 0; i < G.watchers; i++)
        buf_free(&G.ww[i].in);
    free(G.cc);
    free(G.ww);
    uv_loop_close(G.loop);
    return G.failed ? 1 : 0;
}

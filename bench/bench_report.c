/* bench_report: tables (aligned text on stdout, Markdown into the report),
 * the targets summary, and SVG plots written without any library. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"

#define MAX_COLS 12

struct bx_table {
    char *title;
    int ncols;
    char *head[MAX_COLS];
    char ***rows;
    size_t nrows, cap;
    char *notes;
};

bx_table *bx_table_new(const char *title, int ncols, ...)
{
    bx_table *t = xcalloc(1, sizeof(*t));
    va_list ap;
    t->title = xstrdup(title);
    t->ncols = ncols > MAX_COLS ? MAX_COLS : ncols;
    va_start(ap, ncols);
    for (int i = 0; i < t->ncols; i++)
        t->head[i] = xstrdup(va_arg(ap, const char *));
    va_end(ap);
    return t;
}

void bx_table_row(bx_table *t, ...)
{
    va_list ap;
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->rows = xrealloc(t->rows, t->cap * sizeof(char **));
    }
    char **r = xcalloc((size_t)t->ncols, sizeof(char *));
    va_start(ap, t);
    for (int i = 0; i < t->ncols; i++) {
        const char *c = va_arg(ap, const char *);
        r[i] = xstrdup(c ? c : "");
    }
    va_end(ap);
    t->rows[t->nrows++] = r;
}

void bx_table_note(bx_table *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    char *n = xasprintf("%s%s%s", t->notes ? t->notes : "", t->notes ? "\n" : "", s);
    free(s);
    free(t->notes);
    t->notes = n;
}

/* Display width: UTF-8 continuation bytes take no column. */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

void bx_table_emit(bx_ctx *x, bx_table *t)
{
    int w[MAX_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = width(t->head[c]);
        for (size_t r = 0; r < t->nrows; r++)
            if (width(t->rows[r][c]) > w[c])
                w[c] = width(t->rows[r][c]);
    }
    bx_progress_clear(x);
    printf("%s\n", t->title);
    for (size_t r = 0; r <= t->nrows; r++) {
        char **cells = r == 0 ? t->head : t->rows[r - 1];
        for (int c = 0; c < t->ncols; c++) {
            int pad = w[c] - width(cells[c]);
            if (c == 0)
                printf("  %s%*s", cells[c], pad, "");
            else
                printf("  %*s%s", pad, "", cells[c]);
        }
        printf("\n");
        if (r == 0) {
            printf("  ");
            for (int c = 0; c < t->ncols; c++)
                for (int k = 0; k < w[c] + (c ? 2 : 0); k++)
                    putchar('-');
            printf("\n");
        }
    }
    if (t->notes) {
        char *copy = xstrdup(t->notes);
        for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n"))
            printf("  %s\n", line);
        free(copy);
    }
    printf("\n");
    fflush(stdout);

    /* Markdown */
    buf_t *b = &x->report;
    int rc = buf_printf(b, "### %s\n\n|", t->title);
    for (int c = 0; c < t->ncols; c++)
        rc |= buf_printf(b, " %s |", t->head[c]);
    rc |= buf_puts(b, "\n|");
    for (int c = 0; c < t->ncols; c++)
        rc |= buf_puts(b, c == 0 ? "---|" : "---:|");
    rc |= buf_puts(b, "\n");
    for (size_t r = 0; r < t->nrows; r++) {
        rc |= buf_puts(b, "|");
        for (int c = 0; c < t->ncols; c++)
            rc |= buf_printf(b, " %s |", t->rows[r][c]);
        rc |= buf_puts(b, "\n");
    }
    if (t->notes) {
        rc |= buf_puts(b, "\n");
        char *copy = xstrdup(t->notes);
        for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n"))
            rc |= buf_printf(b, "%s  \n", line);
        free(copy);
    }
    rc |= buf_puts(b, "\n");
    (void)rc; /* the report buffer is unlimited */

    for (size_t r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++)
            free(t->rows[r][c]);
        free(t->rows[r]);
    }
    for (int c = 0; c < t->ncols; c++)
        free(t->head[c]);
    free(t->rows);
    free(t->notes);
    free(t->title);
    free(t);
}

cJSON *bx_num(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

void bx_target(bx_ctx *x, const char *target, const char *measured, const char *limit, double ratio,
               const char *verdict, const char *note)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "target", target);
    cJSON_AddStringToObject(o, "measured", measured ? measured : "");
    cJSON_AddStringToObject(o, "limit", limit ? limit : "");
    cJSON_AddItemToObject(o, "ratio", bx_num(ratio));
    cJSON_AddStringToObject(o, "verdict", verdict ? verdict : "");
    cJSON_AddStringToObject(o, "note", note ? note : "");
    cJSON_AddItemToArray(x->targets, o);
}

const char *bx_fmt_s(char *buf, size_t len, double s)
{
    if (!isfinite(s))
        snprintf(buf, len, "n/a");
    else if (s >= 10)
        snprintf(buf, len, "%.1f s", s);
    else if (s >= 1)
        snprintf(buf, len, "%.2f s", s);
    else if (s >= 0.01)
        snprintf(buf, len, "%.0f ms", s * 1e3);
    else if (s >= 0.001)
        snprintf(buf, len, "%.1f ms", s * 1e3);
    else
        snprintf(buf, len, "%.0f µs", s * 1e6);
    return buf;
}

int bx_write_file(const char *path, const char *s, size_t len)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return OP_ERRNO(errno);
    size_t w = fwrite(s, 1, len, f);
    int rc = fclose(f);
    return w == len && rc == 0 ? 0 : OP_EIO;
}

char *bx_out_path(bx_ctx *x, const char *name)
{
    return xasprintf("%s/%s", x->out_dir, name);
}

/* ------------------------------------------------------------------ */
/* SVG */

#define SVG_W 760
#define SVG_H 420
#define ML 80 /* margins */
#define MR 20
#define MT 40
#define MB 60

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

/* A "nice" tick step for a range: 1, 2 or 5 times a power of ten. */
static double nice_step(double range, int ticks)
{
    if (range <= 0)
        return 1;
    double raw = range / ticks, p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void esc(buf_t *b, const char *s)
{
    for (; *s; s++) {
        int rc = 0;
        if (*s == '<')
            rc = buf_puts(b, "&lt;");
        else if (*s == '>')
            rc = buf_puts(b, "&gt;");
        else if (*s == '&')
            rc = buf_puts(b, "&amp;");
        else
            rc = buf_putc(b, *s);
        (void)rc;
    }
}

static void svg_head(buf_t *b, const char *title, const char *xlabel, const char *ylabel)
{
    int rc = buf_printf(b,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "font-family=\"sans-serif\" font-size=\"12\">\n"
                        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                        "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">",
                        SVG_W, SVG_H, SVG_W / 2);
    esc(b, title);
    rc |= buf_printf(b, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">",
                     ML + (SVG_W - ML - MR) / 2, SVG_H - 15);
    esc(b, xlabel ? xlabel : "");
    rc |= buf_printf(
        b, "</text>\n<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">",
        MT + (SVG_H - MT - MB) / 2, MT + (SVG_H - MT - MB) / 2);
    esc(b, ylabel);
    rc |= buf_puts(b, "</text>\n");
    (void)rc;
}

static void svg_yaxis(buf_t *b, double ymax)
{
    double step = nice_step(ymax, 5);
    int rc = 0;
    for (double v = 0; v <= ymax * 1.0001; v += step) {
        double py = SVG_H - MB - (v / ymax) * (SVG_H - MT - MB);
        rc |= buf_printf(b,
                         "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                         "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                         ML, SVG_W - MR, py, py, ML - 6, py + 4, v);
    }
    rc |= buf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, SVG_W - MR,
                     SVG_H - MB, SVG_H - MB);
    rc |= buf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, ML, MT,
                     SVG_H - MB);
    (void)rc;
}

static void svg_legend(buf_t *b, const bx_series *s, size_t ns)
{
    int rc = 0;
    for (size_t i = 0; i < ns; i++) {
        int y = MT + 8 + (int)i * 18;
        rc |= buf_printf(b,
                         "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>"
                         "<text x=\"%d\" y=\"%d\">",
                         ML + 12, y - 2, colors[i % 6], ML + 32, y + 4);
        esc(b, s[i].name);
        rc |= buf_puts(b, "</text>\n");
    }
    (void)rc;
}

static int svg_finish(buf_t *b, const char *path)
{
    int rc = buf_puts(b, "</svg>\n");
    if (rc == 0)
        rc = bx_write_file(path, b->data, b->len);
    buf_free(b);
    return rc;
}

int bx_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                 const bx_series *s, size_t ns)
{
    double xmax = 0, ymax = 0;
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < s[i].n; k++) {
            if (isfinite(s[i].x[k]) && s[i].x[k] > xmax)
                xmax = s[i].x[k];
            if (isfinite(s[i].y[k]) && s[i].y[k] > ymax)
                ymax = s[i].y[k];
        }
    if (xmax <= 0)
        xmax = 1;
    if (ymax <= 0)
        ymax = 1;
    double xs = nice_step(xmax, 8), ys = nice_step(ymax, 5);
    xmax = ceil(xmax / xs) * xs;
    ymax = ceil(ymax / ys) * ys;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    svg_head(&b, title, xlabel, ylabel);
    svg_yaxis(&b, ymax);
    int rc = 0;
    for (double v = 0; v <= xmax * 1.0001; v += xs) {
        double px = ML + (v / xmax) * (SVG_W - ML - MR);
        rc |= buf_printf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px,
                         SVG_H - MB + 16, v);
    }
    for (size_t i = 0; i < ns; i++) {
        if (s[i].n == 0)
            continue;
        rc |= buf_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"",
                         colors[i % 6]);
        /* thin very long series: at most ~2000 points per line */
        size_t stride = s[i].n > 2000 ? s[i].n / 2000 : 1;
        double prev_py = SVG_H - MB;
        for (size_t k = 0; k < s[i].n; k += stride) {
            size_t j = k + stride >= s[i].n ? s[i].n - 1 : k;
            double px = ML + (s[i].x[j] / xmax) * (SVG_W - ML - MR);
            double py = SVG_H - MB - (s[i].y[j] / ymax) * (SVG_H - MT - MB);
            if (s[i].step && k > 0)
                rc |= buf_printf(&b, "%.1f,%.1f ", px, prev_py);
            rc |= buf_printf(&b, "%.1f,%.1f ", px, py);
            prev_py = py;
            if (j == s[i].n - 1)
                break;
        }
        rc |= buf_puts(&b, "\"/>\n");
    }
    (void)rc;
    svg_legend(&b, s, ns);
    return svg_finish(&b, path);
}

int bx_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                size_t ncat, const bx_series *s, size_t ns)
{
    double ymax = 0;
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < s[i].n && k < ncat; k++)
            if (isfinite(s[i].y[k]) && s[i].y[k] > ymax)
                ymax = s[i].y[k];
    if (ymax <= 0)
        ymax = 1;
    double ys = nice_step(ymax, 5);
    ymax = ceil(ymax / ys) * ys;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    svg_head(&b, title, NULL, ylabel);
    svg_yaxis(&b, ymax);
    double slot = (double)(SVG_W - ML - MR) / (double)(ncat ? ncat : 1);
    double bw = slot * 0.8 / (double)(ns ? ns : 1);
    int rc = 0;
    for (size_t k = 0; k < ncat; k++) {
        double x0 = ML + slot * (double)k + slot * 0.1;
        for (size_t i = 0; i < ns; i++) {
            double v = k < s[i].n && isfinite(s[i].y[k]) ? s[i].y[k] : 0;
            double h = v / ymax * (SVG_H - MT - MB);
            rc |= buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                             x0 + bw * (double)i, SVG_H - MB - h, bw, h, colors[i % 6]);
        }
        rc |= buf_printf(&b,
                         "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\" font-size=\"10\" "
                         "transform=\"rotate(-35 %.1f %d)\">",
                         ML + slot * ((double)k + 0.5), SVG_H - MB + 14, ML + slot * ((double)k + 0.5),
                         SVG_H - MB + 14);
        esc(&b, categories[k]);
        rc |= buf_puts(&b, "</text>\n");
    }
    (void)rc;
    svg_legend(&b, s, ns);
    return svg_finish(&b, path);
}

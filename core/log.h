/* log: leveled logging to stderr, klog-like text or one JSON object a line.
 *
 * Text:  I1122 00:07:51.123456 12345 nodeset.c:42] scaled up nodeset=ns/a
 * JSON:  {"ts":"2026-11-22T00:07:51.123456Z","level":"info","caller":"nodeset.c:42","msg":"...",
 *         "controller":"nodeset-controller","namespace":"slurm","name":"cpu","reconcileID":"..."}
 *
 * The last four JSON fields, controller-runtime's names, are there while a
 * work queue's handler runs (log_reconcile_begin/end, which core/wq calls
 * around every handler): a log pipeline can select one object's lines, or
 * one reconcile's, without parsing msg. The text form stays klog's.
 *
 * Messages are formatted with printf rules; by convention the message is a
 * short sentence followed by key=value pairs. The macros skip formatting
 * entirely when the level is disabled, so debug logging on hot paths is cheap.
 */
#ifndef OP_LOG_H
#define OP_LOG_H

#include "core/mem.h"

enum log_level { LOGL_ERROR = 0, LOGL_WARN, LOGL_INFO, LOGL_DEBUG, LOGL_TRACE };
enum log_format { LOGF_TEXT = 0, LOGF_JSON };

extern int log__level;

/** Set the level and output format (default: info, text). */
void log_setup(int level, int format);
/** Parse "error|warn|info|debug|trace" or a number 0..4; -1 when unknown. */
int log_level_parse(const char *s);
/** Parse "text|json"; -1 when unknown. */
int log_format_parse(const char *s);
void log_msg(int level, const char *file, int line, const char *fmt, ...) OP_PRINTF(4, 5);

/** The reconcile in progress, until log_reconcile_end: controller names
 *  the work queue, key is "namespace/name" (or "name" for a cluster-scoped
 *  object). Both are copied (bounded); a new reconcileID (a random UUID,
 *  as controller-runtime's) is made for it. One at a time: the process has
 *  one loop thread and handlers do not nest. */
void log_reconcile_begin(const char *controller, const char *key);
void log_reconcile_end(void);
/** The reconcileID of the reconcile in progress ("" when none). */
const char *log_reconcile_id(void);

#define log_enabled(l) ((l) <= log__level)
#define log_at(l, ...)                                                                                       \
    do {                                                                                                     \
        if (log_enabled(l))                                                                                  \
            log_msg((l), __FILE__, __LINE__, __VA_ARGS__);                                                   \
    } while (0)
#define log_error(...) log_at(LOGL_ERROR, __VA_ARGS__)
#define log_warn(...) log_at(LOGL_WARN, __VA_ARGS__)
#define log_info(...) log_at(LOGL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOGL_DEBUG, __VA_ARGS__)
#define log_trace(...) log_at(LOGL_TRACE, __VA_ARGS__)

#endif

#ifndef OP_CORE_RFC3339_H
#define OP_CORE_RFC3339_H

/* RFC 3339 timestamps, the one place that parses and formats them.
 *
 * Kubernetes writes "2006-01-02T15:04:05Z" (metav1.Time) and
 * "2006-01-02T15:04:05.000000Z" (metav1.MicroTime: Events, Leases); users write
 * any RFC 3339 form into fields such as a ScheduledUpdate's startTime, so the
 * parser also takes fractions and numeric offsets. Times are seconds since the
 * epoch, UTC. */

#include <stdint.h>

/* Room for "YYYY-MM-DDThh:mm:ssZ" and its NUL. */
#define RFC3339_LEN 21
/* Room for "YYYY-MM-DDThh:mm:ss.uuuuuuZ" and its NUL. */
#define RFC3339_MICRO_LEN 28

/* Parses s: date, 'T' (or 't' or ' '), time, an optional fraction (ignored),
 * then 'Z', 'z' or "+hh:mm"/"-hh:mm"; nothing may follow. Stores the instant
 * in *out and returns 0, or returns -1 (s NULL or malformed; *out untouched).
 * When zulu is not NULL it is set to 1 when the zone was written 'Z' or 'z'. */
int rfc3339_parse(const char *s, int64_t *out, int *zulu);

/* The callers' usual form: the instant, or 0 for NULL or a malformed string
 * (they treat the epoch as "not set"). */
int64_t rfc3339_secs(const char *s);

/* "YYYY-MM-DDThh:mm:ssZ" for t (years outside 0..9999 are clamped). */
void rfc3339_format(int64_t t, char out[RFC3339_LEN]);

/* "YYYY-MM-DDThh:mm:ss.uuuuuuZ" for t and usec microseconds. */
void rfc3339_format_micro(int64_t t, long usec, char out[RFC3339_MICRO_LEN]);

/* The wall clock now, plus offset_s seconds, as rfc3339_format. */
void rfc3339_now(char out[RFC3339_LEN], int64_t offset_s);

/* The wall clock now, with microseconds (metav1.MicroTime). */
void rfc3339_now_micro(char out[RFC3339_MICRO_LEN]);

#endif

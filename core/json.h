/* json: the thin boundary around cJSON.
 *
 * Everything that reads or writes JSON goes through cJSON trees; this module
 * adds what the rest of the project needs on top (dotted-path access, typed
 * getters with defaults, RFC 7386 merge patches, escaping into a buf) and
 * keeps cJSON-specific knowledge in one place, so a faster parser can
 * replace it later.
 *
 * Paths are dot-separated object keys ("metadata.name"). A key containing a
 * dot cannot be reached by path; use json_child() for such keys (annotations).
 */
#ifndef OP_JSON_H
#define OP_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/buf.h"

/** Parse len bytes. NULL on malformed input (then *errpos, if given, points
 *  near the problem). Trailing whitespace is allowed, trailing garbage is not. */
cJSON *json_parse(const char *s, size_t len, const char **errpos);

/** json_parse, then json_dedupe_keys: for input written by people or
 *  unknown clients (API request bodies), where duplicate keys can occur. */
cJSON *json_parse_untrusted(const char *s, size_t len, const char **errpos);
/** Go's decoder (and so the API server) keeps the last of duplicate object
 *  keys; cJSON keeps all of them and lookups see the first. Drop the earlier
 *  duplicates everywhere in the tree so readers see what Kubernetes sees.
 *  json_parse does not do this (it costs ~30% on large lists, and the API
 *  server and slurmrestd never send duplicates). */
void json_dedupe_keys(cJSON *o);

/** The heap bytes a tree allocated outside an arena takes: mem_footprint
 *  (core/mem.h) of every item and of every string it owns. For caches that
 *  keep JSON and count what they hold. NULL gives 0. */
size_t json_heap_bytes(const cJSON *j);

/* Arenas: trees that are parsed, read and dropped (watch events, LIST pages)
 * are allocated from a bump arena instead of one malloc per node and string:
 * malloc/free were a third of the operator's CPU during a scale-out.
 * A tree parsed into an arena is read-only: never cJSON_Delete it or any
 * part of it, never attach it to another tree (duplicate what you keep);
 * json_arena_reset releases every tree parsed into the arena at once. An
 * arena may be used from one thread at a time (parsing on the threadpool,
 * reading on the loop is fine). */
typedef struct json_arena json_arena;

json_arena *json_arena_new(void);
/** Forget every tree parsed into a (keeping one chunk for the next parse). */
void json_arena_reset(json_arena *a);
void json_arena_free(json_arena *a);
/** json_parse into the arena. */
cJSON *json_arena_parse(json_arena *a, const char *s, size_t len, const char **errpos);
/** Bytes the arena holds (for tests). */
size_t json_arena_bytes(const json_arena *a);
/** The most bytes the arena ever held (for measurements). */
size_t json_arena_peak(const json_arena *a);
/** Bound the bytes the arena may hold (0, the default: no bound). The
 *  bound is hard: an allocation past it is refused, so json_arena_parse
 *  fails (NULL) instead of growing, and json_arena_exhausted() tells that
 *  failure from a syntax error until the next reset. For documents from a
 *  peer, whose tree can take many times their text ("[0,0,...]" takes ~30x). */
void json_arena_set_limit(json_arena *a, size_t max_bytes);
int json_arena_exhausted(const json_arena *a);

/** Child of an object by exact key (case-sensitive), or NULL. */
const cJSON *json_child(const cJSON *o, const char *key);
/** Walk a dotted path of object keys; NULL if any step is missing. */
const cJSON *json_get(const cJSON *o, const char *path);
/** String at path, or NULL when missing or not a string. */
const char *json_get_str(const cJSON *o, const char *path);
/** String at path, or dflt. */
const char *json_get_str_or(const cJSON *o, const char *path, const char *dflt);
/** Integer at path (a JSON number, truncated), or dflt when missing/not a number. */
long long json_get_int(const cJSON *o, const char *path, long long dflt);
/** A number as a long long, saturated into the representable range (a C
 *  cast of an out-of-range double is undefined behaviour); dflt for
 *  non-numbers, NaN and NULL. */
long long json_num_ll(const cJSON *v, long long dflt);
/** The same, clamped into [lo, hi]. */
long long json_num_clamp(const cJSON *v, long long dflt, long long lo, long long hi);
/** Boolean at path, or dflt when missing/not a boolean. */
int json_get_bool(const cJSON *o, const char *path, int dflt);
/** Array/object length (0 for NULL or scalars). */
int json_len(const cJSON *o);

/** Object at key inside o, created (replacing a non-object) if absent. */
cJSON *json_obj_ensure(cJSON *o, const char *key);
/** Object at dotted path, creating every missing level. */
cJSON *json_obj_path_ensure(cJSON *o, const char *path);
/** Replace or add o[key] = item (takes ownership of item). */
void json_set(cJSON *o, const char *key, cJSON *item);
void json_set_str(cJSON *o, const char *key, const char *s);
void json_set_int(cJSON *o, const char *key, long long v);
void json_set_bool(cJSON *o, const char *key, int v);
void json_del(cJSON *o, const char *key);

/** Compact serialisation (caller frees with free()). */
char *json_dump(const cJSON *o);
/** Append the compact serialisation to b. */
int json_dump_buf(const cJSON *o, buf_t *b) OP_WUR;
/** Append s as a quoted JSON string to b. */
int json_quote_buf(buf_t *b, const char *s) OP_WUR;
/** Deep equality (object key order does not matter). */
int json_equal(const cJSON *a, const cJSON *b);
/** True when every field of want is in have with the same value (objects:
 *  recursively; arrays: same length, element-wise subset; scalars: equal;
 *  a NULL want is a subset of anything, a missing field matches a null). */
int json_subset(const cJSON *want, const cJSON *have);
/** Canonical JSON: compact, object keys sorted by byte value at every level,
 *  strings escaped as json_quote_buf does, numbers as integers ("%.0f") when
 *  integral and below 2^53 in magnitude, else "%.17g" (non-finite: null).
 *  The same tree gives the same bytes on every machine, so its hash can name
 *  a revision; malloc'd. */
char *json_canonical(const cJSON *v);

/** RFC 7386: apply patch to target in place. A non-object patch replaces the
 *  whole target: then the new value is returned and target is freed, so
 *  always use the return value (target = json_merge_patch(target, patch)). */
cJSON *json_merge_patch(cJSON *target, const cJSON *patch);
/** RFC 7386: a patch that turns from into to; NULL when they are equal. */
cJSON *json_merge_diff(const cJSON *from, const cJSON *to);

#endif

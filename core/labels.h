/* labels: Kubernetes label selectors, parsed once and matched many times.
 *
 * Two sources: the string syntax of `?labelSelector=` and Scale.status.selector
 * ("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3"), and the LabelSelector object
 * of resources ({"matchLabels":{...},"matchExpressions":[{key,operator,values}]}).
 * Requirements are ANDed. As in Kubernetes, `!=` and `notin` also match
 * objects that lack the key, and an empty selector matches everything.
 *
 * Matching takes a lookup function so that both cJSON label objects and the
 * store's compact label arrays can be matched without conversion.
 */
#ifndef OP_LABELS_H
#define OP_LABELS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/buf.h"

typedef struct lsel lsel;

enum lsel_op { LSEL_EQ, LSEL_NEQ, LSEL_IN, LSEL_NOTIN, LSEL_EXISTS, LSEL_NOTEXISTS, LSEL_GT, LSEL_LT };

/** Returns the value of label key, or NULL when the object lacks it. */
typedef const char *(*lsel_lookup_fn)(void *ctx, const char *key);

/** Parse the string syntax. "" gives the empty selector. 0 or OP_EPARSE
 *  with a message in err ("unable to parse requirement: ..."). */
int lsel_parse(const char *s, lsel **out, char *err, size_t errlen);
/** Build from a LabelSelector object. NULL json gives the empty selector.
 *  OP_EPARSE on unknown operators or malformed values. */
int lsel_from_json(const cJSON *sel, lsel **out, char *err, size_t errlen);
/** Selector requiring every key=value pair of a labels object (matchLabels). */
lsel *lsel_from_map(const cJSON *labels);
void lsel_free(lsel *s);

int lsel_is_empty(const lsel *s);
int lsel_match(const lsel *s, lsel_lookup_fn get, void *ctx);
/** Match against a JSON object of string labels (NULL = no labels). */
int lsel_match_json(const lsel *s, const cJSON *labels);
/** Canonical string form (requirements in the order given). */
int lsel_to_buf(const lsel *s, buf_t *b) OP_WUR;
/** If the selector is made only of key=value requirements, the value it
 *  requires for key, else NULL (lets callers use an index). */
const char *lsel_required_value(const lsel *s, const char *key);

/** Validation helpers shared with kubesim's object validation. */
int label_key_valid(const char *k);
int label_value_valid(const char *v);

#endif

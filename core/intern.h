/* intern: reference-counted string interning.
 *
 * The store keeps thousands of objects whose label keys, label values,
 * namespaces and owner kinds repeat ("app.kubernetes.io/name" = "slurmd" on
 * every worker pod). Interning stores each distinct string once; equality of
 * interned strings is pointer equality. Strings are reference-counted, so a
 * value that is unique to one object (a pod-name label) is freed with it.
 * Single-threaded: use from the loop thread only.
 */
#ifndef OP_INTERN_H
#define OP_INTERN_H

#include <stddef.h>

/** Interned copy of s (refcount +1). NULL gives NULL. */
const char *istr_get(const char *s);
const char *istr_getn(const char *s, size_t n);
/** Another reference to an interned string. */
const char *istr_ref(const char *is);
/** Drop a reference; the string is freed at zero. NULL is allowed. */
void istr_put(const char *is);
/** Number of distinct live strings, and the heap bytes they and the table
 *  take (mem_footprint of each allocation): for metrics and tests. */
size_t istr_count(void);
size_t istr_bytes(void);

#endif

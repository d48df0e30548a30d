/* yaml: YAML documents into cJSON trees (libyaml).
 *
 * Used for kubeconfig files, the operator's own configuration, CRD
 * manifests and server-side-apply bodies. Scalars are typed the way
 * Kubernetes' YAML decoder types them (YAML 1.1 core subset): plain
 * true/false, null/~ and empty, integers and floats become JSON values;
 * quoted scalars and everything else stay strings. Anchors and aliases are
 * refused (they are a billion-laughs vector and kubeconfigs never use them).
 * Input is capped by the caller: pass at most what you are willing to parse.
 */
#ifndef OP_YAML_H
#define OP_YAML_H

#include <cjson/cJSON.h>
#include <stddef.h>

/** Parse every document of a YAML stream. Returns a JSON array with one
 *  element per non-empty document, or NULL with a message in err (which is
 *  "line L column C: problem"). */
cJSON *yaml_parse_all(const char *s, size_t len, char *err, size_t errlen);
/** Parse exactly one document (the first; an empty stream gives NULL and an
 *  error). */
cJSON *yaml_parse(const char *s, size_t len, char *err, size_t errlen);
/** Read a whole file (at most max bytes) and parse its first document. */
cJSON *yaml_parse_file(const char *path, size_t max, char *err, size_t errlen);

#endif

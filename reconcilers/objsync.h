/* objsync: converge one owned object with minimal writes.
 *
 * Reconcilers build the object they want (desired JSON: apiVersion, kind,
 * metadata with name, namespace, labels, annotations, ownerReferences, and
 * spec/data/...) and call objsync_ensure. The object in the cache is
 * compared with it as a *subset*: every field we set must be present with
 * our value, and everything else on the live object (server defaults such
 * as a Service's clusterIP, labels others added) is left alone. Missing
 * object: create it (AlreadyExists is fine: the cache is behind). Differing
 * fields: one JSON merge patch carrying only what differs: objects are
 * descended into, and a differing scalar or array is sent whole (merge
 * patches replace arrays); ownerReferences are replaced as a whole, and so
 * is the data of ConfigMaps and Secrets (a key we no longer generate is
 * removed). An object already in sync costs no request.
 * Immutable ConfigMaps and Secrets are never patched (Slinky's rule).
 *
 * Ownership: an existing object is written only when it is ours
 * (objsync_owned): it carries an ownerReference to an owner the desired
 * object names, or the managed-by label objsync puts on every object it
 * creates. A name taken by anybody else's object is never patched, so a
 * custom resource cannot be used to overwrite, relabel or re-own an object
 * its author could not write himself (a Token naming another Secret, a
 * Controller named after somebody's StatefulSet): objsync_ensure answers
 * OBJSYNC_NOT_OWNED and the caller reports the conflict on the CR.
 * Secrets and ConfigMaps are cached only with the managed-by label, so a
 * foreign one is not seen before the create: AlreadyExists makes objsync GET
 * it; ours by an ownerReference (older than the label) is patched, label
 * included; anybody else's is remembered for 25 s (OBJSYNC_NOT_OWNED without
 * a request) and the callback gets OP_EEXISTS so the caller looks again.
 *
 * Adoption (docs/migrate-from-slinky.md): an object that is ours by an
 * ownerReference but lacks the managed-by label was made by another
 * operator for the same custom resource (Slinky's, before slurmop took its
 * place). It is taken over as it is: the first write adds only the label
 * and OBJSYNC_ADOPTED_ANNOTATION, the hash of what slurmop would have
 * written (objsync_adopted_hash), and nothing else, so a running
 * StatefulSet, Deployment or ConfigMap keeps its pods and its files. While
 * what slurmop would write still has that hash, the object is left alone
 * (OBJSYNC_IN_SYNC). Once it differs (the user changed the custom
 * resource, a NodeSet joined the Controller, ...) the object converges as
 * any other, and the annotation is removed in the same patch.
 *
 * One write per object is in flight at a time: while it is, and after it
 * succeeded until the cache shows its result, further calls for the same
 * object return OBJSYNC_PENDING without writing, so passes in between
 * cannot send duplicate creates or patches (a write answered with the
 * resourceVersion it started from changed nothing and waits for nothing).
 * The completion callback runs when the write finishes (typically it
 * enqueues the owner again).
 *
 * State: all of the above (writes in flight, writes settling, foreign
 * names) lives in an objsync context that the operator creates with its
 * API client and owns (operator.objsync); each call names the cache that
 * holds the live objects of its kind. objsync calls nothing of the
 * operator.
 */
#ifndef OP_OBJSYNC_H
#define OP_OBJSYNC_H

#include <cjson/cJSON.h>

#include "core/kube.h"
#include "core/store.h"

enum objsync_result {
    OBJSYNC_IN_SYNC = 0, /* nothing to do */
    OBJSYNC_WRITING = 1, /* a create or patch was submitted now */
    OBJSYNC_PENDING = 2, /* an earlier write for this object is still in flight */
    OBJSYNC_NOT_OWNED = 3, /* the name is taken by an object we do not own: nothing written */
};

/* The label put on every object objsync creates (and added to the objects
 * it converges): how an object made by this operator is told from one that
 * merely has the same name, and the selector of the Secret and ConfigMap
 * caches. */
#define OBJSYNC_MANAGED_BY_LABEL "app.kubernetes.io/managed-by"
#define OBJSYNC_MANAGED_BY "slurmop"
/* On an adopted object: the hash of what slurmop wanted when it adopted it. */
#define OBJSYNC_ADOPTED_ANNOTATION "slurmop.slinky.slurm.net/adopted"
#define OBJSYNC_HASH_MAX 17

/** The adoption hash of desired (with the managed-by label, as objsync
 *  sends it): 16 hex digits of FNV-1a 64 over its canonical JSON. */
void objsync_adopted_hash(const cJSON *desired, char out[OBJSYNC_HASH_MAX]);
/** 1 when objsync_ensure would leave live as it is for desired because it
 *  is adopted: it lacks the managed-by label but is owned (adopted now), or
 *  it carries OBJSYNC_ADOPTED_ANNOTATION equal to desired's hash. For
 *  callers that would otherwise replace the object (an immutable field
 *  differs). */
int objsync_adopted_keeps(const cJSON *desired, const cJSON *live);

/** 1 when live may be written for desired: live carries an ownerReference
 *  whose uid is one of desired's ownerReferences, or the managed-by label
 *  (OBJSYNC_MANAGED_BY_LABEL = OBJSYNC_MANAGED_BY). */
int objsync_owned(const cJSON *desired, const cJSON *live);

/** 1 when live carries an ownerReference with this uid or the managed-by
 *  label (for deletes, which have no desired object). */
int objsync_owned_by(const cJSON *live, const char *owner_uid);

typedef void (*objsync_cb)(int err, const char *key, void *data);

/** One operator's objsync state. */
typedef struct objsync objsync;

/** A context whose writes go through client (borrowed: it must outlive
 *  every write). */
objsync *objsync_new(kube_client *client);
/** Declare that cache holds only objects with the managed-by label (the
 *  Secret and ConfigMap caches): a create answered AlreadyExists there is
 *  looked at with a GET (see above). 0, or OP_ETOOBIG past 8 caches. */
int objsync_label_filtered(objsync *os, const store *cache);
/** Free the context (NULL: nothing). Meant for after the client is closed,
 *  when no write is left; should one still be in flight, the context goes
 *  with the last one. */
void objsync_free(objsync *os);

/** Converge desired (borrowed) into the API. cache holds the live objects
 *  of res. Returns an objsync_result (OBJSYNC_NOT_OWNED: an object we do
 *  not own has the name; nothing was sent), or a negative code when desired
 *  is malformed (no name). What is sent carries the managed-by label. */
int objsync_ensure(objsync *os, const store *cache, const kube_res *res, const cJSON *desired, objsync_cb cb,
                   void *data);

/** Delete an object we own if it exists (used when a feature is switched
 *  off, e.g. the ServiceMonitor). Same result values. */
int objsync_delete(objsync *os, const store *cache, const kube_res *res, const char *ns, const char *name,
                   objsync_cb cb, void *data);

/** The merge patch objsync_ensure would send to make desired a subset of
 *  live (every field but apiVersion, kind, status and metadata other than
 *  labels, annotations and ownerReferences), or NULL when live is in sync.
 *  For objects that have no cache (fetched with a GET). New object, owned by
 *  the caller. */
cJSON *objsync_diff(const cJSON *desired, const cJSON *live);

/** Writes in flight (for shutdown and tests). */
int objsync_in_flight(const objsync *os);

#endif
